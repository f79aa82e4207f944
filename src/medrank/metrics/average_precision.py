"""Average precision (trec_eval ``map``): precision@r summed over the relevant items at ranks r <= k,
divided by R (all relevant items, also for ``map@k``, as ranx)."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat, at_most, per_query


def average_precision(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query average precision@k (its mean over queries is MAP)."""
    mask = at_most(flat, k)
    precision_at_hit = flat.hit_count[mask] / (flat.hit_pos[mask] + 1.0)
    return per_query(flat, mask, precision_at_hit) / flat.n_rel
