"""Plain softmax classification over question groups: the baseline of AM-softmax pre-training.

The STMT paper (K. Wang et al., DASFAA 2019) compares AM-softmax pre-training
with an ordinary softmax classifier; this is that classifier: a linear layer
``W x + b`` over the encoder's question vector followed by cross-entropy.

Inputs: ``embeddings`` ``(batch, dim)`` float, ``labels`` ``(batch,)`` int64 in
``[0, num_classes)``. Output: scalar mean loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SoftmaxClassificationLoss(nn.Module):
    """Linear classifier + cross-entropy, with its own ``(num_classes, dim)`` weights and bias."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"softmax classification needs at least 2 classes, got {num_classes}")
        self.classifier = nn.Linear(dim, num_classes)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        return self.classifier(embeddings)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if embeddings.dim() != 2 or embeddings.shape[1] != self.classifier.in_features:
            raise ValueError(f"embeddings must be (batch, {self.classifier.in_features}), got {tuple(embeddings.shape)}")
        if labels.shape != (embeddings.shape[0],):
            raise ValueError(f"labels must be ({embeddings.shape[0]},), got {tuple(labels.shape)}")
        return F.cross_entropy(self.classifier(embeddings), labels)
