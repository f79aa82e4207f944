"""Hand-computed cases for the seven history re-ranking losses (1x3 / 2x3 lists, padding)."""

from __future__ import annotations

import math

import pytest
import torch

from medrank.pipelines.history.losses import (
    ApproxNDCGLoss,
    BCELoss,
    LambdaLoss,
    ListMLELoss,
    ListNetLoss,
    NeuralNDCGLoss,
    RankNetLoss,
    make_loss,
)

S = [0.5, 2.0, -1.0]
Y = [1.0, 0.0, 0.0]


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def loss_of(loss, scores, labels, mask=None):
    m = None if mask is None else torch.tensor(mask, dtype=torch.bool)
    return float(loss(t(scores), t(labels), m))


def test_bce_by_hand():
    expected = (softplus(-0.5) + softplus(2.0) + softplus(-1.0)) / 3
    assert loss_of(BCELoss(), [S], [Y]) == pytest.approx(expected, abs=1e-9)


def test_ranknet_by_hand():
    expected = (softplus(-(0.5 - 2.0)) + softplus(-(0.5 + 1.0))) / 2
    assert loss_of(RankNetLoss(), [S], [Y]) == pytest.approx(expected, abs=1e-9)


def test_listnet_by_hand():
    lse = math.log(sum(math.exp(s) for s in S))
    assert loss_of(ListNetLoss(), [S], [Y]) == pytest.approx(lse - 0.5, abs=1e-9)
    # softmax target: P_y = softmax([1, 0, 0])
    z = math.e + 2
    py = [math.e / z, 1 / z, 1 / z]
    expected = -sum(p * (s - lse) for p, s in zip(py, S, strict=True))
    assert loss_of(ListNetLoss(target="softmax"), [S], [Y]) == pytest.approx(expected, abs=1e-9)


def test_listmle_by_hand_graded():
    # labels 2 > 1 > 0: the true permutation is (0, 1, 2)
    lse012 = math.log(sum(math.exp(s) for s in S))
    lse12 = math.log(math.exp(S[1]) + math.exp(S[2]))
    expected = (lse012 - S[0]) + (lse12 - S[1]) + 0.0
    assert loss_of(ListMLELoss(), [S], [[2.0, 1.0, 0.0]]) == pytest.approx(expected, abs=1e-9)


def test_approx_ndcg_by_hand():
    # approx rank of the positive: 1 + sig(2 - 0.5) + sig(-1 - 0.5) = 2 exactly; maxDCG = 1
    assert loss_of(ApproxNDCGLoss(), [S], [Y]) == pytest.approx(-1 / math.log2(3), abs=1e-9)


def test_lambdaloss_by_hand():
    # predicted ranks: item1 -> 1, item0 -> 2, item2 -> 3; both pairs (0,1), (0,2) are 1 rank apart
    w = 1.0 - 1.0 / math.log2(3)  # |1/D(1) - 1/D(2)| * |G0 - G1| with maxDCG = 1
    expected = -w * (math.log2(sig(0.5 - 2.0)) + math.log2(sig(0.5 + 1.0)))
    assert loss_of(LambdaLoss(), [S], [Y]) == pytest.approx(expected, abs=1e-9)


def test_neural_ndcg_two_items_by_hand():
    # n = 2: the NeuralSort matrix is [[sig(a-b), sig(b-a)], [sig(b-a), sig(a-b)]] (already doubly stochastic)
    a, b = 0.3, 1.1
    expected = -(sig(a - b) + sig(b - a) / math.log2(3))
    assert loss_of(NeuralNDCGLoss(), [[a, b]], [[1.0, 0.0]]) == pytest.approx(expected, abs=1e-6)


def test_neural_ndcg_hard_limit_is_minus_ndcg():
    # as the temperature -> 0 the relaxation becomes the true sort: positive at rank 2
    assert loss_of(NeuralNDCGLoss(temperature=0.01), [S], [Y]) == pytest.approx(-1 / math.log2(3), abs=1e-4)


ALL = ["bce", "ranknet", "lambdaloss", "listnet", "listmle", "approx_ndcg", "neural_ndcg"]


@pytest.mark.parametrize("name", ALL)
def test_padding_is_ignored(name):
    loss = make_loss(name)
    y = [[2.0, 1.0, 0.0]] if name == "listmle" else [Y]
    plain = loss_of(loss, [S], y)
    padded = loss_of(loss, [[S[0], 7.0, S[1], S[2], -3.0]], [[y[0][0], 1.0, y[0][1], y[0][2], 1.0]],
                     [[True, False, True, True, False]])
    assert padded == pytest.approx(plain, abs=1e-6)


@pytest.mark.parametrize("name", ["lambdaloss", "listnet", "listmle", "approx_ndcg", "neural_ndcg"])
def test_listwise_batch_is_mean_of_lists(name):
    loss = make_loss(name)
    s2 = [0.1, -0.4, 0.9]
    y2 = [0.0, 0.0, 1.0] if name != "listmle" else [0.0, 1.0, 2.0]
    y1 = Y if name != "listmle" else [2.0, 1.0, 0.0]
    both = loss_of(loss, [S, s2], [y1, y2])
    assert both == pytest.approx((loss_of(loss, [S], [y1]) + loss_of(loss, [s2], [y2])) / 2, abs=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_gradients_push_the_positive_up(name):
    scores = t([S]).requires_grad_(True)
    y = t([[2.0, 1.0, 0.0]]) if name == "listmle" else t([Y])
    make_loss(name)(scores, y).backward()
    assert scores.grad is not None and torch.isfinite(scores.grad).all()
    assert scores.grad[0, 0] < 0  # gradient descent raises the positive's score


@pytest.mark.parametrize("name", ALL)
def test_list_without_positive_gives_finite_loss(name):
    scores = t([S]).requires_grad_(True)
    out = make_loss(name)(scores, t([[0.0, 0.0, 0.0]]))
    assert torch.isfinite(out)
    out.backward()


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="shape"):
        ListNetLoss()(t([S]), t([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="mask"):
        RankNetLoss()(t([S]), t([Y]), torch.ones(1, 3))
    with pytest.raises(ValueError, match="unknown loss"):
        make_loss("hinge")
