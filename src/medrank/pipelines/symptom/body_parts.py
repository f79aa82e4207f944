"""The body parts a vocabulary names, and whether a term's words name another part than the complaint's.

A retriever matches a complaint's finding word and misses where it is: "a lump in my neck" finds Breast mass (its
synonym "Breast lump"), "swollen knee" finds Lymphadenopathy ("Swollen lymph nodes"). :class:`BodyParts` reads the
parts from the vocabulary itself: HPO names the organs and regions of its branches "Abnormality of the knee",
"Abnormal breast morphology", "Abnormal pharynx physiology". A term names the parts its own wordings (name,
synonyms) hold. Two parts go together when one term's wordings name both: a tissue found everywhere and a region
that holds it ("Neck muscle weakness": neck and muscle; "Finger joint hypermobility": finger and joint), or the
learned and the everyday word for one part (Multiple renal cysts, "Multiple kidney cysts": renal and kidney). A
wording that lists parts ("fingers, hands, toes, and feet", "hands or feet") says nothing of which go together: they
are places side by side.

A term *contradicts* a span when the span names parts, the term's wordings name parts, and no part of one goes
together with a part of the other (Breast mass for "lump in my neck"; not Pruritus, "Itchy skin", for "itchy skin
on my hands"). A term whose wordings name no part (Pruritus for "an itchy rash on my arm", where "arm" is no
part of the list) contradicts nothing: the check only speaks when both sides name a part it knows.

A term is *unnamed* in a complaint when every one of its wordings names a part and the complaint names none that goes
with them: "I am bleeding" says where nothing bleeds, and Gingival bleeding ("Bleeding gums") says the gums. Unless
a word the complaint says names the part by itself: every wording of the vocabulary that holds the word, and names a
part, names one that goes with the term's ("everything's gone blurry": each wording of blurring that names a part
names vision; bleeding is of the gums, the nose, the rectum …).

A part that no wording names the pain of ("my heel hurts": HPO has Foot pain, no heel pain) is read as the part that
holds it (:func:`containing_parts`), from where the vocabulary's hierarchy puts the terms that name it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from medrank.text import beginnings, singular, stop_words

#: vocabulary names that name a part: "Abnormality of the knee", "Abnormal breast morphology",
#: "Abnormal pharynx physiology" (a part of one or two words), and the region whose muscles a name names
#: ("Abnormality of the back musculature": HPO has no branch of the back itself)
PART_NAMES = (
    re.compile(r"^abnormality of the ((?:[a-z]+ )?[a-z]+)$"),
    re.compile(r"^abnormal ((?:[a-z]+ )?[a-z]+) (?:morphology|physiology)$"),
    re.compile(r"^abnormality of the ((?:[a-z]+ )?[a-z]+) musculature$"),
)
_WORD = re.compile(r"[a-z]+")
#: what joins the items of a list in a wording: "and", "or", a comma
_LIST = re.compile(r"\b(?:and|or)\b|,")
#: words of a part-naming name that are not the part ("Abnormality of the skin of the hand" is no part name)
_NOT_PARTS = frozenset({"abnormality", "abnormal", "the", "of", "and", "or", "in", "on", "to", "a", "an"})
#: the words that may stand before a part in a piece that says only where ("my skin", "both knees")
_DETERMINERS = frozenset({"my", "the", "his", "her", "their", "our", "your", "both", "a", "an"})


def stem(word: str) -> str:
    """A word's first five letters, less a plural "s": "pharyngeal" and "pharynx", "breasts" and "breast" meet."""
    return singular(word)[:5]


def _two_parts(word: str, parts: frozenset[str]) -> tuple[str, str] | None:
    """``word`` split into two part words of three letters or more ("toenail": toe, nail), else None."""
    return next(((word[:i], word[i:]) for i in range(3, len(word) - 2) if word[:i] in parts and word[i:] in parts), None)


class BodyParts:
    """Part words, their stems, and which stems go together (see the module docstring).

    A complaint names a part only by the part's own word ("knee", "knees"): a stem is too loose there ("place" is
    no placenta, "physical" no physis). A vocabulary wording names it by its stem too ("pharyngeal", "Pharyngeal
    edema"), the vocabulary's adjectives being regular."""

    def __init__(self, words: Iterable[str], together: Mapping[str, Iterable[str]]) -> None:
        self.words = frozenset(words)
        self.stems = frozenset(stem(w) for w in self.words)
        #: a part word written as two part words ("toenail": toe + nail; "fingernail") → their stems: a complaint that
        #: names it names both parts ("my toenails are yellow" names the nails of Yellow nails)
        self.compounds = {w: frozenset(stem(a) for a in pair) for w in self.words if (pair := _two_parts(w, self.words))}
        self.together = {p: frozenset(q) for p, q in together.items()}
        #: wording → the parts it names: the vocabulary's wordings are read again for every complaint
        self._in_wording: dict[str, frozenset[str]] = {}
        #: a word's beginning → the parts named by the vocabulary wordings that hold it (:meth:`from_wordings`; empty:
        #: no word names a part by itself)
        self.parts_of_word: dict[str, frozenset[str]] = {}
        #: wording → its finding words (:meth:`finding_words`), read once when the vocabulary is (never a complaint's)
        self._wording_words: dict[str, frozenset[str]] = {}

    @classmethod
    def from_wordings(cls, wordings: Mapping[str, Sequence[str]]) -> BodyParts:
        """From a vocabulary's wordings (term id → name and synonyms, :attr:`SetDetector.wordings`): a part is the
        one word a part-naming name (:data:`PART_NAMES`) leaves after its pattern ("lymph node" gives no part: two
        words, and "node" alone says too little)."""
        words: set[str] = set()
        for texts in wordings.values():
            for text in texts:
                for pattern in PART_NAMES:
                    m = pattern.match(text.lower())
                    if m is not None:
                        left = [w for w in m.group(1).split() if w not in _NOT_PARTS]
                        if len(left) == 1:
                            words.add(singular(left[0]))
        parts = cls(words, {})
        together: dict[str, set[str]] = {p: {p} for p in parts.stems}
        for texts in wordings.values():
            # a wording that lists parts ("writhing movements in fingers, hands, toes, and feet", "more than five
            # fingers or toes on hands or feet") names places side by side, not one place two ways: it says nothing of
            # which parts go together
            named = frozenset().union(*(own for text in texts if not (len(own := parts.in_wording(text)) > 1
                                                                     and _LIST.search(text.lower()) is not None)))
            for p in named:
                together[p] |= named
        parts.together = {p: frozenset(q) for p, q in together.items()}
        # each word of a wording that is no part (by its beginning, as :func:`medrank.text.beginnings` reads words) →
        # the parts the wordings that hold it name
        found: dict[str, set[str]] = {}
        for texts in wordings.values():
            for text in texts:
                words = parts._wording_words[text] = parts.finding_words(text)
                for b in words:
                    found.setdefault(b, set()).update(parts.in_wording(text))
        parts.parts_of_word = {b: frozenset(q) for b, q in found.items()}
        return parts

    def finding_words(self, text: str) -> frozenset[str]:
        """The beginnings of the words of ``text`` that are neither a part nor a stop word."""
        stop = stop_words()
        return frozenset(beginnings([w for w in _WORD.findall(text.lower()) if w not in stop and stem(w) not in self.stems]))

    def _finding_words_of(self, wording: str) -> frozenset[str]:
        """:meth:`finding_words` of a wording, as read with the vocabulary (read now for one it did not hold)."""
        words = self._wording_words.get(wording)
        return self.finding_words(wording) if words is None else words

    def implied(self, text: str, wordings: Sequence[str]) -> bool:
        """Whether a word ``text`` says and a term's ``wordings`` hold besides their parts names the term's part by
        itself: every vocabulary wording that holds it and names a part names one that goes with the term's (see the
        module docstring)."""
        theirs = frozenset().union(*(self.in_wording(w) for w in wordings))
        near = frozenset().union(*(self.together.get(p, frozenset({p})) for p in theirs))
        own = frozenset().union(*(self._finding_words_of(w) for w in wordings))
        return any((named := self.parts_of_word.get(b)) and named <= near for b in self.finding_words(text) & own)

    def only_a_part(self, piece: str) -> bool:
        """Whether ``piece`` is nothing but one part's own word, with a determiner at most ("my skin", "legs"): it says
        where, not what."""
        words = _WORD.findall(piece.lower())
        if words and words[0] in _DETERMINERS:
            words = words[1:]
        return len(words) == 1 and singular(words[0]) in self.words

    def last_named(self, text: str) -> str | None:
        """The last part ``text`` names by its own word, in the singular ("there's a pain in my calf" → "calf")."""
        named = [singular(w) for w in _WORD.findall(text.lower()) if singular(w) in self.words]
        return named[-1] if named else None

    def in_complaint(self, text: str) -> frozenset[str]:
        """The stems of the parts ``text`` names by their own word."""
        named = [singular(w) for w in _WORD.findall(text.lower())]
        return frozenset(stem(w) for w in named if w in self.words).union(*(self.compounds.get(w, ()) for w in named))

    def in_wording(self, text: str) -> frozenset[str]:
        """The stems of the parts a vocabulary wording names."""
        named = self._in_wording.get(text)
        if named is None:
            named = self._in_wording[text] = frozenset(stem(w) for w in _WORD.findall(text.lower())) & self.stems
        return named

    def contradicts(self, span: str, wordings: Sequence[str]) -> bool:
        """Whether a term with these ``wordings`` names parts, and only parts that no part ``span`` names goes
        together with."""
        here = self.in_complaint(span)
        if not here:
            return False
        theirs = frozenset().union(*(self.in_wording(w) for w in wordings)) if wordings else frozenset()
        return bool(theirs) and not any(theirs & self.together.get(p, frozenset()) for p in here)

    def unnamed(self, text: str, wordings: Sequence[str]) -> bool:
        """Whether each of a term's ``wordings`` names a part and ``text`` names none that goes with them: the term is
        a finding of a place the complaint never names (Gingival bleeding, "Bleeding gums", for "I am bleeding"). A term
        with a wording of no part (Skin rash's "Rash") is never so."""
        named = [self.in_wording(w) for w in wordings]
        if not named or not all(named):
            return False
        theirs = frozenset().union(*named)
        return (not any(theirs & self.together.get(p, frozenset()) for p in self.in_complaint(text))
                and not self.implied(text, wordings))


#: a wording that names a part's pain ("Foot pain", "Lower limb pain" and its synonym "Leg pain")
_PART_PAIN = re.compile(r"([a-z]+(?: [a-z]+)?) pain")
#: how many of the vocabulary's terms must name a part word, and what share of them must sit under one part with a
#: pain of its own, for the word to be read as in that part
MIN_HOLDERS, MIN_SHARE = 3, 0.5


def pained_parts(wordings: Iterable[Sequence[str]]) -> frozenset[str]:
    """The parts whose pain a wording names ("Foot pain": foot; "Lower limb pain": lower limb), lower case."""
    return frozenset(m.group(1) for ws in wordings for w in ws if (m := _PART_PAIN.fullmatch(w.lower())))


def containing_parts(wordings: Mapping[str, Sequence[str]], names: Mapping[str, str],
                     ancestors: Callable[[str], Iterable[str]]) -> dict[str, str]:
    """Part word → the part that holds it and has a pain of its own ("heel": foot, "calf": lower limb, "thumb":
    finger), read from the vocabulary's hierarchy: the terms whose wordings name the word (Prominent heel, Calcaneal
    spur …) sit, for at least :data:`MIN_SHARE` of them, under one part's branch ("Abnormality of the foot") whose pain a
    wording names (Foot pain). Of such parts the most specific is kept (foot, not lower limb, which holds it), and of
    two apart the one more terms sit under ("sole": foot, not hand). A word with a pain of its own, one that fewer
    than :data:`MIN_HOLDERS` terms name, or one named all over the body ("cheek", "tooth") is not in the map.

    ``wordings``: term id → its name and synonyms; ``names``: term id → its name; ``ancestors``: term id → its
    ancestors."""
    pained = pained_parts(wordings.values())
    branch: dict[str, str] = {}  # a part-naming term whose part has a pain wording → the part
    for tid, name in names.items():
        for pattern in PART_NAMES:
            m = pattern.match(name.lower())
            if m and m.group(1) in pained:
                branch[tid] = m.group(1)
    holders: dict[str, set[str]] = {}
    for tid, ws in wordings.items():
        if any(_PART_PAIN.fullmatch(w.lower()) for w in ws):
            continue  # a pain's own wordings say nothing of where its part sits
        for word in {singular(w) for text in ws for w in _WORD.findall(text.lower())}:
            holders.setdefault(word, set()).add(tid)
    out: dict[str, str] = {}
    for word in sorted(holders):
        terms = holders[word]
        if word in pained or len(terms) < MIN_HOLDERS:
            continue
        under: dict[str, set[str]] = {}  # part-naming term → the holders under it
        for tid in terms:
            for a in {tid, *ancestors(tid)} & branch.keys():
                under.setdefault(a, set()).add(tid)
        kept = {a for a, ts in under.items() if len(ts) >= MIN_SHARE * len(terms)}
        # the most specific: no other kept branch sits under it
        leaves = [a for a in kept if not any(a in set(ancestors(b)) for b in kept if b != a)]
        if leaves:
            best = max(sorted(leaves), key=lambda a: len(under[a]))
            out[word] = branch[best]
    return out
