"""E-FN: false-negative elimination by a precision-calibrated similarity threshold.

Mined "hard negatives" that the model scores very high are often not negatives at all: a
synonym of the gold term, an annotator's omission, a term covering the same finding. E-FN
(Zhang et al., KDD 2022) removes them from mining: after every epoch a threshold ``β`` is
calibrated on **validation** pairs so that the pairs scoring ``>= β`` — the model's confident
positive predictions — are gold with precision ``>= α``; at the next mining pass every
candidate scoring ``>= β`` is treated as a probable positive and never drawn as a negative.
``α`` starts at 0.8 and rises each epoch (the model gets better, so its confident predictions
may be trusted at a stricter level), which lowers the number of excluded candidates as
training progresses. ``β`` per epoch is logged in ``history.json`` and ``efn.json``.

Calibration pairs are, for each validation query, its top ``pool`` candidates in the mining
term set (a pair outside a query's top 200 cannot score above a threshold set for 80 %
precision in practice, and this keeps calibration one matrix product).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def calibrate_threshold(scores: np.ndarray, labels: np.ndarray, alpha: float) -> float:
    """The smallest threshold ``β`` such that the pairs with ``score >= β`` have precision ``>= alpha``.

    Returns ``inf`` when no threshold reaches ``alpha`` (nothing is then excluded). Tied scores
    are all in or all out.
    """
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    if scores.shape != labels.shape:
        raise ValueError(f"scores {scores.shape} and labels {labels.shape} differ")
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    keep = np.isfinite(scores)
    scores, labels = scores[keep], labels[keep]
    if not len(scores):
        return float("inf")
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)
    precision = tp / np.arange(1, len(s) + 1)
    # a cut is only possible after the last of a run of tied scores
    last_of_tie = np.append(s[1:] != s[:-1], True)
    ok = np.flatnonzero((precision >= alpha - 1e-12) & last_of_tie)
    if not len(ok):
        return float("inf")
    return float(s[ok[-1]])


def precision_recall_at(scores: np.ndarray, labels: np.ndarray, beta: float, n_gold: int | None = None) -> tuple[float, float]:
    """Precision and recall of "positive iff ``score >= beta``" (recall over ``n_gold`` when given)."""
    scores = np.asarray(scores).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    pred = scores >= beta
    tp = int((pred & labels).sum())
    precision = tp / int(pred.sum()) if pred.any() else 1.0
    total = n_gold if n_gold is not None else int(labels.sum())
    return precision, (tp / total if total else 0.0)


@dataclass
class AlphaSchedule:
    """``α`` for the mining before epoch ``e`` (1-based): ``min(max, start + step * (e - 1))``."""

    start: float = 0.8
    step: float = 0.05
    max: float = 0.95

    def __post_init__(self) -> None:
        if not 0.0 < self.start <= 1.0 or not 0.0 < self.max <= 1.0 or self.step < 0:
            raise ValueError(f"invalid alpha schedule start={self.start} step={self.step} max={self.max}")

    def __call__(self, epoch: int) -> float:
        return float(min(self.max, self.start + self.step * max(0, epoch - 1)))


@dataclass
class FalseNegativeElimination:
    """Calibrates ``β`` per epoch and remembers it (checkpointed with the trainer's callbacks)."""

    schedule: AlphaSchedule = field(default_factory=AlphaSchedule)
    log: list[dict[str, Any]] = field(default_factory=list)

    def calibrate(self, epoch: int, scores: np.ndarray, labels: np.ndarray, n_gold: int | None = None) -> float:
        alpha = self.schedule(epoch)
        beta = calibrate_threshold(scores, labels, alpha)
        precision, recall = precision_recall_at(scores, labels, beta, n_gold)
        row = {
            "epoch": epoch,
            "alpha": round(alpha, 4),
            "beta": None if not np.isfinite(beta) else round(beta, 6),
            "valid_pairs": int(np.isfinite(np.asarray(scores)).sum()),
            "precision_at_beta": round(precision, 4),
            "recall_at_beta": round(recall, 4),
        }
        self.log = [r for r in self.log if r["epoch"] != epoch] + [row]
        return beta

    def beta(self, epoch: int) -> float | None:
        for r in self.log:
            if r["epoch"] == epoch:
                return r["beta"]
        return None
