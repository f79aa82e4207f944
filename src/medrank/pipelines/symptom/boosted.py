"""Gradient-boosted trees for the set decision, kept as plain numbers (JSON), never a pickle.

scikit-learn's :class:`~sklearn.ensemble.GradientBoostingClassifier` (binary log-loss) fits them; what a
saved calibration keeps is each tree's public arrays (``tree_.children_left / children_right / feature /
threshold / value``), the initial log-odds and the learning rate, so a probability is

    p(x) = sigmoid(init + learning_rate · Σ_t value_t(leaf_t(x)))

(Friedman 2001, "Greedy function approximation: a gradient boosting machine"). :meth:`BoostedTrees.raw`
walks the trees in numpy and gives scikit-learn's ``decision_function`` (a test checks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

#: fixed before any run was looked at: shallow trees, a small step, leaves of at least 40 candidates
DEFAULT_PARAMS: dict[str, Any] = {"n_estimators": 200, "learning_rate": 0.05, "max_leaf_nodes": 15,
                                  "min_samples_leaf": 40}


@dataclass(frozen=True)
class Tree:
    left: np.ndarray  # child index, -1 at a leaf
    right: np.ndarray
    feature: np.ndarray  # feature column tested at the node (-2 at a leaf)
    threshold: np.ndarray  # go left when x[feature] <= threshold
    value: np.ndarray  # the node's output (used at leaves)

    def to_json(self) -> dict[str, list[Any]]:
        return {"left": self.left.tolist(), "right": self.right.tolist(), "feature": self.feature.tolist(),
                "threshold": self.threshold.tolist(), "value": self.value.tolist()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Tree:
        tree = cls(np.asarray(d["left"], dtype=np.int64), np.asarray(d["right"], dtype=np.int64),
                   np.asarray(d["feature"], dtype=np.int64), np.asarray(d["threshold"], dtype=np.float64),
                   np.asarray(d["value"], dtype=np.float64))
        n = len(tree.left)
        if not all(len(a) == n for a in (tree.right, tree.feature, tree.threshold, tree.value)) or n == 0:
            raise ValueError("a boosted tree's arrays must be non-empty and of one length")
        inner = tree.left >= 0
        if ((tree.left[inner] >= n).any() or (tree.right[inner] >= n).any() or (tree.right[inner] < 0).any()
                or (tree.left[inner] <= np.flatnonzero(inner)).any() or (tree.right[inner] <= np.flatnonzero(inner)).any()):
            raise ValueError("a boosted tree's child indexes must point forward inside the tree")
        return tree


@dataclass(frozen=True)
class BoostedTrees:
    init: float  # log-odds before the first tree
    learning_rate: float
    trees: tuple[Tree, ...]
    n_features: int

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, seed: int = 0, **params: Any) -> BoostedTrees:
        """Fit on rows ``x`` and 0/1 labels ``y`` (``params`` override :data:`DEFAULT_PARAMS`)."""
        from sklearn.ensemble import GradientBoostingClassifier

        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y).astype(int)
        if len(np.unique(y)) < 2:
            raise ValueError("boosted trees need both positive and negative rows")
        model = GradientBoostingClassifier(**{**DEFAULT_PARAMS, **params}, random_state=seed).fit(x, y)
        trees = tuple(Tree(t.tree_.children_left.astype(np.int64), t.tree_.children_right.astype(np.int64),
                           t.tree_.feature.astype(np.int64), t.tree_.threshold.astype(np.float64),
                           t.tree_.value[:, 0, 0].astype(np.float64)) for t in model.estimators_[:, 0])
        # the prior log-odds scikit-learn starts from (its DummyClassifier init): decision_function minus the trees
        without_init = cls(0.0, float(model.learning_rate), trees, x.shape[1])
        init = float(model.decision_function(x[:1])[0] - without_init.raw(x[:1])[0])
        return cls(init, float(model.learning_rate), trees, x.shape[1])

    def raw(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.n_features)
        if not self.trees:
            return np.full(len(x), self.init)
        left, right, feature, threshold, value, roots = self._packed
        # every (row, tree) pair walks at once: a few small gathers per level instead of a Python loop per tree
        node = np.broadcast_to(roots, (len(x), len(roots))).copy()
        rows = np.arange(len(x))[:, None]
        while True:
            inner = left[node] >= 0
            if not inner.any():
                break
            go_left = x[rows, np.where(inner, feature[node], 0)] <= threshold[node]
            node = np.where(inner, np.where(go_left, left[node], right[node]), node)
        return self.init + self.learning_rate * value[node].sum(axis=1)

    @cached_property
    def _packed(self) -> tuple[np.ndarray, ...]:
        """Every tree's arrays end to end, child indexes shifted to the packed positions."""
        sizes = np.array([len(t.left) for t in self.trees])
        roots = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        shifted = [(np.where(t.left >= 0, t.left + r, -1), np.where(t.right >= 0, t.right + r, -1))
                   for t, r in zip(self.trees, roots, strict=True)]
        return (np.concatenate([lr[0] for lr in shifted]), np.concatenate([lr[1] for lr in shifted]),
                np.concatenate([t.feature for t in self.trees]), np.concatenate([t.threshold for t in self.trees]),
                np.concatenate([t.value for t in self.trees]), roots)

    def probability(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.raw(x)))

    def to_json(self) -> dict[str, Any]:
        return {"init": self.init, "learning_rate": self.learning_rate, "n_features": self.n_features,
                "trees": [t.to_json() for t in self.trees]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BoostedTrees:
        trees = tuple(Tree.from_json(t) for t in d["trees"])
        n_features = int(d["n_features"])
        if any((t.feature[t.left >= 0] >= n_features).any() for t in trees):
            raise ValueError("a boosted tree tests a feature the model does not have")
        return cls(float(d["init"]), float(d["learning_rate"]), trees, n_features)
