"""ESIM: Enhanced Sequential Inference Model (Chen et al., "Enhanced LSTM for Natural Language
Inference", ACL 2017), a cross-attention baseline for question matching.

1. input encoding: a BiLSTM over word2vec embeddings of each question (shared);
2. local inference: soft alignment ``e_ij = a_i · b_j``; ``ã = softmax_j(e) b``,
   ``b̃ = softmax_i(e)ᵀ a``; enhancement ``m_a = [a; ã; a - ã; a ⊙ ã]``;
3. composition: a projection (ReLU) and a second BiLSTM over ``m_a`` / ``m_b``;
4. pooling ``[avg(a), max(a), avg(b), max(b)]`` → MLP (tanh hidden layer) → two logits.

For transfer pre-training, :meth:`ESIM.encode` is the input-encoding BiLSTM
with max pooling (the only part that sees one question at a time).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from medrank.pipelines.similar.models.layers import masked_max, masked_mean
from medrank.pipelines.similar.models.siamese import BiLSTMEncoder


class ESIM(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 100, hidden: int = 100, dropout: float = 0.1,
                 embeddings: np.ndarray | None = None, freeze_embeddings: bool = False) -> None:
        super().__init__()
        self.encoder = BiLSTMEncoder(vocab_size, dim, hidden, 1, dropout, embeddings, freeze_embeddings)
        self.output_dim = self.encoder.output_dim
        h2 = 2 * hidden
        self.projection = nn.Sequential(nn.Linear(4 * h2, hidden), nn.ReLU())
        self.composition = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(4 * h2, hidden), nn.Tanh(), nn.Dropout(dropout), nn.Linear(hidden, 2)
        )

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(ids)

    def _compose(self, m: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(1).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout(self.projection(m)), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.composition(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=m.shape[1])
        return torch.cat([masked_mean(out, mask), masked_max(out, mask)], dim=-1)

    def forward(self, ids1: torch.Tensor, ids2: torch.Tensor) -> torch.Tensor:
        a, mask_a = self.encoder.sequence(ids1)
        b, mask_b = self.encoder.sequence(ids2)
        e = a @ b.transpose(1, 2)  # (B, La, Lb)
        neg = torch.finfo(e.dtype).min
        a_tilde = torch.softmax(e.masked_fill(~mask_b[:, None, :], neg), dim=2) @ b
        b_tilde = torch.softmax(e.masked_fill(~mask_a[:, :, None], neg), dim=1).transpose(1, 2) @ a
        m_a = torch.cat([a, a_tilde, a - a_tilde, a * a_tilde], dim=-1)
        m_b = torch.cat([b, b_tilde, b - b_tilde, b * b_tilde], dim=-1)
        return self.classifier(torch.cat([self._compose(m_a, mask_a), self._compose(m_b, mask_b)], dim=-1))
