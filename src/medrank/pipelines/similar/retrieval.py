"""Similar-question retrieval: BM25 (or dense / hybrid) recall of top-k solved questions, re-ranked by a matcher.

A new question goes through the recall index (BM25 by default, top 20 as in
the STMT paper's deployment), the matcher scores each (new question,
candidate) pair, and candidates come back sorted by ``p(same intent)`` with
both scores. The index is any :mod:`medrank.index` index and is saved with
it; the matcher is saved separately (a training run's ``matcher/``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from medrank.index import BM25Index, Index, load_index
from medrank.index.base import check_k
from medrank.records import require_texts


class Matcher(Protocol):
    """What re-ranks the recalled candidates: a trained :class:`~medrank.pipelines.similar.matchers.PairMatcher`, or a
    pretrained encoder's cosine (:class:`~medrank.pipelines.similar.zero_shot.EncoderCosineMatcher`)."""

    name: str

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


@dataclass(frozen=True)
class SimilarQuestion:
    """One retrieved question: its id, text, recall score, matcher score (``None`` without a matcher) and the
    probability that it asks the same thing (``None`` where the searcher has no calibration for its score)."""

    id: str
    text: str
    recall_score: float
    match_score: float | None
    probability: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "recall_score": round(self.recall_score, 6),
                "match_score": None if self.match_score is None else round(self.match_score, 6),
                "probability": None if self.probability is None else round(self.probability, 4)}


def make_recall_index(language: str, method: str = "bm25", encoder: Any = None) -> Index:
    """An unbuilt recall index: ``bm25`` (Chinese character uni+bigrams / English stemmed words),
    ``dense`` (needs an encoder) or ``hybrid`` (reciprocal-rank fusion of both)."""
    from medrank.index import DenseIndex, HybridIndex

    if method == "bm25":
        return BM25Index(language=language, zh_mode="char")
    if encoder is None:
        raise ValueError(f"recall method {method!r} needs an encoder")
    if method == "dense":
        return DenseIndex(encoder)
    if method == "hybrid":
        return HybridIndex([BM25Index(language=language, zh_mode="char"), DenseIndex(encoder)], method="rrf")
    raise ValueError(f"recall method must be bm25, dense or hybrid, got {method!r}")


class SimilarQuestionSearcher:
    """Recall index over a question corpus + an optional matcher that re-ranks the recalled candidates.

    ``calibration`` (optional; :class:`~medrank.pipelines.similar.zero_shot.CosineCalibration`, anything with
    ``probability(scores)``) turns the score the list is ordered by (the matcher's, else the recall's) into each
    result's ``probability``; give it only for the score it was fitted on (an encoder's cosine)."""

    def __init__(self, index: Index, matcher: Matcher | None = None, recall_k: int = 20,
                 calibration: Any = None) -> None:
        if recall_k < 1:
            raise ValueError(f"recall_k must be >= 1, got {recall_k}")
        if calibration is not None and not callable(getattr(calibration, "probability", None)):
            raise TypeError(f"calibration must have probability(scores), got {type(calibration).__name__}")
        self.index = index
        self.matcher = matcher
        self.recall_k = recall_k
        self.calibration = calibration
        self._text = dict(zip(index.entry_ids, index.entry_texts, strict=True))

    @classmethod
    def build(cls, questions: Sequence[str] | dict[str, str], matcher: Matcher | None = None, language: str = "zh",
              recall: str = "bm25", encoder: Any = None, recall_k: int = 20) -> SimilarQuestionSearcher:
        """Index ``questions`` (texts, or ``{id: text}``; duplicate texts are indexed once)."""
        if isinstance(questions, dict):
            ids, texts = list(questions), list(questions.values())
        else:
            texts = list(dict.fromkeys(questions))
            ids = [f"q{i}" for i in range(len(texts))]
        if not texts:
            raise ValueError("the question corpus is empty")
        index = make_recall_index(language, recall, encoder)
        index.build(ids, texts)
        return cls(index, matcher, recall_k)

    def __len__(self) -> int:
        return len(self.index)

    def text(self, question_id: str) -> str:
        return self._text[question_id]

    def search(self, question: str, k: int = 5, recall_k: int | None = None) -> list[SimilarQuestion]:
        """The top ``k`` similar questions of ``question``: recall ``recall_k`` (default 20), re-rank, cut."""
        return self.search_many([question], k, recall_k)[0]

    def search_many(self, questions: Sequence[str], k: int = 5, recall_k: int | None = None) -> list[list[SimilarQuestion]]:
        """:meth:`search` for a list of questions (one result list each, in order)."""
        k = check_k(k)
        questions = require_texts(questions, "question")
        depth = max(k, self.recall_k if recall_k is None else check_k(recall_k, "recall_k"))
        rankings = self.index.search(list(questions), k=depth)
        out = []
        for q, ranking in zip(questions, rankings, strict=True):
            ids = list(ranking.ids)
            recall = np.asarray(ranking.scores, dtype=np.float32)
            if self.matcher is None or not ids:
                p = self._probabilities(recall)
                out.append([SimilarQuestion(ids[j], self._text[ids[j]], float(recall[j]), None, p[j])
                            for j in range(min(k, len(ids)))])
                continue
            match = self.matcher.score([(q, self._text[i]) for i in ids])
            order = np.lexsort((-recall, -match))  # matcher score first, recall score breaks ties
            p = self._probabilities(match)
            out.append([SimilarQuestion(ids[j], self._text[ids[j]], float(recall[j]), float(match[j]), p[j])
                        for j in order[:k]])
        return out

    def _probabilities(self, scores: np.ndarray) -> list[float | None]:
        if self.calibration is None or not len(scores):
            return [None] * len(scores)
        return [float(v) for v in self.calibration.probability(np.asarray(scores, dtype=np.float64))]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the recall index (the matcher is saved on its own)."""
        self.index.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], matcher: Matcher | None = None, recall_k: int = 20,
             calibration: Any = None, **kwargs: Any) -> SimilarQuestionSearcher:
        """A searcher over the recall index saved at ``path`` (``kwargs`` go to :func:`~medrank.index.load_index`)."""
        return cls(load_index(path, **kwargs), matcher, recall_k, calibration)


def corpus_key(texts: Sequence[str], language: str, recall: str) -> str:
    """A short content hash naming a cached index of this corpus."""
    h = hashlib.sha1(f"{language}|{recall}|".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def cached_searcher(texts: Sequence[str], language: str, matcher: Matcher | None, recall: str = "bm25",
                    encoder: Any = None, recall_k: int = 20, cache: Path | None = None) -> SimilarQuestionSearcher:
    """Build the recall index once per corpus and cache it under ``$MEDRANK_CACHE/indexes``."""
    from medrank.config import cache_dir

    folder = (cache or cache_dir() / "indexes") / f"similar-{corpus_key(texts, language, recall)}"
    kwargs = {"encoder": encoder} if recall != "bm25" else {}
    if (folder / "manifest.json").exists():
        return SimilarQuestionSearcher.load(folder, matcher, recall_k, **kwargs)
    searcher = SimilarQuestionSearcher.build(list(texts), matcher, language, recall, encoder, recall_k)
    searcher.save(folder)
    return searcher
