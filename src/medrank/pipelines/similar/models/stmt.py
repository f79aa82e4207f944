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

Implementation note: the two questions are padded to one length and stacked
into a ``(2B, L, d)`` batch, so each sublayer is one call for both sides
(inter-attention uses the stack ``[q; c]`` as queries and ``[c; q]`` as
keys/values). For pre-training on single questions (:meth:`STMT.encode`) a
question is its own partner, so the inter-attention weights are trained too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.pipelines.similar.models.layers import (
    PairHead,
    SinusoidalPositions,
    embedding_from_matrix,
    masked_max,
    pad_to,
)


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

    def forward(self, x: torch.Tensor, pad: torch.Tensor, paired: bool = True) -> torch.Tensor:
        """One layer on a stack ``x`` ``(2B, L, d)`` = ``[q; c]`` with padding mask ``pad`` ``(2B, L)``
        (True = padding). With ``paired=False``, ``x`` is ``(B, L, d)`` and each question is its own
        inter-attention partner (single-question pre-training)."""
        x = self.self_block(x, pad)
        if paired:
            b = x.shape[0] // 2
            x = self.inter_block(x, torch.cat([x[b:], x[:b]], dim=0), torch.cat([pad[b:], pad[:b]], dim=0))
        else:
            x = self.inter_block(x, x, pad)
        return self.ff_block(x)

    def _residual(self, x: torch.Tensor, norm: nn.LayerNorm, fn: Any) -> torch.Tensor:
        # post-norm LN(x + f(x)) as in the paper, or pre-norm x + f(LN(x)) (more stable when deep)
        if self.norm_first:
            return x + self.dropout(fn(norm(x)))
        return norm(x + self.dropout(fn(x)))

    def self_block(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        if self.self_attn is None:
            return x
        attn = self.self_attn
        return self._residual(x, self.norm_self, lambda h: attn(h, h, h, key_padding_mask=pad, need_weights=False)[0])

    def inter_block(self, x: torch.Tensor, other: torch.Tensor, other_pad: torch.Tensor) -> torch.Tensor:
        if self.inter_attn is None:
            return x
        attn = self.inter_attn
        if self.norm_first:
            # the partner's states are normalised too, as the keys/values of a pre-norm sublayer
            kv = self.norm_inter(other)
            return x + self.dropout(attn(self.norm_inter(x), kv, kv, key_padding_mask=other_pad, need_weights=False)[0])
        return self.norm_inter(x + self.dropout(attn(x, other, other, key_padding_mask=other_pad, need_weights=False)[0]))

    def ff_block(self, x: torch.Tensor) -> torch.Tensor:
        def ff(h: torch.Tensor) -> torch.Tensor:
            return self.conv2(self.dropout(torch.relu(self.conv1(h.transpose(1, 2))))).transpose(1, 2)

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

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return self.embed_dropout(self.positions(x) if self.positions is not None else x)

    def _pool(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        if self.final_norm is not None:
            x = self.final_norm(x)
        return masked_max(x, ~pad)

    def forward(self, ids1: torch.Tensor, ids2: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Question vectors ``(v1, v2)``, each ``(B, d)``. Without ``ids2`` a question is its own partner."""
        if ids2 is None:
            pad = ids1 == 0
            x = self._embed(ids1)
            for layer in self.layers:
                x = layer(x, pad, paired=False)
            v = self._pool(x, pad)
            return v, v
        if ids1.shape[0] != ids2.shape[0]:
            raise ValueError(f"batch sizes differ: {ids1.shape[0]} vs {ids2.shape[0]}")
        length = max(ids1.shape[1], ids2.shape[1])
        b = ids1.shape[0]
        ids = torch.cat([pad_to(ids1, length), pad_to(ids2, length)], dim=0)  # (2B, L)
        pad = ids == 0
        x = self._embed(ids)
        for layer in self.layers:
            x = layer(x, pad, paired=True)
        v = self._pool(x, pad)
        return v[:b], v[b:]


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
