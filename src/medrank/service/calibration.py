"""A calibrated confidence for a zero-shot ranking: P(the top hit is right | its score and its margin).

Platt scaling (Platt, 1999): a logistic regression (scikit-learn) on two features of a ranking,
the top score and its margin over the second, fit on labelled queries whose gold answers are
known. It is fit once, when the knowledge base is built, on a fixed-seed carve-out of a visible
training split, and stored as four numbers beside the knowledge base.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


def ranking_features(scores: Sequence[float]) -> tuple[float, float]:
    """(top score, top score − second score) of a ranking, best first (0 for what is missing)."""
    top = float(scores[0]) if len(scores) else 0.0
    second = float(scores[1]) if len(scores) > 1 else 0.0
    return top, top - second


@dataclass(frozen=True)
class TopHitCalibrator:
    """``probability(scores)`` = σ(w · features + b), fit by :meth:`fit`."""

    weights: tuple[float, float]
    bias: float
    #: the mean and scale the features were standardised with before the fit
    mean: tuple[float, float]
    scale: tuple[float, float]
    #: labelled queries it was fit on, and how often their top hit was right
    fitted_on: int
    top1_accuracy: float
    source: str

    def probability(self, scores: Sequence[float]) -> float:
        x = ranking_features(scores)
        z = self.bias + sum(w * (v - m) / s for w, v, m, s in zip(self.weights, x, self.mean, self.scale, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    @classmethod
    def fit(cls, rank: Callable[[list[str]], list[tuple[list[str], list[float]]]], texts: Sequence[str],
            gold: Sequence[set[str]], source: str, sample: int = 600, seed: int = 0) -> TopHitCalibrator:
        """Fit on a fixed-seed sample of ``texts`` (``rank(texts)`` → ``(ids, scores)`` per text, best first)."""
        from sklearn.linear_model import LogisticRegression

        if len(texts) != len(gold):
            raise ValueError(f"{len(texts)} texts for {len(gold)} gold sets")
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        chosen = order[:sample]
        ranked = rank([texts[i] for i in chosen])
        features = np.asarray([ranking_features(scores) for _, scores in ranked], dtype=np.float64)
        labels = np.asarray([bool(ids) and ids[0] in gold[i] for (ids, _), i in zip(ranked, chosen, strict=True)])
        if labels.all() or not labels.any():
            raise ValueError("calibration needs both right and wrong top hits among the sampled queries")
        mean, scale = features.mean(axis=0), features.std(axis=0)
        scale[scale == 0] = 1.0
        model = LogisticRegression().fit((features - mean) / scale, labels)
        return cls(tuple(float(w) for w in model.coef_[0]), float(model.intercept_[0]), tuple(float(m) for m in mean),
                   tuple(float(s) for s in scale), len(chosen), round(float(labels.mean()), 4), source)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TopHitCalibrator:
        return cls(tuple(data["weights"]), float(data["bias"]), tuple(data["mean"]), tuple(data["scale"]),
                   int(data["fitted_on"]), float(data["top1_accuracy"]), str(data["source"]))
