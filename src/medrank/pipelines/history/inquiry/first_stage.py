"""First stage of the inquiry engine: expected information gain of each question still open.

For a binary finding with answer probabilities ``yes[c]``, ``no[c]`` (and "not sure" for the rest),
the expected posterior entropy after the answer is

    sum over answers a of P(a) * H(posterior after a),   P(a) = sum_c p(c) P(a | c)

and the gain is ``H(p)`` minus that ("not sure" leaves the posterior as it is). With the joint
masses ``j[c] = p(c) P(a | c)`` and ``m = sum_c j[c]``, ``P(a) * H(posterior after a) = m log m -
sum_c j[c] log j[c]``, and ``sum_c j log j = (p log p) . P(a | .) + p . (P(a | .) log P(a | .))``: two
matrix-vector products per answer column, no logarithm per question. A categorical
finding has one answer per value. A multi-choice finding's answer is a set of values; its gain is
taken as the sum of the gains of its values, each a yes/no answer (exact for values independent
given the condition up to the interaction between them, which the naive-Bayes tables ignore anyway).

Once the posterior has settled on one condition every gain is close to zero and their order says
little; with ``presence_weight`` w > 0 a question's score is its gain plus w times the probability,
under the posterior, that the answer is positive (present, or a value other than the default). A
small w leaves the order of informative questions alone and, once nothing is informative any more,
asks first about the findings the patient most probably has (which the differential and the
positive-evidence recall both need).

A question is open when its finding is not established yet and, for a member of a DDXPlus
``code_question`` group, when the group's main finding is present.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.posterior import PRESENT, NaiveBayes


def _xlogx(x: np.ndarray) -> np.ndarray:
    from scipy.special import xlogy  # 0 at 0

    return xlogy(x, x)


def _expected_entropy(p: np.ndarray, p_log_p: np.ndarray, table: np.ndarray, table_log_table: np.ndarray) -> np.ndarray:
    """``P(a) * H(posterior after a)`` for every answer column of ``table`` = P(a | c), (C, N)."""
    mass = p @ table
    return _xlogx(mass) - (p_log_p @ table + p @ table_log_table)


class InformationGain:
    """Scores open questions of a :class:`NaiveBayes` model by expected information gain.

    Every question is scored in a few matrix operations per turn (an inquiry asks hundreds of
    thousands of them while the engine is fitted on simulated patients): the yes / no answers of
    binary findings and of each multi-choice value are the columns of one matrix, the values of the
    categorical findings those of another, and each column's gain is added to its finding's.
    """

    def __init__(self, model: NaiveBayes, presence_weight: float = 0.0) -> None:
        if presence_weight < 0:
            raise ValueError(f"presence_weight must be >= 0, got {presence_weight}")
        self.model = model
        self.presence_weight = presence_weight
        variables = list(model.variables.values())
        self.names = [v.name for v in variables]
        self._index = {name: i for i, name in enumerate(self.names)}
        # findings in name order, and each finding's place in it (ties between equal scores go by name)
        self._by_name = np.argsort(np.array(self.names, dtype=object), kind="stable")
        self._name_rank = np.empty(len(self.names), dtype=np.int64)
        self._name_rank[self._by_name] = np.arange(len(self.names))
        n_conditions = len(model.conditions)
        yes, no, owner, values, value_owner = [], [], [], [], []
        presence = np.zeros((n_conditions, len(variables)))  # P(positive answer | condition)
        for i, v in enumerate(variables):
            if v.kind == "B":
                assert v.yes is not None and v.no is not None
                yes.append(v.yes)
                no.append(v.no)
                owner.append(i)
                presence[:, i] = v.yes
                continue
            assert v.probs is not None
            positive = np.array([x != v.default for x in v.values])
            if v.kind == "C":
                values.extend(v.probs.T)
                value_owner.extend([i] * v.probs.shape[1])
                presence[:, i] = v.probs[:, positive].sum(axis=1)
            else:  # each non-default value of a multi-choice finding is a yes / no answer of its own
                p = v.probs[:, positive]
                yes.extend(p.T)
                no.extend((1.0 - p).T)
                owner.extend([i] * p.shape[1])
                presence[:, i] = 1.0 - np.prod(1.0 - p, axis=1)
        empty = np.zeros((n_conditions, 0))
        self._yes = np.stack(yes, axis=1) if yes else empty
        self._no = np.stack(no, axis=1) if no else empty
        self._values = np.stack(values, axis=1) if values else empty
        self._yes_log, self._no_log, self._values_log = _xlogx(self._yes), _xlogx(self._no), _xlogx(self._values)
        # column -> finding: summing a finding's columns is one matrix product, for one posterior or a batch
        self._owner_sum = np.zeros((len(owner), len(variables)))
        self._owner_sum[np.arange(len(owner)), owner] = 1.0
        self._value_owner_sum = np.zeros((len(value_owner), len(variables)))
        self._value_owner_sum[np.arange(len(value_owner)), value_owner] = 1.0
        self._categorical = np.array([v.kind == "C" for v in variables])
        self._presence = presence
        #: group name -> indices of the findings asked only when the group's main finding is present
        members: dict[str, list[int]] = {}
        for i, v in enumerate(variables):
            if v.group != v.name:
                members.setdefault(v.group, []).append(i)
        self._members = {g: np.array(ix, dtype=np.int64) for g, ix in members.items()}

    def open_mask(self, observed: Mapping[str, Any]) -> np.ndarray:
        """Boolean mask over :attr:`names` of the questions still open: not established yet and, for a member
        of a question group, its group's main finding present."""
        mask = np.ones(len(self.names), dtype=bool)
        for name in observed:
            i = self._index.get(name)
            if i is not None:
                mask[i] = False
        for group, members in self._members.items():
            if observed.get(group) != PRESENT:
                mask[members] = False
        return mask

    def gains(self, posterior: np.ndarray) -> np.ndarray:
        """Score of every finding (open or not) in the order of :attr:`names`: gain in nats, plus the
        presence term when ``presence_weight`` > 0. ``posterior`` is one distribution (C,) or a batch
        (B, C); the result is (N,) or (B, N)."""
        p = np.asarray(posterior, dtype=np.float64)
        single = p.ndim == 1
        p = np.atleast_2d(p)
        p = p / p.sum(axis=1, keepdims=True)
        p_log_p = _xlogx(p)
        h0 = -p_log_p.sum(axis=1, keepdims=True)
        yes = _expected_entropy(p, p_log_p, self._yes, self._yes_log)
        no = _expected_entropy(p, p_log_p, self._no, self._no_log)
        unsure = np.clip(1.0 - p @ self._yes - p @ self._no, 0.0, 1.0)
        out = np.maximum(h0 - (yes + no + unsure * h0), 0.0) @ self._owner_sum
        if self._values.shape[1]:
            expected = _expected_entropy(p, p_log_p, self._values, self._values_log) @ self._value_owner_sum
            out = np.where(self._categorical, np.maximum(h0 - expected, 0.0), out)
        if self.presence_weight:
            out = out + self.presence_weight * (p @ self._presence)
        # float noise must not decide between questions of equal score (ties go by name)
        out = np.round(out, 12)
        return out[0] if single else out

    def best(self, posteriors: np.ndarray, open_masks: np.ndarray) -> np.ndarray:
        """Index (into :attr:`names`) of the best open question for each row of a (B, C) batch of
        posteriors and (B, N) open masks, as :meth:`rank` orders them; -1 where none is open."""
        gains = np.where(open_masks, self.gains(posteriors), -np.inf)[:, self._by_name]
        first = np.argmax(gains, axis=1)  # the first of equal scores: the smallest name
        found = np.isfinite(gains[np.arange(len(gains)), first])
        return np.where(found, self._by_name[first], -1)

    def scores(self, posterior: np.ndarray, observed: Mapping[str, Any]) -> dict[str, float]:
        """Gain of every open question (finding name -> nats)."""
        gains = self.gains(posterior)
        return {self.names[i]: float(gains[i]) for i in np.flatnonzero(self.open_mask(observed))}

    def rank(self, posterior: np.ndarray, observed: Mapping[str, Any], k: int) -> list[tuple[str, float]]:
        """Top ``k`` open questions, best first (ties by finding name for a stable order)."""
        open_idx = np.flatnonzero(self.open_mask(observed))
        if not len(open_idx):
            return []
        gains = self.gains(posterior)[open_idx]
        order = np.lexsort((self._name_rank[open_idx], -gains))[:k]
        return [(self.names[open_idx[j]], float(gains[j])) for j in order]
