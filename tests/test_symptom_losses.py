"""Hand-computed tiny cases for every symptom-detection loss."""

from __future__ import annotations

import math

import pytest
import torch

from medrank.pipelines.symptom.losses import (
    BiHardNCELoss,
    BiNCELoss,
    ContrastiveLoss,
    CrossEncoderBCELoss,
    NCEBackwardLoss,
    NCEForwardLoss,
    SoftmaxClassifierLoss,
    TripletLoss,
)


def unit(*rows):
    t = torch.tensor(rows, dtype=torch.float32)
    return t / t.norm(dim=-1, keepdim=True)


# two pairs in 2-d: q0 = e1, q1 = e2; t0 = e1, t1 = (cos 60°, sin 60°)
Q = unit([1.0, 0.0], [0.0, 1.0])
T = unit([1.0, 0.0], [0.5, math.sqrt(3) / 2])
TAU = 0.5


def lse(*xs):
    return math.log(sum(math.exp(x) for x in xs))


def test_nce_forward_in_batch_by_hand():
    # s(q0,t0)=1, s(q0,t1)=0.5, s(q1,t0)=0, s(q1,t1)=sqrt(3)/2
    s11 = math.sqrt(3) / 2
    expected = 0.5 * ((lse(1 / TAU, 0.5 / TAU) - 1 / TAU) + (lse(0.0, s11 / TAU) - s11 / TAU))
    got = NCEForwardLoss(TAU)(Q, T)
    assert got.item() == pytest.approx(expected, rel=1e-5)


def test_nce_forward_with_hard_terms_and_padding_by_hand():
    hard = unit([0.0, -1.0], [1.0, 1.0]).reshape(2, 1, 2)  # one hard term per pair
    s11 = math.sqrt(3) / 2
    h0 = 0.0  # q0 . (0,-1)
    h1 = 1 / math.sqrt(2)  # q1 . (1,1)/sqrt2
    expected = 0.5 * ((lse(1 / TAU, 0.5 / TAU, h0 / TAU) - 1 / TAU) + (lse(0.0, s11 / TAU, h1 / TAU) - s11 / TAU))
    assert NCEForwardLoss(TAU)(Q, T, hard).item() == pytest.approx(expected, rel=1e-5)
    # a padded (invalid) slot contributes nothing: equal to the in-batch loss for pair 0
    valid = torch.tensor([[False], [True]])
    expected_pad = 0.5 * ((lse(1 / TAU, 0.5 / TAU) - 1 / TAU) + (lse(0.0, s11 / TAU, h1 / TAU) - s11 / TAU))
    got = NCEForwardLoss(TAU)(Q, T, hard, hard_terms_valid=valid)
    assert got.item() == pytest.approx(expected_pad, rel=1e-4)


def test_nce_forward_false_negative_mask_drops_the_column():
    fn = torch.tensor([[False, True], [False, False]])  # t1 is also gold for q0
    s11 = math.sqrt(3) / 2
    expected = 0.5 * (0.0 + (lse(0.0, s11 / TAU) - s11 / TAU))  # row 0: only its positive remains
    assert NCEForwardLoss(TAU)(Q, T, false_negatives=fn).item() == pytest.approx(expected, abs=1e-5)
    # the diagonal is never masked
    diag = torch.eye(2, dtype=torch.bool)
    assert NCEForwardLoss(TAU)(Q, T, false_negatives=diag).item() == pytest.approx(NCEForwardLoss(TAU)(Q, T).item())


def test_nce_backward_is_forward_with_roles_swapped():
    s11 = math.sqrt(3) / 2
    # term t0 against queries: s(t0,q0)=1, s(t0,q1)=0 ; t1: s(t1,q0)=0.5, s(t1,q1)=s11
    expected = 0.5 * ((lse(1 / TAU, 0.0) - 1 / TAU) + (lse(0.5 / TAU, s11 / TAU) - s11 / TAU))
    assert NCEBackwardLoss(TAU)(Q, T).item() == pytest.approx(expected, rel=1e-5)
    assert NCEBackwardLoss(TAU)(Q, T).item() == pytest.approx(NCEForwardLoss(TAU)(T, Q).item(), rel=1e-6)


def test_bi_nce_is_sum_and_bi_hardnce_adds_both_directions():
    fwd, bwd = NCEForwardLoss(TAU)(Q, T), NCEBackwardLoss(TAU)(Q, T)
    assert BiNCELoss(TAU)(Q, T).item() == pytest.approx((fwd + bwd).item(), rel=1e-6)
    assert BiNCELoss(TAU, backward_weight=0.5)(Q, T).item() == pytest.approx((fwd + 0.5 * bwd).item(), rel=1e-6)
    hard_t = unit([0.0, -1.0], [1.0, 1.0]).reshape(2, 1, 2)
    hard_q = unit([-1.0, 0.0], [1.0, -1.0]).reshape(2, 1, 2)
    expected = NCEForwardLoss(TAU)(Q, T, hard_t) + NCEBackwardLoss(TAU)(Q, T, hard_q)
    assert BiHardNCELoss(TAU)(Q, T, hard_t, hard_q).item() == pytest.approx(expected.item(), rel=1e-6)
    # harder negatives -> larger loss
    easy_q = unit([-1.0, 0.0], [0.0, -1.0]).reshape(2, 1, 2)
    assert BiHardNCELoss(TAU)(Q, T, hard_t, easy_q) < BiHardNCELoss(TAU)(Q, T, hard_t, unit([0.9, 0.1], [0.1, 0.9]).reshape(2, 1, 2))


def test_bi_hardnce_requires_hard_negatives_and_checks_shapes():
    with pytest.raises(ValueError, match="needs hard-negative"):
        BiHardNCELoss()(Q, T)
    with pytest.raises(ValueError, match="hard_terms must be"):
        NCEForwardLoss()(Q, T, torch.zeros(3, 1, 2))
    with pytest.raises(ValueError, match="differ"):
        NCEForwardLoss()(Q, T[:1])
    with pytest.raises(ValueError, match="temperature"):
        NCEForwardLoss(0.0)


def test_losses_backpropagate():
    q = torch.randn(4, 8, requires_grad=True)
    t = torch.randn(4, 8, requires_grad=True)
    qn, tn = torch.nn.functional.normalize(q, dim=-1), torch.nn.functional.normalize(t, dim=-1)
    hard = torch.nn.functional.normalize(torch.randn(4, 3, 8), dim=-1)
    BiHardNCELoss(0.05)(qn, tn, hard, hard).backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_triplet_by_hand():
    neg = unit([0.0, 1.0], [1.0, 0.0]).reshape(2, 1, 2)
    # cosine distances: pair0 d+=0, d-=1 -> max(0, 0-1+0.2)=0 ; pair1 d+=1-s11, d-=1 -> max(0, -s11+0.2)=0
    assert TripletLoss(0.2)(Q, T, neg).item() == pytest.approx(0.0)
    # a margin of 1.5: pair0 0-1+1.5=0.5 ; pair1 (1-s11)-1+1.5 = 1.5-s11
    s11 = math.sqrt(3) / 2
    assert TripletLoss(1.5)(Q, T, neg).item() == pytest.approx((0.5 + 1.5 - s11) / 2, rel=1e-5)
    # euclidean on unit vectors: |e1 - e2| = sqrt2
    got = TripletLoss(2.0, distance="euclidean")(Q[:1], T[:1], unit([0.0, 1.0]).reshape(1, 1, 2))
    assert got.item() == pytest.approx(2.0 - math.sqrt(2), rel=1e-5)
    valid = torch.tensor([[True], [False]])
    assert TripletLoss(1.5)(Q, T, neg, valid).item() == pytest.approx(0.5, rel=1e-5)


def test_contrastive_by_hand():
    labels = torch.tensor([1, 0])
    # pair0 positive, d=0 -> 0 ; pair1 negative with d = 1 - s11 ≈ 0.134 < margin 0.5 -> 0.5*(0.5-d)^2
    d = 1 - math.sqrt(3) / 2
    expected = (0.0 + 0.5 * (0.5 - d) ** 2) / 2
    assert ContrastiveLoss(0.5)(Q, T, labels).item() == pytest.approx(expected, rel=1e-5)
    # a positive pair at distance d costs 0.5 d^2
    assert ContrastiveLoss(0.5)(Q[1:], T[1:], torch.tensor([1])).item() == pytest.approx(0.5 * d**2, rel=1e-5)


def test_sentbert_softmax_by_hand():
    loss = SoftmaxClassifierLoss(2)
    with torch.no_grad():
        loss.classifier.weight.zero_()
        loss.classifier.bias.copy_(torch.tensor([0.0, math.log(3.0)]))  # p(match) = 3/4 for every pair
    labels = torch.tensor([1, 0])
    expected = -(math.log(0.75) + math.log(0.25)) / 2
    assert loss(Q, T, labels).item() == pytest.approx(expected, rel=1e-5)
    feats = torch.cat([Q, T, (Q - T).abs()], dim=-1)
    assert feats.shape == (2, 6) and loss.logits(Q, T).shape == (2, 2)
    with pytest.raises(ValueError, match="labels"):
        loss(Q, T, torch.tensor([1]))


def test_cross_encoder_bce_by_hand():
    logits = torch.tensor([0.0, 2.0])
    labels = torch.tensor([1, 0])
    expected = (math.log(2) + math.log(1 + math.exp(2.0))) / 2
    assert CrossEncoderBCELoss()(logits, labels).item() == pytest.approx(expected, rel=1e-5)
    assert CrossEncoderBCELoss()(logits[:, None], labels).item() == pytest.approx(expected, rel=1e-5)
    weighted = (2 * math.log(2) + math.log(1 + math.exp(2.0))) / 2
    assert CrossEncoderBCELoss(pos_weight=2.0)(logits, labels).item() == pytest.approx(weighted, rel=1e-5)
