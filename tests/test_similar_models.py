"""STMT, its ablations and the baselines: shapes, masking, what each sublayer sees."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from medrank.pipelines.similar.matchers import NEURAL_ARCHS, build_network
from medrank.pipelines.similar.models import STMT, LogisticRegression, PairHead, TfidfFeaturizer, masked_max
from medrank.pipelines.similar.models.linear import csr_to_torch, dense_pair_features, tfidf_pair_features

SMALL = {"dim": 16, "layers": 2, "heads": 4, "ff_dim": 32, "hidden": 8, "dropout": 0.0}


def ids(*rows, length=None):
    length = length or max(len(r) for r in rows)
    out = torch.zeros(len(rows), length, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


@pytest.mark.parametrize("arch", NEURAL_ARCHS)
def test_every_architecture_gives_two_logits_and_ignores_padding(arch):
    torch.manual_seed(0)
    net = build_network(arch, 30, **SMALL).eval()
    a, b = ids([2, 3, 4], [5, 6]), ids([7, 8], [9, 10, 11, 12])
    out = net(a, b)
    assert out.shape == (2, 2) and torch.isfinite(out).all()
    # extra padding columns change nothing
    assert torch.allclose(net(ids([2, 3, 4], [5, 6], length=7), ids([7, 8], [9, 10, 11, 12], length=9)), out, atol=1e-5)
    # a batch row does not depend on the other rows
    assert torch.allclose(net(a[:1], b[:1]), out[:1], atol=1e-5)
    assert net.encode(a).shape == (2, net.output_dim)


def test_stmt_ablations_have_the_right_sublayers():
    full, self_only, inter_only = (build_network(a, 30, **SMALL) for a in ("stmt", "stmt-self", "stmt-inter"))
    layer = full.encoder.layers[0]
    assert layer.self_attn is not None and layer.inter_attn is not None
    assert self_only.encoder.layers[0].inter_attn is None and self_only.encoder.layers[0].self_attn is not None
    assert inter_only.encoder.layers[0].self_attn is None and inter_only.encoder.layers[0].inter_attn is not None
    assert len(full.encoder.layers) == 2
    assert isinstance(layer.conv1, torch.nn.Conv1d) and layer.conv1.kernel_size == (1,)
    with pytest.raises(ValueError, match="self-attention, inter-attention or both"):
        STMT(30, self_attention=False, inter_attention=False)


def test_inter_attention_lets_the_partner_change_a_question_vector():
    torch.manual_seed(0)
    q = ids([2, 3, 4])
    for arch, depends in (("stmt", True), ("stmt-inter", True), ("stmt-self", False), ("transformer", False), ("bilstm", False)):
        net = build_network(arch, 30, **SMALL).eval()
        v_a, _ = _pair_vectors(net, q, ids([5, 6]))
        v_b, _ = _pair_vectors(net, q, ids([7, 8, 9, 10]))
        assert (not torch.allclose(v_a, v_b, atol=1e-6)) == depends, arch


@pytest.mark.parametrize("norm_first", [False, True])
def test_stmt_packed_fast_path_equals_the_textbook_modules(norm_first):
    """The packed/SDPA forward must give what the nn.MultiheadAttention / Conv1d modules give on
    the padded pair (post-norm LN(x + f(x)) as in the paper, or pre-norm)."""
    torch.manual_seed(0)
    net = STMT(30, norm_first=norm_first, **SMALL).eval()
    a, b = ids([2, 3, 4, 5], [6, 7]), ids([8, 9], [10, 11, 12, 13, 14])
    enc = net.encoder

    def embed(x):
        return enc.positions(enc.embed(x))

    def sub(norm, x, f):
        return x + f(norm(x)) if norm_first else norm(x + f(x))

    x, y, px, py = embed(a), embed(b), a == 0, b == 0
    for layer in enc.layers:
        def self_f(h, pad, layer=layer):
            return layer.self_attn(h, h, h, key_padding_mask=pad, need_weights=False)[0]

        x, y = sub(layer.norm_self, x, lambda h: self_f(h, px)), sub(layer.norm_self, y, lambda h: self_f(h, py))

        def inter_f(h, other, pad, layer=layer):
            kv = layer.norm_inter(other) if norm_first else other
            return layer.inter_attn(h, kv, kv, key_padding_mask=pad, need_weights=False)[0]

        x_in, y_in = x, y
        x = sub(layer.norm_inter, x_in, lambda h, o=y_in: inter_f(h, o, py))
        y = sub(layer.norm_inter, y_in, lambda h, o=x_in: inter_f(h, o, px))

        def ff(h, layer=layer):
            return layer.conv2(torch.relu(layer.conv1(h.transpose(1, 2)))).transpose(1, 2)

        x, y = sub(layer.norm_ff, x, ff), sub(layer.norm_ff, y, ff)
    if enc.final_norm is not None:
        x, y = enc.final_norm(x), enc.final_norm(y)
    v1, v2 = masked_max(x, ~px), masked_max(y, ~py)
    with torch.no_grad():
        fast1, fast2 = enc(a, b)
    assert torch.allclose(fast1, v1, atol=1e-5) and torch.allclose(fast2, v2, atol=1e-5)


def _pair_vectors(net, a, b):
    if isinstance(net, STMT):
        return net.encoder(a, b)
    from medrank.pipelines.similar.models.layers import pad_to

    n = max(a.shape[1], b.shape[1])
    v = net.encoder(torch.cat([pad_to(a, n), pad_to(b, n)]))
    return v[: len(a)], v[len(a):]


def test_stmt_paper_sizes_and_word2vec_initialisation():
    matrix = np.random.default_rng(0).normal(size=(50, 100)).astype(np.float32)
    net = build_network("stmt", 50, matrix)
    assert len(net.encoder.layers) == 6
    assert net.encoder.layers[0].self_attn.num_heads == 10
    assert net.encoder.layers[0].conv1.out_channels == 200
    w = net.encoder.embed.weight.detach()
    factor = 10.0 / np.linalg.norm(matrix[1:], axis=1).mean()  # rescaled to a mean row norm of sqrt(100)
    assert torch.allclose(w[1:], torch.from_numpy(matrix[1:]) * factor, atol=1e-5)
    assert w[0].abs().sum() == 0  # padding row
    lstm = build_network("bilstm", 50, matrix)
    assert torch.allclose(lstm.encoder.embed.weight[1:], torch.from_numpy(matrix[1:]))  # no positions, no rescaling
    with pytest.raises(ValueError, match="embedding matrix must be"):
        build_network("stmt", 49, matrix)
    with pytest.raises(ValueError, match="unknown architecture arguments"):
        build_network("stmt", 50, nope=1)


def test_masked_max_and_head():
    x = torch.tensor([[[1.0, -5.0], [9.0, 9.0]]])
    assert masked_max(x, torch.tensor([[True, False]])).tolist() == [[1.0, -5.0]]
    head = PairHead(2, 4, 0.0, "concat-diff-prod")
    assert head(torch.zeros(3, 2), torch.ones(3, 2)).shape == (3, 2)
    with pytest.raises(ValueError, match="features"):
        PairHead(2, features="nope")


def test_tfidf_features_hand_computed():
    tf = TfidfFeaturizer.fit([["a", "b"], ["a"]], ngram=(1,))
    # smoothed idf: a in 2 of 2 docs -> ln(3/3)+1 = 1; b in 1 of 2 -> ln(3/2)+1
    assert tf.terms == ["a", "b"]
    assert tf.idf.tolist() == pytest.approx([1.0, np.log(1.5) + 1])
    x = tf.transform([["a", "b"], ["a", "a"], ["zzz"]]).toarray()
    wb = np.log(1.5) + 1
    assert x[0] == pytest.approx(np.array([1, wb]) / np.hypot(1, wb))
    assert x[1] == pytest.approx([1.0, 0.0])  # sublinear tf, then L2 normalised
    assert x[2].tolist() == [0.0, 0.0]
    f = tfidf_pair_features(sp.csr_matrix(x[:1]), sp.csr_matrix(x[1:2])).toarray()[0]
    assert f[-1] == pytest.approx(1 / np.hypot(1, wb))  # cosine
    assert f[:2] == pytest.approx(x[0] * x[1]) and f[2:4] == pytest.approx(np.abs(x[0] - x[1]))


def test_logistic_regression_sparse_equals_dense():
    lr = LogisticRegression(3)
    with torch.no_grad():
        lr.weight.copy_(torch.tensor([[1.0], [-2.0], [0.5]]))
        lr.bias.fill_(0.1)
    x = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    dense = lr(torch.from_numpy(x))
    sparse = lr(csr_to_torch(sp.csr_matrix(x)))
    assert dense[:, 0].tolist() == [0.0, 0.0]
    assert dense[:, 1].tolist() == pytest.approx([2.1, -1.9])
    assert torch.allclose(dense, sparse)
    f = dense_pair_features(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]))
    assert f[0].tolist() == pytest.approx([0.0, 1.0, 1.0, 0.0, 1 / np.sqrt(2)])
