"""Siamese baselines: a shared question encoder (BiLSTM or standard Transformer) + the pair head.

* **Siamese BiLSTM** (Mueller & Thyagarajan, AAAI 2016; Neculoiu et al., 2016,
  in the form used as a baseline by the STMT paper): a bidirectional LSTM over
  word2vec embeddings, global max pooling over time.
* **Transformer** (Vaswani et al., 2017): a standard post-norm encoder of ``N``
  layers (``torch.nn.TransformerEncoderLayer``: self-attention + position-wise
  feed-forward), sinusoidal positions, global max pooling. It differs from
  STMT by the missing inter-attention sublayer; STMT's self-attention-only
  ablation is the same architecture implemented with STMT's own layers.

Both encode each question independently, then the :class:`PairHead` (same as
STMT's) maps ``[v_q, v_c]`` to two logits.
"""

from __future__ import annotations

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


class BiLSTMEncoder(nn.Module):
    """Embeddings → BiLSTM (``hidden`` per direction) → max pooling; output ``2 * hidden``."""

    def __init__(self, vocab_size: int, dim: int = 100, hidden: int = 100, layers: int = 1, dropout: float = 0.1,
                 embeddings: np.ndarray | None = None, freeze_embeddings: bool = False) -> None:
        super().__init__()
        self.embed = embedding_from_matrix(embeddings, vocab_size, dim, freeze_embeddings)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(dim, hidden, num_layers=layers, batch_first=True, bidirectional=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.output_dim = 2 * hidden

    def sequence(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-position states ``(B, L, 2h)`` and the token mask ``(B, L)``."""
        mask = ids != 0
        lengths = mask.sum(1).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout(self.embed(ids)), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        return out, mask

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, mask = self.sequence(ids)
        return masked_max(out, mask)


class SiameseTransformerEncoder(nn.Module):
    """Embeddings + positions → ``N`` standard Transformer encoder layers → max pooling; output ``dim``."""

    def __init__(self, vocab_size: int, dim: int = 100, layers: int = 6, heads: int = 10, ff_dim: int = 200,
                 dropout: float = 0.1, embeddings: np.ndarray | None = None, freeze_embeddings: bool = False,
                 max_len: int = 512, norm_first: bool = False) -> None:
        super().__init__()
        self.embed = embedding_from_matrix(embeddings, vocab_size, dim, freeze_embeddings, dim**0.5)
        self.positions = SinusoidalPositions(dim, max_len)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(dim, heads, ff_dim, dropout, batch_first=True, norm_first=norm_first)
        # enable_nested_tensor is a speed path for inference only; off keeps train/eval numerics identical
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(dim) if norm_first else None,
                                             enable_nested_tensor=False)
        self.output_dim = dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = ids != 0
        x = self.encoder(self.dropout(self.positions(self.embed(ids))), src_key_padding_mask=~mask)
        return masked_max(x, mask)


class SiameseMatcher(nn.Module):
    """A shared encoder for both questions + :class:`PairHead` → logits ``(B, 2)``."""

    def __init__(self, encoder: nn.Module, hidden: int = 100, dropout: float = 0.1, head_features: str = "concat") -> None:
        super().__init__()
        self.encoder = encoder
        self.output_dim = encoder.output_dim
        self.head = PairHead(encoder.output_dim, hidden, dropout, head_features)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(ids)

    def forward(self, ids1: torch.Tensor, ids2: torch.Tensor) -> torch.Tensor:
        b = ids1.shape[0]
        length = max(ids1.shape[1], ids2.shape[1])
        v = self.encoder(torch.cat([pad_to(ids1, length), pad_to(ids2, length)], dim=0))
        return self.head(v[:b], v[b:])
