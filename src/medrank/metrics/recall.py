"""Recall@k: ``|rel ∩ top-k| / R``."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat, at_most, per_query


def recall(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query recall@k (``k=None``: the whole ranking)."""
    return per_query(flat, at_most(flat, k)) / flat.n_rel
