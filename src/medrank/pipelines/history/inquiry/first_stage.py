"""First stage of the inquiry engine: expected information gain of each question still open.

For a binary finding with answer probabilities ``yes[c]``, ``no[c]`` (and "not sure" for the rest),
the expected posterior entropy after the answer is

    sum over answers a of P(a) * H(posterior after a),   P(a) = sum_c p(c) P(a | c)

and the gain is ``H(p)`` minus that ("not sure" leaves the posterior as it is). A categorical
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

import heapq
from collections.abc import Mapping
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.posterior import PRESENT, NaiveBayes, Variable, entropy


def _binary_gain(p: np.ndarray, yes: np.ndarray, no: np.ndarray) -> np.ndarray:
    """Expected entropy reduction for binary answers; ``yes`` / ``no`` are (C, N)."""
    h0 = entropy(p)
    joint_yes = p[:, None] * yes
    joint_no = p[:, None] * no
    p_yes = joint_yes.sum(axis=0)
    p_no = joint_no.sum(axis=0)
    p_unsure = np.clip(1.0 - p_yes - p_no, 0.0, 1.0)
    after = p_yes * entropy(joint_yes, axis=0) + p_no * entropy(joint_no, axis=0) + p_unsure * h0
    return np.maximum(h0 - after, 0.0)


def _categorical_gain(p: np.ndarray, probs: np.ndarray) -> float:
    joint = p[:, None] * probs  # (C, V)
    p_v = joint.sum(axis=0)
    return float(max(entropy(p) - float((p_v * entropy(joint, axis=0)).sum()), 0.0))


class InformationGain:
    """Scores open questions of a :class:`NaiveBayes` model by expected information gain."""

    def __init__(self, model: NaiveBayes, presence_weight: float = 0.0) -> None:
        if presence_weight < 0:
            raise ValueError(f"presence_weight must be >= 0, got {presence_weight}")
        self.model = model
        self.presence_weight = presence_weight
        self.binary = [v for v in model.variables.values() if v.kind == "B"]
        self.others = [v for v in model.variables.values() if v.kind != "B"]
        self._yes = np.stack([v.yes for v in self.binary], axis=1) if self.binary else np.zeros((0, 0))
        self._no = np.stack([v.no for v in self.binary], axis=1) if self.binary else np.zeros((0, 0))
        #: each categorical / multi-choice finding's non-default values
        self._positive = {v.name: np.array([x != v.default for x in v.values]) for v in self.others}

    def is_open(self, var: Variable, observed: Mapping[str, Any]) -> bool:
        if var.name in observed:
            return False
        return var.group == var.name or observed.get(var.group) == PRESENT

    def scores(self, posterior: np.ndarray, observed: Mapping[str, Any]) -> dict[str, float]:
        """Gain of every open question (finding name -> nats)."""
        out: dict[str, float] = {}
        if self.binary:
            open_idx = [i for i, v in enumerate(self.binary) if self.is_open(v, observed)]
            if open_idx:
                gains = _binary_gain(posterior, self._yes[:, open_idx], self._no[:, open_idx])
                if self.presence_weight:
                    gains = gains + self.presence_weight * (posterior @ self._yes[:, open_idx])
                out.update({self.binary[i].name: float(g) for i, g in zip(open_idx, gains, strict=True)})
        for var in self.others:
            if not self.is_open(var, observed):
                continue
            assert var.probs is not None
            mask = self._positive[var.name]
            if var.kind == "C":
                out[var.name] = _categorical_gain(posterior, var.probs)
                p_positive = float(posterior @ var.probs[:, mask].sum(axis=1))
            else:
                p = var.probs[:, mask]
                out[var.name] = float(_binary_gain(posterior, p, 1.0 - p).sum())
                p_positive = float(posterior @ (1.0 - np.prod(1.0 - p, axis=1)))
            if self.presence_weight:
                out[var.name] += self.presence_weight * p_positive
        return out

    def rank(self, posterior: np.ndarray, observed: Mapping[str, Any], k: int) -> list[tuple[str, float]]:
        """Top ``k`` open questions, best first (ties by finding name for a stable order)."""
        scores = self.scores(posterior, observed)
        return heapq.nsmallest(k, scores.items(), key=lambda kv: (-kv[1], kv[0]))
