"""Reciprocal rank: ``1 / rank`` of the first relevant item (0 if none in the top k)."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat


def reciprocal_rank(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query reciprocal rank@k (its mean over queries is MRR)."""
    found = flat.first_hit >= 0
    if k is not None:
        found &= flat.first_hit < k
    out = np.zeros(len(flat.qids))
    out[found] = 1.0 / (flat.first_hit[found] + 1.0)
    return out
