"""DCG helpers shared by the history ranking losses (input checks: :mod:`medrank.losses.checks`).

"""

from __future__ import annotations

import torch

from medrank.losses.checks import check_inputs, mean_over

__all__ = ["check_inputs", "discounts", "gains", "ideal_dcg", "mean_over"]


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
