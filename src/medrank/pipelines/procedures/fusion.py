"""FB, the fusion block: combine recall distance and ranker probability, then decide how many terms to output.

* :func:`recall_scores` — :math:`s_c(c_i) = 1 - d(m, c_i) / \\sum_j d(m, c_j)` over the ``k_c`` candidates;
* :func:`fuse` — final score :math:`(s_c + s_r)/2` with :math:`s_r` the KAR probability;
* :func:`select_terms` — the output set: the top-``x`` candidates when the count head predicts
  ``x < 3`` terms, else every candidate scoring above ``θ`` plus the top 3;
* :func:`tune_theta` — ``θ`` maximising exact-set accuracy on the train-side validation split;
* :class:`LearnedFusion` — not in the paper (an extension): a logistic regression over ``s_c``,
  ``s_r`` and the mention memory's votes (:mod:`.memory`) replaces ``(s_c + s_r)/2``; fitted on
  the train-side validation split, whose mentions neither MTCG nor KAR trained on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


LEARNED_FEATURES = ("s_c", "s_r", "vote_sum", "vote_max", "vote_nn1")
RANKER_SPACES = ("probability", "logit")
LOGIT_EPS = 1e-6  # s_r is clipped to [eps, 1 - eps] before its logit (float32 sigmoids reach 1.0)


def feature_names(ranker: str = "probability") -> tuple[str, ...]:
    """The learned fusion's feature names; ``ranker="logit"`` reads KAR's logit instead of its probability."""
    if ranker not in RANKER_SPACES:
        raise ValueError(f"ranker must be one of {RANKER_SPACES}, got {ranker!r}")
    return LEARNED_FEATURES if ranker == "probability" else ("s_c", "logit(s_r)", *LEARNED_FEATURES[2:])


@dataclass(frozen=True)
class LearnedFusion:
    """``P(candidate is gold) = σ(w · standardise([s_c, s_r, vote_sum, vote_max, vote_nn1]) + b)``.

    The probability takes the place of FB's ``(s_c + s_r)/2`` in :func:`select_terms` (same count
    rule; ``theta`` is tuned for these scores). Saved as JSON (weights and standardisation).
    ``ranker="logit"`` reads KAR's logit ``log(s_r / (1 - s_r))`` in place of its probability: a
    KAR trained with a listwise term spreads its scores on the logit scale and squashes most
    probabilities to 0 or 1, where a linear model cannot separate them.
    """

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    theta: float = DEFAULT_THETA
    ranker: str = "probability"

    FILE = "learned_fusion.json"

    def __post_init__(self) -> None:
        names = feature_names(self.ranker)
        if not (len(self.mean) == len(self.scale) == len(self.coef) == len(names)):
            raise ValueError(f"LearnedFusion needs {len(names)} means, scales and weights ({names})")
        if any(s <= 0 for s in self.scale):
            raise ValueError("feature scales must be > 0")

    @property
    def feature_names(self) -> tuple[str, ...]:
        return feature_names(self.ranker)

    @staticmethod
    def features(recall: np.ndarray, ranker: np.ndarray, votes: np.ndarray, space: str = "probability") -> np.ndarray:
        """``(..., k)`` s_c and s_r and ``(..., k, 3)`` votes → ``(..., k, 5)`` features (s_r as a probability or a logit)."""
        feature_names(space)
        recall, ranker, votes = (np.asarray(a, dtype=np.float64) for a in (recall, ranker, votes))
        if recall.shape != ranker.shape or votes.shape != (*recall.shape, 3):
            raise ValueError(f"s_c {recall.shape}, s_r {ranker.shape} and votes {votes.shape} do not match")
        if space == "logit":
            p = np.clip(ranker, LOGIT_EPS, 1 - LOGIT_EPS)
            ranker = np.log(p / (1 - p))
        return np.concatenate([recall[..., None], ranker[..., None], votes], axis=-1)

    def score(self, recall: np.ndarray, ranker: np.ndarray, votes: np.ndarray) -> np.ndarray:
        """Probabilities with the shape of ``recall``."""
        z = (self.features(recall, ranker, votes, self.ranker) - np.array(self.mean)) / np.array(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.array(self.coef) + self.intercept)))

    @classmethod
    def fit(cls, features: np.ndarray, labels: np.ndarray, c: float = 1.0, seed: int = 13, ranker: str = "probability") -> LearnedFusion:
        """Fit on ``(N, 5)`` candidate features (from :meth:`features` with the same ``ranker`` space) and ``(N,)`` 0/1 labels (L2, strength ``1/c``)."""
        from sklearn.linear_model import LogisticRegression

        x, y = np.asarray(features, dtype=np.float64), np.asarray(labels)
        if x.ndim != 2 or x.shape[1] != len(LEARNED_FEATURES) or len(y) != len(x):
            raise ValueError(f"features must be (N, {len(LEARNED_FEATURES)}) with N labels, got {x.shape} and {y.shape}")
        if len(set(y.tolist())) != 2:
            raise ValueError("labels need both gold (1) and non-gold (0) candidates")
        mean, scale = x.mean(0), x.std(0)
        scale = np.where(scale > 0, scale, 1.0)
        model = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit((x - mean) / scale, y.astype(int))
        return cls(tuple(mean.tolist()), tuple(scale.tolist()), tuple(model.coef_[0].tolist()), float(model.intercept_[0]), ranker=ranker)

    def with_theta(self, theta: float) -> LearnedFusion:
        check_theta(float(theta))
        return LearnedFusion(self.mean, self.scale, self.coef, self.intercept, float(theta), self.ranker)

    def save(self, directory: str | Path) -> None:
        from medrank.utils.io import atomic_write_json

        atomic_write_json(
            Path(directory) / self.FILE,
            {"features": list(self.feature_names), "mean": list(self.mean), "scale": list(self.scale), "coef": list(self.coef), "intercept": self.intercept, "theta": self.theta},
        )

    @classmethod
    def load(cls, directory: str | Path) -> LearnedFusion | None:
        path = Path(directory) / cls.FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
        spaces = {feature_names(r): r for r in RANKER_SPACES}
        features = tuple(raw.get("features", ()))
        if features not in spaces:
            raise ValueError(f"{path} was written for features {raw.get('features')}, this version reads {list(spaces)}")
        return cls(tuple(raw["mean"]), tuple(raw["scale"]), tuple(raw["coef"]), float(raw["intercept"]), float(raw["theta"]), spaces[features])


def check_theta(theta: float) -> float:
    """θ thresholds final scores, which lie in [0, 1] (FB's mean of two, the fusion's probability)."""
    if not 0.0 <= theta <= 1.0:  # also false for NaN
        raise ValueError(f"theta must be in [0, 1], got {theta}")
    return theta
