"""Hit rate (BioSyn's Acc@k): 1 if any relevant item is in the top k, else 0."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat, at_most, per_query


def hit_rate(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query hit rate@k."""
    return (per_query(flat, at_most(flat, k)) > 0).astype(np.float64)
