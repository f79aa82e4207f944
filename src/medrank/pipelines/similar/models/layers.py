"""Building blocks shared by the token-level matchers: embeddings, positions, pooling, the pair head."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


def embedding_from_matrix(matrix: np.ndarray | torch.Tensor | None, vocab_size: int, dim: int, freeze: bool = False,
                          target_norm: float | None = None) -> nn.Embedding:
    """An ``nn.Embedding`` (padding index 0) initialised from word2vec vectors when given.

    ``target_norm`` rescales the whole matrix (one factor, directions and
    relative lengths kept) so the mean row norm equals it; the attention models
    use ``sqrt(dim)`` so that added sinusoidal positions (norm ``sqrt(dim / 2)``)
    do not drown the word vectors (CBOW vectors here have norm ~4.5 at d = 100).
    """
    emb = nn.Embedding(vocab_size, dim, padding_idx=0)
    if matrix is not None:
        weight = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
        if weight.shape != (vocab_size, dim):
            raise ValueError(f"embedding matrix must be ({vocab_size}, {dim}), got {tuple(weight.shape)}")
        if target_norm is not None and vocab_size > 1:
            weight = weight * (target_norm / weight[1:].norm(dim=1).mean().clamp_min(1e-8))
        with torch.no_grad():
            emb.weight.copy_(weight)
            emb.weight[0].zero_()
    emb.weight.requires_grad_(not freeze)
    return emb


class SinusoidalPositions(nn.Module):
    """Fixed sine/cosine position encodings (Vaswani et al., 2017), added to the embeddings."""

    def __init__(self, dim: int, max_len: int = 512) -> None:
        super().__init__()
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)[:, : dim // 2]
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError(f"sequence length {x.shape[1]} exceeds the position table ({self.pe.shape[0]})")
        return x + self.pe[: x.shape[1]]


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over the valid positions of ``x`` ``(B, L, d)`` given ``mask`` ``(B, L)`` (True = token)."""
    return x.masked_fill(~mask[..., None], torch.finfo(x.dtype).min).amax(dim=1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask[..., None].to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


class PairHead(nn.Module):
    """MLP with one ReLU hidden layer on the two question vectors → two logits (different, same).

    ``features="concat"`` is the STMT paper's ``[v_q, v_c]``; ``"concat-diff-prod"``
    adds ``|v_q - v_c|`` and ``v_q * v_c`` (Sentence-BERT / InferSent style).
    """

    FEATURES = ("concat", "concat-diff-prod")

    def __init__(self, dim: int, hidden: int = 100, dropout: float = 0.1, features: str = "concat") -> None:
        super().__init__()
        if features not in self.FEATURES:
            raise ValueError(f"features must be one of {self.FEATURES}, got {features!r}")
        self.features = features
        n_in = dim * (2 if features == "concat" else 4)
        self.mlp = nn.Sequential(nn.Dropout(dropout), nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 2))

    def forward(self, v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
        if self.features == "concat":
            x = torch.cat([v1, v2], dim=-1)
        else:
            x = torch.cat([v1, v2, (v1 - v2).abs(), v1 * v2], dim=-1)
        return self.mlp(x)


def pad_to(ids: torch.Tensor, length: int) -> torch.Tensor:
    """Right-pad ``(B, L)`` token ids with 0 up to ``length``."""
    if ids.shape[1] >= length:
        return ids
    return torch.nn.functional.pad(ids, (0, length - ids.shape[1]), value=0)
