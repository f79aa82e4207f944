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
        self.uses = word_uses(wordings)
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
        than ``min_uses`` wordings, and not an irregular inflection of a common word ("bled": bleed). A regular one
        ("coughs") is rare but never rewritten: it shares its stem with its nearest word (:meth:`nearest`)."""
        w = word.lower()
        if len(w) < 3 or w in self._stop or self.uses[w] >= self.min_uses:
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


def lay_words_for(encoder: Any, wordings: Mapping[str, Sequence[str]], target_encoder: Any = None) -> LayWords:
    """A :class:`LayWords` over every wording of ``wordings`` (term id → names and synonyms)."""
    return LayWords(encoder, (t for texts in wordings.values() for t in texts), target_encoder=target_encoder)
