"""ListMLE: likelihood of the ground-truth permutation under a Plackett-Luce model."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs, mean_over


class ListMLELoss(nn.Module):
    r"""ListMLE (Xia et al., ICML 2008, "Listwise Approach to Learning to Rank: Theory and Algorithm").

    With :math:`\pi` the candidates sorted by decreasing label,
    :math:`L = \sum_{k=1}^{n} \big(\log\sum_{j\ge k} e^{s_{\pi_j}} - s_{\pi_k}\big)` over the valid
    candidates, averaged over lists with a positive. Ties in the labels are broken at random
    (``generator`` makes it reproducible), as in allRank.

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    Returns: scalar mean over lists with at least one label > 0.
    """

    def __init__(self, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.generator = generator

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        b, n = scores.shape
        # random tie-break: shuffle, then stable sort by (valid first, label descending)
        perm = torch.stack([torch.randperm(n, generator=self.generator) for _ in range(b)]).to(scores.device)
        key = torch.where(mask, labels, torch.full_like(labels, -1e9)).gather(1, perm)
        order = perm.gather(1, torch.sort(key, dim=1, descending=True, stable=True).indices)
        s = scores.gather(1, order)
        valid = mask.gather(1, order)
        s = s.masked_fill(~valid, torch.finfo(s.dtype).min)
        # log-sum-exp of every suffix: reverse cumulative logsumexp
        suffix = torch.flip(torch.logcumsumexp(torch.flip(s, [1]), dim=1), [1])
        per_list = torch.where(valid, suffix - s, torch.zeros_like(s)).sum(dim=1)
        return mean_over(per_list, (labels > 0).any(dim=1), scores)
