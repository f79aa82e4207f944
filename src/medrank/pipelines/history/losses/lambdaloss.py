"""LambdaLoss (NDCG-Loss2): pairwise logistic loss weighted by an nDCG bound."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs, discounts, gains, ideal_dcg, mean_over


class LambdaLoss(nn.Module):
    r"""LambdaLoss, NDCG-Loss2 weighting (Wang et al., CIKM 2018, "The LambdaLoss Framework for
    Ranking Metric Optimization"; as implemented in allRank, Pobrotyn et al. 2020).

    Candidates are ranked by the current scores (rank :math:`r_i`, 1-based). For every pair of
    valid candidates with :math:`y_i > y_j`,

    .. math:: w_{ij} = \Big|\frac{1}{D(|r_i - r_j|)} - \frac{1}{D(|r_i - r_j| + 1)}\Big|
              \cdot \frac{|G_i - G_j|}{\mathrm{maxDCG}}, \qquad D(x) = \log_2(1 + x),\ G = 2^y - 1

    and the list loss is :math:`-\sum_{ij} w_{ij}\log_2 \sigma(\sigma_0 (s_i - s_j))`; the result
    is the mean over lists with a positive. The weights are treated as constants (no gradient
    through the sort), as in the paper.

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    Returns: scalar.
    """

    def __init__(self, sigma: float = 1.0, eps: float = 1e-10) -> None:
        super().__init__()
        if sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        self.sigma = sigma
        self.eps = eps

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        n = scores.shape[1]
        with torch.no_grad():
            ranking_key = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            order = torch.sort(ranking_key, dim=1, descending=True, stable=True).indices
            ranks = torch.empty_like(order)
            ranks.scatter_(1, order, torch.arange(1, n + 1, device=scores.device).expand_as(order))
            # inverse discounts 1/D(x) for x = 1..n (x = |r_i - r_j| >= 1, and x + 1 <= n)
            inv_d = torch.cat([torch.zeros(1, dtype=scores.dtype), discounts(n, scores.dtype, scores.device)])
            delta = (ranks[:, :, None] - ranks[:, None, :]).abs()
            rank_weight = (inv_d[delta.clamp(min=1, max=n - 1)] - inv_d[(delta + 1).clamp(max=n)]).abs()
            g = gains(labels) / ideal_dcg(labels).clamp(min=self.eps)[:, None]
            weights = rank_weight * (g[:, :, None] - g[:, None, :]).abs()
        pairs = (labels[:, :, None] > labels[:, None, :]) & mask[:, :, None] & mask[:, None, :]
        diff = scores[:, :, None] - scores[:, None, :]
        log2_sig = torch.nn.functional.logsigmoid(self.sigma * diff) / torch.log(torch.tensor(2.0, dtype=scores.dtype))
        per_list = -(weights * log2_sig * pairs).sum(dim=(1, 2))
        return mean_over(per_list, pairs.any(dim=(1, 2)), scores)
