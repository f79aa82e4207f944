"""Triplet margin loss (baseline): the gold term must be closer than a negative term by a margin."""

from __future__ import annotations

import torch
from torch import nn

from medrank.losses.checks import check_hard, check_pairs

DISTANCES = ("cosine", "euclidean")


def checked_margin(margin: float, distance: str) -> tuple[float, str]:
    """``(margin, distance)`` of a margin loss, or a clear error for a margin <= 0 or an unknown distance."""
    if margin <= 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    return float(margin), distance


def pair_distance(a: torch.Tensor, b: torch.Tensor, metric: str) -> torch.Tensor:
    """Distance along the last dimension: ``1 - cos`` or the Euclidean norm of the difference."""
    if metric == "cosine":
        return 1.0 - nn.functional.cosine_similarity(a, b, dim=-1)
    if metric == "euclidean":
        return torch.linalg.vector_norm(a - b, dim=-1)
    raise ValueError(f"distance must be one of {DISTANCES}, got {metric!r}")


class TripletLoss(nn.Module):
    r"""Triplet loss :math:`\max(0,\ d(q, t^+) - d(q, t^-) + m)` (Schroff et al., CVPR 2015; Reimers & Gurevych, EMNLP 2019).

    One of the baselines of Zhang et al. (KDD 2022, Tables 2 and 4), trained with random
    negative terms or with mined hard negatives. Every (query, gold term, negative term) triple
    counts once; the loss is their mean.

    Inputs:
        query_emb: ``(B, d)`` anchors.
        term_emb: ``(B, d)`` gold terms.
        negative_terms: ``(B, N, d)`` negative terms of each anchor (``N >= 1``).
        negatives_valid: optional ``(B, N)`` bool, False for padded slots.

    Args:
        margin: the margin ``m`` (default 0.2, in units of the distance).
        distance: ``"cosine"`` (``1 - cos``, default) or ``"euclidean"``.

    Returns: the scalar mean loss.
    """

    def __init__(self, margin: float = 0.2, distance: str = "cosine") -> None:
        super().__init__()
        self.margin, self.distance = checked_margin(margin, distance)

    def forward(
        self,
        query_emb: torch.Tensor,
        term_emb: torch.Tensor,
        negative_terms: torch.Tensor,
        negatives_valid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        b = check_pairs(query_emb, term_emb)
        check_hard(negative_terms, b, query_emb.shape[1], "negative_terms")
        if negative_terms.shape[1] == 0:
            raise ValueError("TripletLoss needs at least one negative term per query")
        d_pos = pair_distance(query_emb, term_emb, self.distance)  # (B,)
        d_neg = pair_distance(query_emb.unsqueeze(1), negative_terms, self.distance)  # (B, N)
        losses = torch.relu(d_pos.unsqueeze(1) - d_neg + self.margin)
        if negatives_valid is None:
            return losses.mean()
        weight = negatives_valid.to(losses.dtype)
        return (losses * weight).sum() / weight.sum().clamp(min=1.0)
