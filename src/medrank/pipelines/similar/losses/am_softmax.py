"""Additive-margin softmax (AM-softmax) over question groups, for STMT's transfer pre-training.

Paper: F. Wang, J. Cheng, W. Liu, H. Liu, "Additive Margin Softmax for Face
Verification", IEEE Signal Processing Letters 25(7), 2018; used to pre-train
the Siamese Text Matching Transformer in K. Wang et al., "Medical Question
Retrieval Based on Siamese Neural Network and Transfer Learning Method",
DASFAA 2019 (m = 0.35, s = 20 there and here).

For an embedding ``x`` of a question of group ``y`` and class weights ``W``
(one row per group), with ``cos_j = <x/|x|, W_j/|W_j|>``::

    loss = -log( exp(s (cos_y - m)) / (exp(s (cos_y - m)) + sum_{j != y} exp(s cos_j)) )

i.e. cross-entropy on the logits ``s * (cos - m * onehot(y))``. The margin
forces questions of one group to be closer to their own centre than to any
other by at least ``m`` in cosine, which is what the Siamese matcher later
needs (same-intent questions close, others apart).

Inputs: ``embeddings`` ``(batch, dim)`` float, ``labels`` ``(batch,)`` int64 in
``[0, num_classes)``. Output: scalar mean loss. The class weights are a
parameter of the loss (train them together with the encoder).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class AMSoftmaxLoss(nn.Module):
    """AM-softmax classification loss with its own ``(num_classes, dim)`` class-weight matrix.

    Args:
        dim: embedding size.
        num_classes: number of groups (>= 2).
        margin: additive cosine margin ``m`` (0.35 in the STMT paper).
        scale: logit scale ``s`` (20 in the STMT paper).
    """

    def __init__(self, dim: int, num_classes: int, margin: float = 0.35, scale: float = 20.0) -> None:
        super().__init__()
        if num_classes < 2:
            raise ValueError(f"AM-softmax needs at least 2 classes, got {num_classes}")
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.margin = float(margin)
        self.scale = float(scale)
        self.weight = nn.Parameter(torch.empty(num_classes, dim))
        nn.init.xavier_uniform_(self.weight)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Scaled cosines ``s * cos(x, W_j)`` without the margin, ``(batch, num_classes)``."""
        return self.scale * F.normalize(embeddings, dim=-1) @ F.normalize(self.weight, dim=-1).T

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if embeddings.dim() != 2 or embeddings.shape[1] != self.weight.shape[1]:
            raise ValueError(f"embeddings must be (batch, {self.weight.shape[1]}), got {tuple(embeddings.shape)}")
        if labels.shape != (embeddings.shape[0],):
            raise ValueError(f"labels must be ({embeddings.shape[0]},), got {tuple(labels.shape)}")
        cos = F.normalize(embeddings, dim=-1) @ F.normalize(self.weight, dim=-1).T
        margin = F.one_hot(labels, cos.shape[1]).to(cos.dtype) * self.margin
        return F.cross_entropy(self.scale * (cos - margin), labels)
