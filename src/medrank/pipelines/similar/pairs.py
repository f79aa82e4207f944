"""Training pairs from an unlabelled question corpus (the STMT paper's second data method).

For sampled query questions, BM25 recalls the top 20 other questions; each
candidate gets ``score = (bm25_norm + cosine) / 2`` where

* ``bm25_norm`` is the candidate's BM25 score divided by the query's BM25
  score against itself (its best possible match), clipped to [0, 1];
* ``cosine`` is the cosine of the mean CBOW word2vec vectors of the two
  questions (word2vec trained on the corpus itself), clipped to [0, 1].

Candidates with ``score`` in ``[0.9, 1)`` become positives (1.0 is excluded:
that is a copy of the query), those in ``[0, 0.6]`` negatives, and negatives
are sampled so that there are 3 per positive (or all of them, if fewer).
The thresholds, depth and ratio are parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from medrank.data.questions import QuestionPair, clean_question
from medrank.index import BM25Index
from medrank.index.topk import topk_stable
from medrank.pipelines.similar.text import (
    QuestionTokenizer,
    TokenizerSpec,
    Word2VecConfig,
    cached_word2vec,
    mean_vectors,
)


@dataclass(frozen=True)
class PairGenerationConfig:
    top_k: int = 20
    positive: tuple[float, float] = (0.9, 1.0)  # [low, high)
    negative: tuple[float, float] = (0.0, 0.6)  # [low, high]
    negatives_per_positive: float = 3.0
    n_queries: int | None = None  # None = every question is a query
    seed: int = 13

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        lo, hi = self.positive
        nlo, nhi = self.negative
        if not (0 <= lo < hi <= 1 and 0 <= nlo <= nhi <= 1):
            raise ValueError(f"score ranges must lie in [0, 1] with low < high: {self.positive}, {self.negative}")
        if nhi >= lo:
            raise ValueError(f"the negative range {self.negative} must lie below the positive range {self.positive}")
        if self.negatives_per_positive < 0:
            raise ValueError("negatives_per_positive must be >= 0")
        if self.n_queries is not None and self.n_queries < 1:
            raise ValueError(f"n_queries must be >= 1 (or None for every question), got {self.n_queries}")


def generate_pairs(
    questions: Sequence[str],
    language: str,
    config: PairGenerationConfig | None = None,
    zh_mode: str = "char",
    word2vec: Word2VecConfig | None = None,
    show_progress: bool = True,
) -> tuple[list[QuestionPair], dict[str, Any]]:
    """Labelled pairs from an unlabelled question list; returns ``(pairs, stats)``.

    ``questions`` are cleaned and de-duplicated first. Pair ids are
    ``gen:<n>``; ``meta`` holds ``score``, ``bm25_norm`` and ``cosine``.
    """
    config = config or PairGenerationConfig()
    texts = list(dict.fromkeys(t for t in (clean_question(q) for q in questions) if t))
    if len(texts) < 2:
        raise ValueError(f"need at least 2 distinct questions, got {len(texts)}")
    tokenizer = QuestionTokenizer(TokenizerSpec(language=language, zh_mode=zh_mode))
    tokens = tokenizer.batch(texts)
    vocab, vectors = cached_word2vec(tokens, word2vec or Word2VecConfig(seed=config.seed))
    mean = mean_vectors(tokens, vocab, vectors)
    mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-8)
    index = BM25Index(language=language, zh_mode="char")
    index.build([str(i) for i in range(len(texts))], texts)

    rng = np.random.default_rng(config.seed)
    n_queries = len(texts) if config.n_queries is None else min(config.n_queries, len(texts))
    query_idx = np.sort(rng.choice(len(texts), size=n_queries, replace=False))
    positives: list[tuple[int, int, float, float, float]] = []
    negatives: list[tuple[int, int, float, float, float]] = []
    seen: set[tuple[int, int]] = set()
    lo, hi = config.positive
    nlo, nhi = config.negative
    for qi in tqdm(query_idx, desc="pairs", disable=not show_progress):
        scores = index.query_scores(texts[qi])
        self_score = float(scores[qi])
        if self_score <= 0:
            continue
        scores = scores.copy()
        scores[qi] = -np.inf
        top = topk_stable(scores, min(config.top_k, len(texts) - 1))
        top = top[scores[top] > 0]
        if not len(top):
            continue
        bm25 = np.clip(scores[top] / self_score, 0.0, 1.0)
        cos = np.clip(mean[top] @ mean[qi], 0.0, 1.0)
        combined = (bm25 + cos) / 2
        for j, s, b, c in zip(top, combined, bm25, cos, strict=True):
            key = (min(int(qi), int(j)), max(int(qi), int(j)))
            if key in seen:
                continue
            if lo <= s < hi:
                seen.add(key)
                positives.append((int(qi), int(j), float(s), float(b), float(c)))
            elif nlo <= s <= nhi:
                seen.add(key)
                negatives.append((int(qi), int(j), float(s), float(b), float(c)))
    n_neg = min(len(negatives), int(round(config.negatives_per_positive * len(positives))))
    keep = np.sort(rng.choice(len(negatives), size=n_neg, replace=False)) if n_neg else np.array([], dtype=int)
    chosen = [(p, 1) for p in positives] + [(negatives[i], 0) for i in keep]
    pairs = [
        QuestionPair(f"gen:{n}", texts[a], texts[b], label,
                     meta={"score": round(s, 4), "bm25_norm": round(bm, 4), "cosine": round(c, 4)})
        for n, ((a, b, s, bm, c), label) in enumerate(chosen)
    ]
    stats = {
        "questions": len(texts), "queries": int(n_queries), "positives": len(positives),
        "negative_candidates": len(negatives), "negatives": int(n_neg), "pairs": len(pairs),
        "top_k": config.top_k, "positive_range": list(config.positive), "negative_range": list(config.negative),
    }
    return pairs, stats
