"""ApproxNDCG: nDCG with ranks replaced by a sigmoid approximation."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs, gains, ideal_dcg, mean_over


class ApproxNDCGLoss(nn.Module):
    r"""ApproxNDCG (Qin, Liu & Li, Information Retrieval 2010, "A General Approximation Framework
    for Direct Optimization of Information Retrieval Measures").

    The rank of candidate :math:`i` is approximated by
    :math:`\hat\pi_i = 1 + \sum_{j \ne i} \sigma\big((s_j - s_i)/T\big)` over valid candidates, and
    :math:`L = -\frac{1}{\mathrm{maxDCG}}\sum_i \frac{2^{y_i}-1}{\log_2(1+\hat\pi_i)}`, averaged over
    lists with a positive (so the loss is minus an nDCG in [-1, 0]).

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        diff = (scores[:, None, :] - scores[:, :, None]) / self.temperature  # [b, i, j] = s_j - s_i
        others = mask[:, None, :] & mask[:, :, None]
        others = others & ~torch.eye(scores.shape[1], dtype=torch.bool, device=scores.device)[None]
        approx_rank = 1.0 + (torch.sigmoid(diff) * others).sum(dim=2)
        dcg = (gains(labels) / torch.log2(1.0 + approx_rank) * mask).sum(dim=1)
        per_list = -dcg / ideal_dcg(labels).clamp(min=1e-10)
        return mean_over(per_list, (labels > 0).any(dim=1), scores)
