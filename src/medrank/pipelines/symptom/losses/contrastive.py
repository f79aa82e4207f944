"""Contrastive (Hadsell) loss (baseline): pull positive pairs together, push negatives beyond a margin."""

from __future__ import annotations

import torch
from torch import nn

from medrank.losses.triplet import checked_margin, pair_distance
from medrank.pipelines.symptom.losses._common import check_pairs


class ContrastiveLoss(nn.Module):
    r"""Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006) over labelled (query, term) pairs.

    .. math::
        \mathcal{L} = \frac{1}{P}\sum_p \tfrac12\big[y_p\, d_p^2 + (1-y_p)\max(0, m - d_p)^2\big]

    with ``d`` the pair distance (``1 - cos`` by default, as in sentence-transformers'
    ``ContrastiveLoss``). A baseline of Zhang et al. (KDD 2022) with random or hard negatives.

    Inputs:
        query_emb: ``(P, d)``, term_emb: ``(P, d)`` — the two sides of ``P`` pairs.
        labels: ``(P,)`` 1 for a gold pair, 0 for a negative pair.

    Args:
        margin: ``m`` (default 0.5).
        distance: ``"cosine"`` or ``"euclidean"``.

    Returns: the scalar mean loss.
    """

    def __init__(self, margin: float = 0.5, distance: str = "cosine") -> None:
        super().__init__()
        self.margin, self.distance = checked_margin(margin, distance)

    def forward(self, query_emb: torch.Tensor, term_emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        p = check_pairs(query_emb, term_emb)
        if labels.shape != (p,):
            raise ValueError(f"labels must have shape ({p},), got {tuple(labels.shape)}")
        y = labels.to(query_emb.dtype)
        d = pair_distance(query_emb, term_emb, self.distance)
        losses = 0.5 * (y * d.pow(2) + (1 - y) * torch.relu(self.margin - d).pow(2))
        return losses.mean()
