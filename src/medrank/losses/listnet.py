"""ListNet: cross-entropy between top-one probability distributions."""

from __future__ import annotations

import torch
from torch import nn

from medrank.losses.checks import check_inputs, mean_over


class ListNetLoss(nn.Module):
    r"""ListNet (Cao et al., ICML 2007, "Learning to Rank: From Pairwise Approach to Listwise Approach").

    :math:`L = -\sum_i P_y(i) \log \mathrm{softmax}(s)_i` over the valid candidates of a list,
    averaged over the lists with a positive. The target top-one distribution is
    ``target="normalize"`` (default): :math:`P_y(i) = y_i / \sum_j y_j` — for binary labels,
    uniform over the positives; or ``target="softmax"``: :math:`\mathrm{softmax}(y)`, the paper's
    :math:`\phi = \exp` (which caps the learnable margin at the label gap, so it trains more slowly
    on 0/1 labels).

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    Returns: scalar mean over lists with at least one label > 0.
    """

    def __init__(self, target: str = "normalize") -> None:
        super().__init__()
        if target not in ("normalize", "softmax"):
            raise ValueError(f"target must be 'normalize' or 'softmax', got {target!r}")
        self.target = target

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        neg_inf = torch.finfo(scores.dtype).min
        log_p = torch.log_softmax(scores.masked_fill(~mask, neg_inf), dim=1)
        if self.target == "softmax":
            target = torch.softmax(labels.masked_fill(~mask, neg_inf), dim=1)
        else:
            target = labels / labels.sum(dim=1, keepdim=True).clamp(min=1e-12)
        per_list = -(target * log_p.masked_fill(~mask, 0.0)).sum(dim=1)
        return mean_over(per_list, (labels > 0).any(dim=1), scores)
