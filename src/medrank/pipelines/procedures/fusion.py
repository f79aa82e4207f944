"""FB, the fusion block: combine recall distance and ranker probability, then decide how many terms to output.

* :func:`recall_scores` — :math:`s_c(c_i) = 1 - d(m, c_i) / \\sum_j d(m, c_j)` over the ``k_c`` candidates;
* :func:`fuse` — final score :math:`(s_c + s_r)/2` with :math:`s_r` the KAR probability;
* :func:`select_terms` — the output set: the top-``x`` candidates when the count head predicts
  ``x < 3`` terms, else every candidate scoring above ``θ`` plus the top 3;
* :func:`tune_theta` — ``θ`` maximising exact-set accuracy on the train-side validation split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medrank.metrics import exact_set_accuracy

DEFAULT_THETA = 0.8


def recall_scores(distances: np.ndarray) -> np.ndarray:
    """``(n, k)`` distances (>= 0) of each mention's candidates → ``(n, k)`` ``s_c = 1 - d / Σd`` (row-wise)."""
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"distances must be (n, k), got shape {d.shape}")
    if (d < 0).any():
        raise ValueError("distances must be non-negative")
    total = d.sum(axis=1, keepdims=True)
    # every candidate at distance 0 (duplicates of the mention): equal, maximal scores
    return np.where(total > 0, 1.0 - d / np.where(total > 0, total, 1.0), 1.0)


def fuse(recall: np.ndarray, ranker: np.ndarray) -> np.ndarray:
    """Final scores ``(s_c + s_r) / 2`` (same shapes)."""
    recall, ranker = np.asarray(recall, dtype=np.float64), np.asarray(ranker, dtype=np.float64)
    if recall.shape != ranker.shape:
        raise ValueError(f"s_c {recall.shape} and s_r {ranker.shape} differ")
    return (recall + ranker) / 2.0


def select_terms(candidates: Sequence[str], scores: Sequence[float], count_class: int, theta: float = DEFAULT_THETA) -> list[str]:
    """The predicted term set of one mention, best first.

    Args:
        candidates / scores: the ``k_c`` candidates and their final scores (any order).
        count_class: the count head's class: 0 = one term, 1 = two, 2 = three or more.
        theta: the score threshold used when three or more terms are predicted.
    """
    if len(candidates) != len(scores):
        raise ValueError(f"{len(candidates)} candidates but {len(scores)} scores")
    if count_class not in (0, 1, 2):
        raise ValueError(f"count_class must be 0, 1 or 2, got {count_class}")
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    ranked = [candidates[i] for i in order]
    if count_class < 2:
        return ranked[: count_class + 1]
    above = [candidates[i] for i in order[3:] if scores[i] > theta]
    return ranked[:3] + above


def tune_theta(
    candidates: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]],
    count_classes: Sequence[int],
    gold: Sequence[set[str]],
    grid: Sequence[float] | None = None,
) -> tuple[float, float]:
    """``(θ, accuracy)`` maximising exact-set accuracy over ``grid`` (ties → the θ closest to 0.8)."""
    grid = list(grid) if grid is not None else [round(x, 3) for x in np.arange(0.3, 1.0001, 0.025)]
    if not grid:
        raise ValueError("empty theta grid")
    best: tuple[float, float] | None = None
    for theta in sorted(grid, key=lambda t: abs(t - DEFAULT_THETA)):
        pred = [set(select_terms(c, s, k, theta)) for c, s, k in zip(candidates, scores, count_classes, strict=True)]
        acc = exact_set_accuracy(list(gold), pred)
        if best is None or acc > best[1]:
            best = (float(theta), float(acc))
    assert best is not None
    return best
