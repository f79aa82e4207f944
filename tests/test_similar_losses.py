"""Hand-computed tiny cases for every loss of the similar-question pipeline."""

from __future__ import annotations

import math

import pytest
import torch

from medrank.pipelines.similar.losses import AMSoftmaxLoss, PairCrossEntropyLoss, SoftmaxClassificationLoss


def am(weight, margin=0.35, scale=20.0):
    loss = AMSoftmaxLoss(2, 2, margin, scale)
    with torch.no_grad():
        loss.weight.copy_(torch.tensor(weight, dtype=torch.float32))
    return loss


def test_am_softmax_hand_computed():
    loss = am([[1.0, 0.0], [0.0, 1.0]])
    x = torch.tensor([[3.0, 0.0]])  # cos = (1, 0) after normalisation; the norm of x does not matter
    # target 0: logits s*(1 - m) = 13 and s*0 = 0  ->  log(1 + e^-13)
    assert loss(x, torch.tensor([0])).item() == pytest.approx(math.log1p(math.exp(-13.0)), abs=1e-7)
    # target 1: logits 20 and s*(0 - m) = -7  ->  log(1 + e^27)
    assert loss(x, torch.tensor([1])).item() == pytest.approx(math.log1p(math.exp(27.0)), rel=1e-5)
    # a batch is the mean of its rows
    both = loss(torch.tensor([[3.0, 0.0], [3.0, 0.0]]), torch.tensor([0, 1])).item()
    assert both == pytest.approx((math.log1p(math.exp(-13.0)) + math.log1p(math.exp(27.0))) / 2, rel=1e-5)


def test_am_softmax_at_45_degrees_and_zero_margin_is_softmax():
    loss = am([[1.0, 0.0], [0.0, 1.0]], margin=0.0, scale=1.0)
    x = torch.tensor([[1.0, 1.0]])
    c = 1 / math.sqrt(2)  # both cosines
    assert loss(x, torch.tensor([0])).item() == pytest.approx(-math.log(math.exp(c) / (2 * math.exp(c))), rel=1e-6)
    assert loss.logits(x).tolist()[0] == pytest.approx([c, c])


def test_am_softmax_margin_increases_the_loss_and_gradients_flow():
    w = [[1.0, 0.2], [0.1, 1.0]]
    x = torch.tensor([[0.7, 0.3], [0.2, 0.9]], requires_grad=True)
    y = torch.tensor([0, 1])
    assert am(w, 0.35)(x, y).item() > am(w, 0.0)(x, y).item()
    loss = am(w)
    loss(x, y).backward()
    assert x.grad is not None and loss.weight.grad is not None


def test_am_softmax_validates():
    with pytest.raises(ValueError, match="at least 2 classes"):
        AMSoftmaxLoss(4, 1)
    with pytest.raises(ValueError, match="margin"):
        AMSoftmaxLoss(4, 3, margin=1.5)
    with pytest.raises(ValueError, match="embeddings must be"):
        AMSoftmaxLoss(4, 3)(torch.zeros(2, 5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="labels must be"):
        AMSoftmaxLoss(4, 3)(torch.zeros(2, 4), torch.tensor([0]))


def test_softmax_classification_hand_computed():
    loss = SoftmaxClassificationLoss(2, 3)
    with torch.no_grad():
        loss.classifier.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
        loss.classifier.bias.zero_()
    x = torch.tensor([[2.0, 1.0]])  # logits (2, 1, 0)
    expected = -math.log(math.exp(2) / (math.exp(2) + math.exp(1) + 1))
    assert loss(x, torch.tensor([0])).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="at least 2 classes"):
        SoftmaxClassificationLoss(2, 1)


def test_pair_cross_entropy_is_binary_cross_entropy():
    loss = PairCrossEntropyLoss()
    logits = torch.tensor([[0.0, 2.0], [1.0, -1.0]])  # p(same) = sigmoid(2), sigmoid(-2)
    y = torch.tensor([1, 1])
    p1, p2 = 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(2))
    assert loss(logits, y).item() == pytest.approx(-(math.log(p1) + math.log(p2)) / 2, rel=1e-6)
    # label 0 uses log(1 - p)
    assert loss(logits[:1], torch.tensor([0])).item() == pytest.approx(-math.log(1 - p1), rel=1e-6)
    # logits [0, z] give sigmoid(z): the logistic regression case
    z = torch.tensor([[0.0, 0.5]])
    assert loss(z, torch.tensor([1.0])).item() == pytest.approx(math.log1p(math.exp(-0.5)), rel=1e-6)


def test_pair_cross_entropy_pos_weight_and_validation():
    logits = torch.tensor([[0.0, 2.0], [0.0, 2.0]])
    y = torch.tensor([1, 0])
    a, b = math.log1p(math.exp(-2)), math.log1p(math.exp(2))
    assert PairCrossEntropyLoss(pos_weight=3.0)(logits, y).item() == pytest.approx((3 * a + b) / 4, rel=1e-6)
    with pytest.raises(ValueError, match="logits must be"):
        PairCrossEntropyLoss()(torch.zeros(2, 3), y)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        PairCrossEntropyLoss()(logits, torch.tensor([2, 0]))
    with pytest.raises(ValueError, match="pos_weight"):
        PairCrossEntropyLoss(pos_weight=0)
