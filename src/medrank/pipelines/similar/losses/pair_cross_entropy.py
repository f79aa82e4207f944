"""Binary cross-entropy of a pair matcher's two-way softmax (the STMT training objective).

STMT (K. Wang et al., DASFAA 2019) ends in an MLP with a softmax over
{different, same}; training minimises the cross-entropy of that softmax, which
for two classes equals binary cross-entropy on ``p(same) = softmax(logits)[1]``::

    loss = -mean( y log p + (1 - y) log(1 - p) )

Every matcher in this pipeline (STMT, Siamese BiLSTM/Transformer, ESIM, the
logistic regressions — whose logits are ``[0, z]`` so that ``p = sigmoid(z)`` —
and the cross-encoder) is trained with this one loss, so they compare under
one protocol.

Inputs: ``logits`` ``(batch, 2)`` float, ``labels`` ``(batch,)`` in {0, 1}
(int or float). Optional ``pos_weight`` scales the positive term. Output:
scalar mean loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class PairCrossEntropyLoss(nn.Module):
    """Cross-entropy of two-class pair logits against 0/1 labels."""

    def __init__(self, pos_weight: float = 1.0) -> None:
        super().__init__()
        if pos_weight <= 0:
            raise ValueError(f"pos_weight must be > 0, got {pos_weight}")
        self.pos_weight = float(pos_weight)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if logits.dim() != 2 or logits.shape[1] != 2:
            raise ValueError(f"logits must be (batch, 2), got {tuple(logits.shape)}")
        if labels.shape != (logits.shape[0],):
            raise ValueError(f"labels must be ({logits.shape[0]},), got {tuple(labels.shape)}")
        y = labels.long()
        if ((y != 0) & (y != 1)).any():
            raise ValueError("labels must be 0 or 1")
        if self.pos_weight == 1.0:
            return F.cross_entropy(logits, y)
        weights = torch.where(y == 1, self.pos_weight, 1.0).to(logits.dtype)
        return (F.cross_entropy(logits, y, reduction="none") * weights).sum() / weights.sum()
