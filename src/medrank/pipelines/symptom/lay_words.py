"""Everyday words the vocabulary never uses, read as its word nearest in meaning.

People write "pee", "poop", "tummy"; HPO writes urine, stool, abdomen. A dense encoder places "it burns when I pee"
far from Dysuria ("Painful or difficult urination"), and BM25 finds no shared word, while "it burns when I urinate"
finds it. :class:`LayWords` rewrites a piece's rare words (used by fewer than ``min_uses`` wordings of the
vocabulary: "pee" is in one, HPO's "Pee issues") as the vocabulary's common word whose vector under the same encoder
is nearest, when it is near enough (cosine ``min_similarity``): under MiniLM "pee" → urinate, "poop" → faeces,
"tummy" → stomach.
The rewritten piece is searched beside the patient's own words (:class:`~medrank.pipelines.symptom.sets.SetDetector`
rule ``lay_words``), so a word the encoder already reads well loses nothing.

The encoder compares a patient's word (encoded as a query) with the vocabulary's words (as passages, as the
vocabulary's wordings are; a symmetric encoder such as MiniLM reads both alike): an on-disk cache of the vocabulary's
vectors then never holds a query's, as the embedding cache never does. A word shares its stems with its target
("diarrhoea" and diarrhea, "coughs" and cough) or is one of the vocabulary's common words already: it stays as written.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from medrank.text import base_form, content_stems, stop_words

#: cosine (unit vectors) at or above which a rare word is read as its nearest common word; MiniLM-L6 gives "pee" and
#: urine 0.81, "poop" and stool 0.72, "tummy" and abdomen 0.66, "puke" and vomit 0.59, "queasy" and nausea 0.29
MIN_SIMILARITY = 0.65
#: a word used by at least this many wordings is one of the vocabulary's own (a target, and never rewritten)
MIN_USES = 2
#: a word at least this frequent in English (wordfreq's Zipf scale: 5 is once per hundred thousand words) is never
#: rewritten: a word that common is general English ("every", "a lot", "strong", "bad"), no everyday name of a finding
#: the vocabulary words otherwise ("pee", "tummy", "poop" are near 3.5), and its nearest vocabulary word is one spelt
#: like it or its opposite ("every": everted, "strong": weak)
MAX_ZIPF = 5.0
#: how many words read are remembered (the least recently read is forgotten first)
REMEMBERED = 4096
_WORD = re.compile(r"[a-z]+")
_LETTERS = re.compile(r"[A-Za-z]+")


def word_uses(wordings: Iterable[str]) -> Counter[str]:
    """How many of ``wordings`` use each lower-case word of three letters or more (once per wording)."""
    uses: Counter[str] = Counter()
    for text in wordings:
        uses.update({w for w in _WORD.findall(text.lower()) if len(w) >= 3})
    return uses


class LayWords:
    """Rewrites the rare words of a text as the vocabulary's common word nearest in meaning.

    ``encoder``: anything with ``encode(texts, kind=..., batch_size=..., show_progress=...)`` giving unit vectors
    (a :class:`~medrank.encoders.base.Encoder`); ``wordings``: every name and synonym of the vocabulary. The common
    words' vectors are made on first use (:meth:`warm`), by ``target_encoder`` when given (the same model behind an
    on-disk cache: they are the vocabulary's words; a patient's words are only ever encoded by ``encoder``, in memory)."""

    def __init__(self, encoder: Any, wordings: Iterable[str], min_similarity: float = MIN_SIMILARITY,
                 min_uses: int = MIN_USES, target_encoder: Any = None) -> None:
        if not 0.0 < min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in (0, 1], got {min_similarity!r}")
        if min_uses < 1:
            raise ValueError(f"min_uses must be at least 1, got {min_uses!r}")
        self.encoder = encoder
        self.target_encoder = target_encoder if target_encoder is not None else encoder
        self.min_similarity = float(min_similarity)
        wordings = list(wordings)
        self.uses = word_uses(wordings)
        #: words that alone are a whole wording, a term's one-word name ("Nocturia", "Presyncope"): the vocabulary's
        #: own however rarely its other wordings use them, never rewritten (under MiniLM "nocturia" is nearest
        #: "uraciluria", which another term is named)
        self.names: frozenset[str] = frozenset(t.strip().lower() for t in wordings if _WORD.fullmatch(t.strip().lower()))
        stop = stop_words()
        #: the vocabulary's common words: what a rare word may be read as (sorted, for a reproducible order)
        self.targets: list[str] = sorted(w for w, n in self.uses.items() if n >= min_uses and w not in stop)
        self.min_uses = int(min_uses)
        self._stop = stop
        self._vectors: np.ndarray | None = None
        self._read: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Encode the common words now (else on the first text with a rare word)."""
        if self._vectors is None:
            vectors = (self.target_encoder.encode(self.targets, kind="passage", batch_size=256, show_progress=False)
                       if self.targets else np.zeros((0, 1), dtype=np.float32))
            self._vectors = vectors

    def forget(self) -> None:
        """Forget the words read (a benchmark timing each complaint as a new one calls it before each)."""
        with self._lock:
            self._read.clear()

    def rare(self, word: str) -> bool:
        """Whether ``word`` (any case) is one the rewrite reads: three letters or more, no stop word, used by fewer
        than ``min_uses`` wordings, no wording by itself, and not an irregular inflection of a common word ("bled":
        bleed). A regular one ("coughs") is rare but never rewritten: it shares its stem with its nearest word
        (:meth:`nearest`)."""
        w = word.lower()
        if len(w) < 3 or w in self._stop or self.uses[w] >= self.min_uses or w in self.names:
            return False
        return self.uses[base_form(w)] < self.min_uses

    def nearest(self, words: Sequence[str]) -> dict[str, str | None]:
        """Each of ``words`` (lower case) → the common word it is read as, ``None`` when none is near enough or the
        nearest shares its stem (a spelling or an inflection of it)."""
        with self._lock:
            for w in words:
                if w in self._read:
                    self._read.move_to_end(w)
            known = {w: self._read[w] for w in words if w in self._read}
        todo = sorted({w for w in words if w not in known})
        if todo:
            self.warm()
            assert self._vectors is not None
            fresh: dict[str, str | None] = dict.fromkeys(todo)
            if len(self.targets):
                sims = self.encoder.encode(todo, kind="query", batch_size=64, show_progress=False) @ self._vectors.T
                best = sims.argmax(axis=1)
                for w, j, row in zip(todo, best, sims, strict=True):
                    target = self.targets[int(j)]
                    same = content_stems([w]) == content_stems([target])
                    fresh[w] = target if row[j] >= self.min_similarity and not same else None
            known.update(fresh)
            with self._lock:
                self._read.update(fresh)
                while len(self._read) > REMEMBERED:
                    self._read.popitem(last=False)
        return {w: known[w] for w in words}

    def rewrite(self, text: str) -> str | None:
        """``text`` with each rare word read as its nearest common word (:meth:`nearest`); ``None`` when none is. A word
        of general English (:data:`MAX_ZIPF`) stays as written."""
        found = [m for m in _LETTERS.finditer(text) if self.rare(m.group(0)) and not _general(m.group(0))]
        if not found:
            return None
        read = self.nearest([m.group(0).lower() for m in found])
        out, at, changed = [], 0, False
        for m in found:
            target = read[m.group(0).lower()]
            if target is None:
                continue
            out += [text[at:m.start()], target]
            at, changed = m.end(), True
        return "".join([*out, text[at:]]) if changed else None


@functools.lru_cache(maxsize=65536)
def _general(word: str) -> bool:
    """Whether ``word`` is a word of general English (:data:`MAX_ZIPF`)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word.lower(), "en") >= MAX_ZIPF


#: a part of a word of the vocabulary written as two ("bed" and "wetting" of "bedwetting") is a word of English at least
#: this frequent (wordfreq's Zipf scale), so that a split such as "abd" + "omen" is none
MIN_PART_ZIPF = 2.5
#: words that may stand between the two parts of such a word written apart in the other order ("wetting the bed",
#: "bleeding from my nose", "the tip of my finger") ...
_BETWEEN_REVERSED = frozenset({"the", "my", "from", "in", "of", "his", "her", "their", "our", "your", "its", "on", "at"})
#: ... and in its own order ("my nose keeps bleeding", "my heart is beating")
_BETWEEN_IN_ORDER = frozenset({"is", "was", "are", "were", "keeps", "keep", "kept", "has", "have", "been", "started",
                               "starts", "won't", "wont", "stop", "stops"})
#: at most this many words between the two parts
_MAX_BETWEEN = 2
_TOKEN = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


def compound_parts(words: Iterable[str]) -> dict[tuple[str, str], str]:
    """The words of a vocabulary that are two English words written as one ("bedwetting": bed + wetting; "nosebleed",
    "earache", "fingertip"), keyed by the Snowball stems of the two parts (:func:`~medrank.text.content_stems`): a
    split of a lower-case word into parts of three letters or more, each a word of English (:data:`MIN_PART_ZIPF`) and
    no stop word, where not both are words of general English (:data:`MAX_ZIPF`: "daytime" is no finding's word in
    "this time of day"). The first split of a word (shortest first part) and the first word of a key are kept."""
    from wordfreq import zipf_frequency

    stop = stop_words()
    out: dict[tuple[str, str], str] = {}
    for word in sorted(set(words)):
        if len(word) < 6 or not word.isalpha():
            continue
        for i in range(3, len(word) - 2):
            first, second = word[:i], word[i:]
            if first in stop or second in stop:
                continue
            zipfs = (zipf_frequency(first, "en"), zipf_frequency(second, "en"))
            if min(zipfs) < MIN_PART_ZIPF or min(zipfs) >= MAX_ZIPF:
                continue
            stems = content_stems([first]) + content_stems([second])
            if len(stems) == 2:
                out.setdefault((stems[0], stems[1]), word)
                break
    return out


def join_compounds(text: str, compounds: Mapping[tuple[str, str], str]) -> str | None:
    """``text`` with two of its words that a vocabulary writes as one word (:func:`compound_parts`) written as that
    word: side by side or with up to two words of being or going on between ("nose bleeds", "my nose keeps bleeding":
    nosebleed), or in the other order with up to two words of place between ("wetting the bed": bedwetting; "bleeding
    from my nose"). A dense encoder and BM25 both read "Bedwetting" as one word that "wetting the bed" does not
    share. ``None`` when no two words are joined."""
    tokens = list(_TOKEN.finditer(text))
    lower = [t.group(0).lower() for t in tokens]
    stems = [(content_stems([w]) or [None])[0] for w in lower]
    out, at, i = [], 0, 0
    while i < len(tokens):
        joined = None
        for j in range(i + 1, min(len(tokens), i + _MAX_BETWEEN + 2)):
            between = lower[i + 1:j]
            if not all(w in _BETWEEN_IN_ORDER or w in _BETWEEN_REVERSED for w in between) or not text[
                    tokens[j - 1].end():tokens[j].start()].isspace():
                break  # other words, or a comma, between
            if all(w in _BETWEEN_IN_ORDER for w in between) and (stems[i], stems[j]) in compounds:
                joined = (j, compounds[stems[i], stems[j]])
            elif all(w in _BETWEEN_REVERSED for w in between) and (stems[j], stems[i]) in compounds:
                joined = (j, compounds[stems[j], stems[i]])
            if joined is not None:
                break
        if joined is None:
            i += 1
            continue
        j, word = joined
        out += [text[at:tokens[i].start()], word]
        at, i = tokens[j].end(), j + 1
    return "".join([*out, text[at:]]) if out else None


def lay_words_for(encoder: Any, wordings: Mapping[str, Sequence[str]], target_encoder: Any = None) -> LayWords:
    """A :class:`LayWords` over every wording of ``wordings`` (term id → names and synonyms)."""
    return LayWords(encoder, (t for texts in wordings.values() for t in texts), target_encoder=target_encoder)
