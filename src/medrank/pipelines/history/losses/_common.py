"""Input checks, masking and DCG helpers shared by the ranking losses.

Every loss takes

* ``scores``: ``(B, N)`` float logits of ``N`` candidates for ``B`` lists;
* ``labels``: ``(B, N)`` relevance grades (0/1 or graded, any numeric dtype);
* ``mask``: optional ``(B, N)`` bool, ``True`` for a real candidate, ``False`` for padding
  (lists of different lengths are right-padded to ``N``).

and returns the scalar mean over the lists that carry a training signal.
"""

from __future__ import annotations

import torch


def check_inputs(
    scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate shapes; returns ``(scores, float labels, bool mask)``."""
    if scores.ndim == 1:
        scores, labels = scores[None], labels[None]
        mask = None if mask is None else mask[None]
    if scores.ndim != 2:
        raise ValueError(f"scores must be (batch, n_candidates), got {tuple(scores.shape)}")
    if labels.shape != scores.shape:
        raise ValueError(f"labels {tuple(labels.shape)} must have the shape of scores {tuple(scores.shape)}")
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    elif mask.shape != scores.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(scores.shape)}, got {mask.dtype} {tuple(mask.shape)}")
    if scores.shape[1] == 0:
        raise ValueError("empty candidate lists")
    labels = labels.to(scores.dtype).masked_fill(~mask, 0.0)
    return scores, labels, mask


def gains(labels: torch.Tensor) -> torch.Tensor:
    """Exponential gain ``2**y - 1`` (Burges et al. 2005), the gain of the nDCG-based losses."""
    return torch.pow(2.0, labels) - 1.0


def discounts(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``1 / log2(rank + 1)`` for ranks ``1..n``."""
    return 1.0 / torch.log2(torch.arange(2, n + 2, dtype=dtype, device=device))


def ideal_dcg(labels: torch.Tensor) -> torch.Tensor:
    """``(B,)`` DCG of each list sorted by its labels (padding has label 0, so it sorts last)."""
    ideal = torch.sort(gains(labels), dim=1, descending=True).values
    return (ideal * discounts(labels.shape[1], labels.dtype, labels.device)).sum(dim=1)


def mean_over(values: torch.Tensor, keep: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Mean of ``values[keep]``; an all-false ``keep`` gives a zero that keeps the graph."""
    if keep.any():
        return values[keep].mean()
    return like.sum() * 0.0
