"""RankNet: pairwise logistic loss on score differences."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs


class RankNetLoss(nn.Module):
    r"""RankNet (Burges et al., ICML 2005, "Learning to Rank using Gradient Descent").

    For every pair of valid candidates with :math:`y_i > y_j` the loss is
    :math:`\log(1 + e^{-\sigma (s_i - s_j)})`; the result is the mean over all such pairs of
    the batch.

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    Returns: scalar; a batch without any ordered pair gives 0 (with a graph).
    """

    def __init__(self, sigma: float = 1.0) -> None:
        super().__init__()
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        self.sigma = sigma

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        diff = scores[:, :, None] - scores[:, None, :]  # s_i - s_j
        pairs = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
        if not pairs.any():
            return scores.sum() * 0.0
        return nn.functional.softplus(-self.sigma * diff)[pairs].mean()
