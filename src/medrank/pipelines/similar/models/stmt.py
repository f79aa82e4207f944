"""The Siamese Text Matching Transformer (STMT) and its two ablations.

K. Wang, B. Yang, G. Xu, X. He, "Medical Question Retrieval Based on Siamese
Neural Network and Transfer Learning Method", DASFAA 2019.

Both questions go through the same ``N`` layers (shared weights). Each layer has

1. a **self-attention** sublayer — a question attends to itself;
2. an **inter-attention** sublayer — its positions (queries) attend to the
   *other* question's positions (keys/values), in both directions;
3. a **feed-forward** sublayer of two kernel-1 convolutions (``d_e → d_f → d_e``,
   ReLU between),

each wrapped in dropout, a residual connection and layer normalisation. Global
max pooling over the valid positions gives ``v_q`` and ``v_c``; an MLP with a
ReLU hidden layer on ``[v_q, v_c]`` gives the two logits. Paper sizes:
``N = 6``, ``h = 10`` heads, ``d_e = 100``, ``d_f = 200``.

Ablations: ``inter_attention=False`` (self-attention only) and
``self_attention=False`` (inter-attention only).

Options beyond the paper (defaults = the paper): ``norm_first=True`` puts the
layer norm before each sublayer (pre-norm, plus a final norm before pooling),
which trains a 6-layer stack from scratch more reliably on small data;
``head_features="concat-diff-prod"`` gives the MLP ``|v_q - v_c|`` and
``v_q * v_c`` besides ``[v_q, v_c]``. Both are used by the CPU recipe (see
``configs/similar/README.md``): with the paper's ``[v_q, v_c]`` head the
model learned far more slowly in a short diagnostic run.

Implementation note: token states travel *packed* (``(T, d)``, real tokens
only); they are scattered into a padded batch just for the attention core, which
calls ``scaled_dot_product_attention`` directly with the ``nn.MultiheadAttention``
parameters, and each side keeps its own length (a 10-token query is not padded
to its 45-token candidate). The kernel-1 convolutions run as ``F.linear``. Same
parameters and outputs as the textbook stacked ``(2B, L, d)`` batch through the
modules (``tests/test_similar_models.py``); the `similar` p50 on 1 thread fell
from 78 to 46 ms with it (``bench/similar_latency.py``). For pre-training on single questions
(:meth:`STMT.encode`) a question is its own partner, so the inter-attention
weights are trained too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from medrank.pipelines.similar.models.layers import (
    PairHead,
    SinusoidalPositions,
    embedding_from_matrix,
    masked_max,
)


def _unpack(packed: torch.Tensor, valid: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Scatter packed token states ``(T, k)`` back into a padded ``(B, L, k)`` tensor."""
    out = packed.new_full((*valid.shape, packed.shape[-1]), fill)
    out[valid] = packed
    return out


def _attend(attn: nn.MultiheadAttention, x: torch.Tensor, x_valid: torch.Tensor, kv: torch.Tensor,
            kv_valid: torch.Tensor) -> torch.Tensor:
    """Multi-head attention of packed states ``x`` ``(T1, d)`` over packed ``kv`` ``(T2, d)``.

    ``x_valid`` ``(B, L1)`` / ``kv_valid`` ``(B, L2)`` say where the packed tokens sit (True =
    token). Same parameters and result as ``attn(x, kv, kv, key_padding_mask=~kv_valid)`` on the
    padded tensors, but the projections run on real tokens only and the attention core calls
    ``scaled_dot_product_attention`` directly (with 10-dim heads the module's own CPU path was the
    slower of the two in a 1-thread profile).
    """
    d, h = attn.embed_dim, attn.num_heads
    w, b = attn.in_proj_weight, attn.in_proj_bias
    if kv is x:
        q, k, v = _unpack(F.linear(x, w, b), x_valid).chunk(3, dim=-1)
    else:
        q = _unpack(F.linear(x, w[:d], b[:d]), x_valid)
        k, v = _unpack(F.linear(kv, w[d:], b[d:]), kv_valid).chunk(2, dim=-1)
    bsz, lq, lk = x_valid.shape[0], x_valid.shape[1], kv_valid.shape[1]
    q = q.reshape(bsz, lq, h, d // h).transpose(1, 2)
    k = k.reshape(bsz, lk, h, d // h).transpose(1, 2)
    v = v.reshape(bsz, lk, h, d // h).transpose(1, 2)
    keep = kv_valid.clone()
    keep[:, 0] |= ~keep.any(dim=1)  # an all-padding partner would give NaN; let it attend its first slot
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :],
                                         dropout_p=attn.dropout if attn.training else 0.0)
    return attn.out_proj(out.transpose(1, 2).reshape(bsz, lq, d)[x_valid])


class STMTLayer(nn.Module):
    """Self-attention → inter-attention → kernel-1 conv feed-forward, each with residual + layer norm."""

    def __init__(
        self, dim: int = 100, heads: int = 10, ff_dim: int = 200, dropout: float = 0.1,
        self_attention: bool = True, inter_attention: bool = True, norm_first: bool = False,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        if not (self_attention or inter_attention):
            raise ValueError("an STMT layer needs self-attention, inter-attention or both")
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.self_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True) if self_attention else None
        self.norm_self = nn.LayerNorm(dim) if self_attention else None
        self.inter_attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True) if inter_attention else None
        self.norm_inter = nn.LayerNorm(dim) if inter_attention else None
        self.conv1 = nn.Conv1d(dim, ff_dim, kernel_size=1)
        self.conv2 = nn.Conv1d(ff_dim, dim, kernel_size=1)
        self.norm_ff = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, valid: torch.Tensor, other: torch.Tensor | None = None,
                other_valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One layer on packed question states ``x`` ``(T1, d)`` (the real tokens of a ``(B, L1)``
        batch; ``valid`` True = token) and, when paired, their partners ``other`` ``(T2, d)``.
        Padding never enters a projection or the feed-forward, and each side keeps its own length.
        Without ``other`` each question is its own inter-attention partner (single-question
        pre-training)."""
        x = self.self_block(x, valid)
        if other is None:
            return self.ff_block(self.inter_block(x, valid, x, valid)), None
        assert other_valid is not None
        other = self.self_block(other, other_valid)
        x, other = self.inter_block(x, valid, other, other_valid), self.inter_block(other, other_valid, x, valid)
        return self.ff_block(x), self.ff_block(other)

    def _residual(self, x: torch.Tensor, norm: nn.LayerNorm, fn: Any) -> torch.Tensor:
        # post-norm LN(x + f(x)) as in the paper, or pre-norm x + f(LN(x)) (more stable when deep)
        if self.norm_first:
            return x + self.dropout(fn(norm(x)))
        return norm(x + self.dropout(fn(x)))

    def self_block(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        if self.self_attn is None:
            return x
        attn = self.self_attn
        return self._residual(x, self.norm_self, lambda h: _attend(attn, h, valid, h, valid))

    def inter_block(self, x: torch.Tensor, valid: torch.Tensor, other: torch.Tensor, other_valid: torch.Tensor) -> torch.Tensor:
        if self.inter_attn is None:
            return x
        attn = self.inter_attn
        if self.norm_first:
            # the partner's states are normalised too, as the keys/values of a pre-norm sublayer
            h = self.norm_inter(x)
            kv = h if other is x else self.norm_inter(other)
            return x + self.dropout(_attend(attn, h, valid, kv, other_valid))
        return self.norm_inter(x + self.dropout(_attend(attn, x, valid, other, other_valid)))

    def ff_block(self, x: torch.Tensor) -> torch.Tensor:
        # kernel-1 convolutions are position-wise linear maps: F.linear on the packed tokens
        def ff(h: torch.Tensor) -> torch.Tensor:
            h = torch.relu(F.linear(h, self.conv1.weight.squeeze(-1), self.conv1.bias))
            return F.linear(self.dropout(h), self.conv2.weight.squeeze(-1), self.conv2.bias)

        return self._residual(x, self.norm_ff, ff)


class STMTEncoder(nn.Module):
    """Embeddings + positions + ``N`` STMT layers + global max pooling."""

    def __init__(
        self, vocab_size: int, dim: int = 100, layers: int = 6, heads: int = 10, ff_dim: int = 200,
        dropout: float = 0.1, self_attention: bool = True, inter_attention: bool = True,
        embeddings: np.ndarray | None = None, freeze_embeddings: bool = False, max_len: int = 512,
        norm_first: bool = False, positions: bool = True,
    ) -> None:
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        self.dim = dim
        self.embed = embedding_from_matrix(embeddings, vocab_size, dim, freeze_embeddings, dim**0.5 if positions else None)
        self.positions = SinusoidalPositions(dim, max_len) if positions else None
        self.embed_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            STMTLayer(dim, heads, ff_dim, dropout, self_attention, inter_attention, norm_first) for _ in range(layers)
        )
        self.final_norm = nn.LayerNorm(dim) if norm_first else None

    def _embed(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return self.embed_dropout(self.positions(x) if self.positions is not None else x)[valid]

    def _pool(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        if self.final_norm is not None:
            x = self.final_norm(x)
        return masked_max(_unpack(x, valid), valid)

    def forward(self, ids1: torch.Tensor, ids2: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Question vectors ``(v1, v2)``, each ``(B, d)``. Without ``ids2`` a question is its own partner."""
        valid1 = ids1 != 0
        x = self._embed(ids1, valid1)
        if ids2 is None:
            for layer in self.layers:
                x, _ = layer(x, valid1)
            v = self._pool(x, valid1)
            return v, v
        if ids1.shape[0] != ids2.shape[0]:
            raise ValueError(f"batch sizes differ: {ids1.shape[0]} vs {ids2.shape[0]}")
        valid2 = ids2 != 0
        y = self._embed(ids2, valid2)
        for layer in self.layers:
            x, y = layer(x, valid1, y, valid2)
        return self._pool(x, valid1), self._pool(y, valid2)


class STMT(nn.Module):
    """The full matcher: :class:`STMTEncoder` + :class:`PairHead` → logits ``(B, 2)``."""

    def __init__(self, vocab_size: int, dim: int = 100, layers: int = 6, heads: int = 10, ff_dim: int = 200,
                 hidden: int = 100, dropout: float = 0.1, self_attention: bool = True, inter_attention: bool = True,
                 head_features: str = "concat", embeddings: np.ndarray | None = None,
                 freeze_embeddings: bool = False, max_len: int = 512, norm_first: bool = False,
                 positions: bool = True) -> None:
        super().__init__()
        self.encoder = STMTEncoder(vocab_size, dim, layers, heads, ff_dim, dropout, self_attention, inter_attention,
                                   embeddings, freeze_embeddings, max_len, norm_first, positions)
        self.head = PairHead(dim, hidden, dropout, head_features)
        self.output_dim = dim

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """One vector per question (a question is its own inter-attention partner), ``(B, d)``."""
        return self.encoder(ids)[0]

    def forward(self, ids1: torch.Tensor, ids2: torch.Tensor) -> torch.Tensor:
        v1, v2 = self.encoder(ids1, ids2)
        return self.head(v1, v2)
