"""The nDCG-based history losses use the exponential gain 2**y - 1: hand-computed cases with graded labels 0/1/2."""

from __future__ import annotations

import math

import pytest
import torch

from medrank.pipelines.history.losses import ApproxNDCGLoss, LambdaLoss
from medrank.pipelines.history.losses._common import gains, ideal_dcg


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_gain_and_ideal_dcg_of_graded_labels() -> None:
    assert gains(torch.tensor([0.0, 1.0, 2.0, 3.0])).tolist() == [0.0, 1.0, 3.0, 7.0]
    # ideal order 2, 1, 0: 3/log2(2) + 1/log2(3) + 0
    assert ideal_dcg(torch.tensor([[1.0, 0.0, 2.0]])).item() == pytest.approx(3 + 1 / math.log2(3), rel=1e-6)


def test_approx_ndcg_with_graded_labels_hand_computed() -> None:
    scores = torch.tensor([[1.0, 0.0]])
    labels = torch.tensor([[1.0, 2.0]])
    # approximate ranks: 1 + σ(s_j - s_i)
    r0, r1 = 1 + _sig(0.0 - 1.0), 1 + _sig(1.0 - 0.0)
    dcg = 1 / math.log2(1 + r0) + 3 / math.log2(1 + r1)  # gains 2^1 - 1 = 1 and 2^2 - 1 = 3
    idcg = 3 / math.log2(2) + 1 / math.log2(3)
    assert ApproxNDCGLoss()(scores, labels).item() == pytest.approx(-dcg / idcg, rel=1e-6)


def test_lambdaloss_with_graded_labels_hand_computed() -> None:
    scores = torch.tensor([[2.0, 1.0, 0.0]])  # ranks 1, 2, 3
    labels = torch.tensor([[0.0, 1.0, 2.0]])  # gains 0, 1, 3 (the worst order)
    idcg = 3 + 1 / math.log2(3)

    def inv_d(x: int) -> float:
        return 1 / math.log2(1 + x)

    def log2_sig(x: float) -> float:
        return math.log2(_sig(x))

    # pairs (i, j) with y_i > y_j: |1/D(|Δr|) − 1/D(|Δr| + 1)| · |G_i − G_j| / maxDCG · −log2 σ(s_i − s_j)
    expected = -(
        abs(inv_d(1) - inv_d(2)) * (1 - 0) / idcg * log2_sig(1.0 - 2.0)  # (1, 0): Δr = 1
        + abs(inv_d(2) - inv_d(3)) * (3 - 0) / idcg * log2_sig(0.0 - 2.0)  # (2, 0): Δr = 2
        + abs(inv_d(1) - inv_d(2)) * (3 - 1) / idcg * log2_sig(0.0 - 1.0)  # (2, 1): Δr = 1
    )
    assert LambdaLoss()(scores, labels).item() == pytest.approx(expected, rel=1e-6)
