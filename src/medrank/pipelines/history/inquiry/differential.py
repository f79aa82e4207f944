"""Which conditions belong in the differential: a multi-label model over the positive findings.

The naive-Bayes posterior ranks conditions well but is far too peaked to say which of them a
clinician would keep in the differential (DDXPlus gives each patient a reference differential of
about nine conditions). This model learns, per condition, P(condition in the differential |
positive findings, age band, sex) with one logistic regression per condition, trained on the
training patients' records. Only positive findings are features (an inquiry leaves most absent
findings unasked, so absences are not comparable between a full record and a dialogue); each
training record is also seen with a random part of its positives hidden, as after an inquiry that
missed some of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.kb import Patient
from medrank.pipelines.history.inquiry.posterior import AGE_BANDS, PRESENT, NaiveBayes, age_band


class DifferentialModel:
    def __init__(self, model: NaiveBayes, hide: float = 0.25, copies: int = 2, c: float = 1.0, seed: int = 13) -> None:
        self.conditions = model.conditions
        self.columns: dict[tuple[str, str], int] = {}
        for name, var in model.variables.items():
            if var.kind == "B":
                self.columns[(name, PRESENT)] = len(self.columns)
            else:
                for v in var.values:
                    if v != var.default:
                        self.columns[(name, v)] = len(self.columns)
        self.n_features = len(self.columns) + len(AGE_BANDS) + 2
        self.defaults = {n: v.default for n, v in model.variables.items()}
        self.hide, self.copies, self.c, self.seed = hide, copies, c, seed
        self.weights: np.ndarray | None = None
        self.bias: np.ndarray | None = None

    def _positives(self, observed: Mapping[str, Any]) -> list[int]:
        cols = []
        for name, value in observed.items():
            if name in ("age", "sex"):
                continue
            values = (value,) if isinstance(value, str) else tuple(value)
            for v in values:
                j = self.columns.get((name, v))
                if j is not None:
                    cols.append(j)
        return cols

    def features(self, observed: Mapping[str, Any], positives: Sequence[int] | None = None) -> np.ndarray:
        x = np.zeros(self.n_features)
        x[list(self._positives(observed) if positives is None else positives)] = 1.0
        if "age" in observed:
            x[len(self.columns) + age_band(int(observed["age"]))] = 1.0
        if "sex" in observed:
            x[len(self.columns) + len(AGE_BANDS) + (0 if observed["sex"] == "M" else 1)] = 1.0
        return x

    @staticmethod
    def record_observed(patient: Patient) -> dict[str, Any]:
        obs: dict[str, Any] = {}
        for name, got in patient.record.items():
            obs[name] = PRESENT if got is True else got
        if patient.age is not None:
            obs["age"] = patient.age
        if patient.sex is not None:
            obs["sex"] = patient.sex
        return obs

    def fit(self, patients: Sequence[Patient]) -> DifferentialModel:
        from scipy.sparse import csr_matrix
        from sklearn.linear_model import LogisticRegression

        rng = np.random.default_rng(self.seed)
        rows, labels = [], []
        cond_index = {c: i for i, c in enumerate(self.conditions)}
        for p in patients:
            obs = self.record_observed(p)
            pos = self._positives(obs)
            y = np.zeros(len(self.conditions))
            y[[cond_index[c] for c in p.differential if c in cond_index]] = 1.0
            for copy in range(self.copies + 1):
                kept = pos if copy == 0 else [j for j in pos if rng.random() >= self.hide]
                rows.append(self.features(obs, kept))
                labels.append(y)
        x, ys = csr_matrix(np.stack(rows)), np.stack(labels)
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
