"""A calibrated confidence for a zero-shot ranking: P(the top hit is right | its score and its margin).

Platt scaling (Platt, 1999): a logistic regression (scikit-learn) on three features of a ranking,
the top score, its margin over the second, and whether the top name is the query itself (a fused
rank score says little about that case: two near-identical names get near-identical scores), fit on
labelled queries whose gold answers are known. It is fit once, when the knowledge base is built, on a
fixed-seed carve-out of a visible training split, and stored as a few numbers beside the knowledge base.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


def same_text(a: str, b: str) -> bool:
    """``a`` and ``b`` are the same text up to case and white space."""
    return "".join(a.split()).casefold() == "".join(b.split()).casefold()


def ranking_features(scores: Sequence[float], exact: bool = False) -> tuple[float, float, float]:
    """(top score, top score − second score, 1 if the top name is the query else 0) of a ranking, best first
    (0 for what is missing)."""
    top = float(scores[0]) if len(scores) else 0.0
    second = float(scores[1]) if len(scores) > 1 else 0.0
    return top, top - second, float(exact)


#: what :func:`ranking_features` returns, in order
FEATURES = ("top score", "margin", "top name is the query")


@dataclass(frozen=True)
class TopHitCalibrator:
    """``probability(scores, exact)`` = σ(w · features + b), fit by :meth:`fit`."""

    weights: tuple[float, ...]
    bias: float
    #: the mean and scale the features were standardised with before the fit
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    #: labelled queries it was fit on, and how often their top hit was right
    fitted_on: int
    top1_accuracy: float
    source: str

    def probability(self, scores: Sequence[float], exact: bool = False) -> float:
        """P(the top hit is right) given the ranking's ``scores`` and whether its top name is the query."""
        x = ranking_features(scores, exact)
        z = self.bias + sum(w * (v - m) / s for w, v, m, s in zip(self.weights, x, self.mean, self.scale, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    @classmethod
    def fit(cls, rank: Callable[[list[str]], list[tuple[list[str], list[float]]]], texts: Sequence[str],
            gold: Sequence[set[str]], source: str, sample: int = 600, seed: int = 0) -> TopHitCalibrator:
        """Fit on a fixed-seed sample of ``texts`` (``rank(texts)`` → ``(names, scores)`` per text, best first;
        ``gold``: the right names of each text)."""
        from sklearn.linear_model import LogisticRegression

        if len(texts) != len(gold):
            raise ValueError(f"{len(texts)} texts for {len(gold)} gold sets")
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        chosen = order[:sample]
        ranked = rank([texts[i] for i in chosen])
        features = np.asarray([ranking_features(scores, bool(ids) and same_text(texts[i], ids[0]))
                               for (ids, scores), i in zip(ranked, chosen, strict=True)], dtype=np.float64)
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
        if not len(data["weights"]) == len(data["mean"]) == len(data["scale"]) == len(FEATURES):
            raise ValueError(f"a calibration of {len(data['weights'])} features; this version has {len(FEATURES)}: "
                             f"{', '.join(FEATURES)}")
        return cls(tuple(data["weights"]), float(data["bias"]), tuple(data["mean"]), tuple(data["scale"]),
                   int(data["fitted_on"]), float(data["top1_accuracy"]), str(data["source"]))
