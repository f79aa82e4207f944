"""Small talk names no finding: a span nearer to a patient's small talk than to any term decides nothing.

A set calibration (:class:`~medrank.pipelines.symptom.sets.SetCalibration`) is fitted on complaints that each
name a symptom, and its features are the retriever's scores: every text gets a nearest term, and a short text a
confident one ("ok" decided Otitis media with effusion, "thank you" a transient ischemic attack). Nothing in
those scores tells small talk from an everyday complaint, so the gate asks the encoder a second question: is the
span nearer to some term of the vocabulary than to anything patients say that is not a finding?

What patients say that is not a finding comes from data: the patient (and family) turns of MTS-Dialog's training
conversations of at most :data:`MAX_WORDS` words ("Okay.", "Thank you, doctor.", "I'm twenty six.", "I have a
roommate.") that hold no wording of the vocabulary. Some of those still state a finding in words the vocabulary lacks ("I feel nauseous.",
"It feels achy."); a turn that is nearer to a term than to every other turn is left out, so the remaining turns
are those the encoder itself reads as small talk.

:meth:`SmallTalkGate.margins` gives, per text, the score of its best term minus that of its nearest small-talk
turn, under the same dense encoder (each member of an ensemble, scores averaged with the ensemble's weights;
the dense part of a BM25 + dense hybrid). A decided term whose span has a margin of at most :attr:`SmallTalkGate.margin`
(0: the nearest neighbour is small talk) is neither decided nor offered
(:meth:`~medrank.pipelines.symptom.sets.SetDetector.detect_many`).
"""

from __future__ import annotations

import csv
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.encoders.memo import remembering_queries
from medrank.text import content_stems

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: the longest patient turn (in words) read as small talk: 3, 5 and 8 were tried on MTS-Dialog's validation turns
#: (bench/small_talk.py); at 8 turns that state a finding ("I hurt my left elbow") begin to count as small talk
MAX_WORDS = 5
#: the conversations the turns come from (their validation and test splits are never read here)
SOURCE = Path("Main-Dataset") / "MTS-Dialog-TrainingSet.csv"
_SPEAKER = re.compile(r"^\s*(Patient|Guest_family)[^:]{0,20}:\s*(.*)$")
_WORD = re.compile(r"[a-z0-9]+")
#: the shortest vocabulary wording that takes a turn out of the small talk (shorter ones are words of everyday
#: talk: "ok" is no reason to keep "Okay." out)
MIN_WORDING_CHARS = 4
#: the most content words a wording may have for its stems, in any order and any form, to take a turn out of the
#: small talk ("depressed" holds Depression's stem, "I can't sleep well" Poor sleep's)
MAX_STEMMED_WORDS = 2


def patient_turns(path: PathLike) -> list[str]:
    """The distinct patient and family turns of an MTS-Dialog CSV file (``dialogue`` column), in file order."""
    turns: dict[str, None] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for line in (row.get("dialogue") or "").splitlines():
                m = _SPEAKER.match(line)
                if m is not None and m.group(2).strip():
                    turns.setdefault(m.group(2).strip(), None)
    return list(turns)


def small_talk_turns(root: PathLike | None = None, max_words: int = MAX_WORDS) -> list[str]:
    """The distinct patient and family turns of MTS-Dialog's training conversations with at most ``max_words``
    words, in file order (``root``: the data root, default :func:`medrank.config.data_root`)."""
    from medrank.config import dataset_dir

    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    return [t for t in patient_turns(dataset_dir("mts-dialog", root) / SOURCE) if len(t.split()) <= max_words]


def _words(text: str) -> str:
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def without_wordings(turns: Iterable[str], wordings: Iterable[str]) -> list[str]:
    """``turns`` that hold none of ``wordings`` (of :data:`MIN_WORDING_CHARS` or more) as whole words, case and
    punctuation aside, nor the stems of a wording of at most :data:`MAX_STEMMED_WORDS` content words in any order
    (:func:`~medrank.text.content_stems`: "I feel depressed." holds Depression's; as whole words it held none, and it
    and "I'm sad and depressed." were each other's nearest turn, so both stayed small talk and the gate took
    "I feel depressed" from every complaint)."""
    wordings = [w for w in wordings if len(w.strip()) >= MIN_WORDING_CHARS]
    keys = {_words(w).strip() for w in wordings}
    keys.discard("")
    stemmed = set()
    for w in wordings:
        stems = frozenset(content_stems(_words(w).split()))
        if 0 < len(stems) <= MAX_STEMMED_WORDS and min(map(len, stems)) >= MIN_WORDING_CHARS:
            stemmed.add(stems)
    out = []
    for t in turns:
        words = _words(t)
        tokens = words.split()
        # every run of consecutive words of the turn, looked up (turns are short)
        runs = {" ".join(tokens[i:j]) for i in range(len(tokens)) for j in range(i + 1, len(tokens) + 1)}
        if runs & keys:
            continue
        held = set(content_stems(tokens))
        if not any(stems <= held for stems in stemmed):
            out.append(t)
    return out


def dense_view(index: Any) -> Any:
    """The dense part of a built index: a dense index itself, an ensemble (a mean of dense indexes) itself, the
    dense components of another hybrid (several: their mean); ``None`` when it has no dense part."""
    from medrank.index.dense import DenseIndex
    from medrank.index.hybrid import HybridIndex

    if isinstance(index, DenseIndex):
        return index
    if isinstance(index, HybridIndex):
        dense = [c for c in index.components if isinstance(c, DenseIndex)]
        if index.method == "mean" and len(dense) == len(index.components):
            return index
        if len(dense) == 1:
            return dense[0]
        if dense:
            return HybridIndex.from_built(dense, method="mean", depth=index.depth)
    return None


def dense_parts(index: Any) -> list[Any]:
    """The dense indexes an index of :func:`dense_view` is made of."""
    from medrank.index.dense import DenseIndex

    return [index] if isinstance(index, DenseIndex) else list(index.components)


def like(index: Any, texts: Sequence[str]) -> Any:
    """An index of the same dense structure as ``index`` (:func:`dense_view`'s) over ``texts``: the same encoders,
    the same ensemble weights."""
    from medrank.index.dense import DenseIndex
    from medrank.index.hybrid import HybridIndex

    ids = [f"small-talk:{i}" for i in range(len(texts))]
    if isinstance(index, DenseIndex):
        out = DenseIndex(index.encoder, batch_size=index.batch_size, show_progress=False)
        return out.build(ids, list(texts))
    if isinstance(index, HybridIndex) and index.method == "mean":
        parts = [like(c, texts) for c in index.components]
        return HybridIndex.from_built(parts, method="mean", weights=index.weights, depth=index.depth)
    raise TypeError(f"no dense structure to copy in a {type(index).__name__}")


def subset(index: Any, keep: Sequence[int]) -> Any:
    """An index :func:`like` built, cut to the entries at positions ``keep``: their vectors are reused, not encoded
    again."""
    from medrank.index.dense import DenseIndex
    from medrank.index.hybrid import HybridIndex

    if isinstance(index, DenseIndex):
        vectors = index.faiss_index.reconstruct_n(0, index.faiss_index.ntotal)
        out = DenseIndex(index.encoder, batch_size=index.batch_size, show_progress=False)
        texts = [index.entry_texts[i] for i in keep]
        out.entry_ids = [f"small-talk:{i}" for i in range(len(texts))]
        out.entry_texts, out.entry_items = texts, list(out.entry_ids)
        out.build_from_vectors(vectors[list(keep)])
        return out
    if isinstance(index, HybridIndex) and index.method == "mean":
        parts = [subset(c, keep) for c in index.components]
        return HybridIndex.from_built(parts, method="mean", weights=index.weights, depth=index.depth)
    raise TypeError(f"no dense structure to cut in a {type(index).__name__}")


def _top(rankings: Sequence[Any], rank: int = 0) -> np.ndarray:
    return np.array([r.scores[rank] if len(r.scores) > rank else -np.inf for r in rankings], dtype=np.float64)


def top_scores(index: Any) -> Callable[[Sequence[str]], np.ndarray]:
    """Each text's best score in ``index`` (any built index: ``search(texts, k)`` → rankings)."""
    return lambda texts: _top(index.search(list(texts), k=1))


class SmallTalkGate:
    """Per text, its best term's score minus its nearest small-talk turn's (see the module docstring).

    ``term_scores(texts)`` gives each text's best term score under a dense encoder; ``anchors`` is a dense index over
    ``turns`` under the same encoder (entries encoded as passages, as the terms are)."""

    def __init__(self, term_scores: Callable[[Sequence[str]], np.ndarray], turns: Sequence[str], anchors: Any,
                 margin: float = 0.0) -> None:
        if not turns:
            raise ValueError("a small-talk gate needs at least one small-talk turn")
        self.term_scores = term_scores
        self.turns = list(turns)
        self.anchors = anchors
        self.margin = float(margin)

    @classmethod
    def build(cls, index: Any, turns: Sequence[str], wordings: Iterable[str], margin: float = 0.0) -> SmallTalkGate | None:
        """A gate over the dense part of the vocabulary's built ``index`` (``None`` when it has none, or when no
        turn is left)."""
        terms = dense_view(index)
        if terms is None:
            return None
        # the complaint's pieces were just encoded to search the vocabulary: the gate reads their vectors again
        # from memory (the index's own encoders wrap in a query memo; the small-talk index shares them)
        for part in dense_parts(terms):
            part.encoder = remembering_queries(part.encoder)
        return cls._kept(top_scores(terms), lambda texts: like(terms, texts), turns, wordings, margin)

    @classmethod
    def for_encoder(cls, term_scores: Callable[[Sequence[str]], np.ndarray], encoder: Any, turns: Sequence[str],
                    wordings: Iterable[str], margin: float = 0.0) -> SmallTalkGate | None:
        """A gate where the vocabulary is searched some other way (a store): ``term_scores`` as in the class
        docstring, the turns indexed by ``encoder`` (wrap it in a :class:`~medrank.encoders.QueryMemo` shared with
        the store's search, and the pieces are encoded once)."""
        from medrank.index.dense import DenseIndex

        def anchors(texts: Sequence[str]) -> Any:
            return DenseIndex(encoder, show_progress=False).build([f"small-talk:{i}" for i in range(len(texts))], list(texts))

        return cls._kept(term_scores, anchors, turns, wordings, margin)

    @classmethod
    def _kept(cls, term_scores: Callable[[Sequence[str]], np.ndarray], index_of: Callable[[Sequence[str]], Any],
              turns: Sequence[str], wordings: Iterable[str], margin: float) -> SmallTalkGate | None:
        """``turns`` without a vocabulary wording, less those nearer to a term than to every other turn."""
        candidates = without_wordings(turns, wordings)
        if len(candidates) < 2:
            return None
        # each turn's nearest other turn is its second hit (the first is itself)
        every = index_of(candidates)
        to_term = term_scores(candidates)
        to_other = _top(every.search(candidates, k=2), rank=1)
        keep = [i for i, (a, b) in enumerate(zip(to_term, to_other, strict=True)) if a <= b]
        if not keep:
            return None
        log.info("small talk: %d of %d short patient turns kept (%d hold a wording, %d are nearer to a term)",
                 len(keep), len(turns), len(turns) - len(candidates), len(candidates) - len(keep))
        return cls(term_scores, [candidates[i] for i in keep], subset(every, keep), margin)

    def forget(self) -> None:
        """Empty the query memo shared with the vocabulary's search (a benchmark timing each text as new)."""
        from medrank.encoders.memo import QueryMemo

        for part in dense_parts(self.anchors):
            if isinstance(part.encoder, QueryMemo):
                part.encoder.clear()

    def margins(self, texts: Sequence[str], best_terms: Sequence[float | None] | None = None) -> np.ndarray:
        """Best term score minus nearest small-talk score, per text (``inf`` for a blank text). ``best_terms``: the
        best term scores already known (a search under the same encoder), ``None`` where not; the rest are searched."""
        texts = list(texts)
        if not texts:
            return np.zeros(0)
        known = list(best_terms) if best_terms is not None else [None] * len(texts)
        if len(known) != len(texts):
            raise ValueError(f"{len(known)} known best-term scores for {len(texts)} texts")
        todo = [i for i, v in enumerate(known) if v is None]
        terms = np.array([np.nan if v is None else float(v) for v in known], dtype=np.float64)
        if todo:
            terms[todo] = np.asarray(self.term_scores([texts[i] for i in todo]), dtype=np.float64)
        out = terms - _top(self.anchors.search(texts, k=1))
        return np.where(np.isnan(out), np.inf, out)

    def small_talk(self, texts: Sequence[str], best_terms: Sequence[float | None] | None = None) -> list[bool]:
        """Whether each text is no nearer to a term than to small talk (margin at most :attr:`margin`)."""
        return [bool(m <= self.margin) for m in self.margins(texts, best_terms)]
