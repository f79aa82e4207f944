"""Which conditions belong in the differential: a multi-label model over the findings an inquiry established.

The naive-Bayes posterior ranks conditions well but is far too peaked to say which of them a
clinician would keep in the differential (DDXPlus gives each patient a reference differential of
about nine conditions). This model learns, per condition, P(condition in the differential |
established findings, age band, sex) with one logistic regression per condition (inverse
regularisation ``c`` = 1, the best of 0.1-3 on the inner split of the training part).

Its input is what an inquiry knows, not the patient's full record: each finding is either present
(one feature per evidence, or per non-default value of a categorical / multi-choice evidence),
asked and negative (absent, or the default value; one feature per evidence), or not established
(all its features 0). A full record has no "not asked" findings, so the model is fitted on the
states the engine's own inquiries reach on the training patients (see
:func:`medrank.pipelines.history.inquiry.simulate.inquiry_states`), the same kind of input it
is applied to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.posterior import AGE_BANDS, PRESENT, UNSURE, NaiveBayes, age_band


class DifferentialModel:
    def __init__(self, model: NaiveBayes, c: float = 1.0) -> None:
        self.conditions = model.conditions
        self.columns: dict[tuple[str, str], int] = {}
        for name, var in model.variables.items():
            if var.kind == "B":
                self.columns[(name, PRESENT)] = len(self.columns)
            else:
                for v in var.values:
                    if v != var.default:
                        self.columns[(name, v)] = len(self.columns)
        # one "asked, and negative" feature per finding, after the positive ones
        self.negative = {name: len(self.columns) + i for i, name in enumerate(model.variables)}
        self.demographic_start = len(self.columns) + len(self.negative)
        self.n_features = self.demographic_start + len(AGE_BANDS) + 2
        self.c = c
        self.weights: np.ndarray | None = None
        self.bias: np.ndarray | None = None

    def features(self, observed: Mapping[str, Any]) -> np.ndarray:
        """The feature vector of an observation map (finding -> value, plus ``age`` / ``sex``)."""
        x = np.zeros(self.n_features)
        for name, value in observed.items():
            if name in ("age", "sex") or value == UNSURE or name not in self.negative:
                continue
            values = (value,) if isinstance(value, str) else tuple(value)
            hits = [j for j in (self.columns.get((name, v)) for v in values) if j is not None]
            if hits:
                x[hits] = 1.0
            else:  # absent, or a categorical / multi-choice evidence at its default value
                x[self.negative[name]] = 1.0
        if "age" in observed:
            x[self.demographic_start + age_band(int(observed["age"]))] = 1.0
        if "sex" in observed:
            x[self.demographic_start + len(AGE_BANDS) + (0 if observed["sex"] == "M" else 1)] = 1.0
        return x

    def fit(self, observations: Sequence[Mapping[str, Any]],
            differentials: Sequence[Sequence[str]]) -> DifferentialModel:
        """Fit on observation maps (what an inquiry established about each training patient) and the
        reference differential of each."""
        from scipy.sparse import csr_matrix
        from sklearn.linear_model import LogisticRegression

        if len(observations) != len(differentials) or not observations:
            raise ValueError("fit needs one reference differential per observation, and at least one")
        cond_index = {c: i for i, c in enumerate(self.conditions)}
        x = csr_matrix(np.stack([self.features(o) for o in observations]))
        ys = np.zeros((len(observations), len(self.conditions)))
        for i, diff in enumerate(differentials):
            ys[i, [cond_index[c] for c in diff if c in cond_index]] = 1.0
        self.weights = np.zeros((self.n_features, len(self.conditions)))
        self.bias = np.zeros(len(self.conditions))
        for ci in range(len(self.conditions)):
            col = ys[:, ci]
            if col.min() == col.max():  # always or never in the differential
                self.bias[ci] = 20.0 if col[0] else -20.0
                continue
            clf = LogisticRegression(C=self.c, solver="liblinear", max_iter=1000).fit(x, col)
            self.weights[:, ci] = clf.coef_[0]
            self.bias[ci] = clf.intercept_[0]
        return self

    def membership(self, observed: Mapping[str, Any]) -> np.ndarray:
        """P(condition in the differential) for every condition."""
        if self.weights is None or self.bias is None:
            raise RuntimeError("DifferentialModel.fit was not called")
        z = self.features(observed) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    # ------------------------------------------------------------------ saving (plain arrays, no pickle)
    def save(self, path: Any) -> None:
        from medrank.utils.io import atomic_write_npz

        if self.weights is None or self.bias is None:
            raise RuntimeError("DifferentialModel.fit was not called")
        atomic_write_npz(path, weights=self.weights, bias=self.bias, conditions=np.array(self.conditions),
                         columns=np.array([f"{n}\t{v}" for n, v in self.columns]), c=np.array(self.c))

    def load(self, path: Any) -> DifferentialModel:
        """Weights saved by :meth:`save` for the same knowledge base (raises ``ValueError`` otherwise)."""
        with np.load(path, allow_pickle=False) as z:
            same = (list(z["conditions"]) == list(self.conditions)
                    and list(z["columns"]) == [f"{n}\t{v}" for n, v in self.columns]
                    and z["weights"].shape == (self.n_features, len(self.conditions)))
            if not same:
                raise ValueError(f"{path}: saved differential model does not match this knowledge base")
            self.weights, self.bias, self.c = z["weights"].copy(), z["bias"].copy(), float(z["c"])
        return self
