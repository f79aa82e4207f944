"""Precision@k: ``|rel ∩ top-k| / k`` (a shorter ranking is still divided by k, as trec_eval and ranx);
without ``@k`` the denominator is the ranking length (0 for an empty ranking)."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat, at_most, per_query


def precision(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query precision@k."""
    hits = per_query(flat, at_most(flat, k))
    if k is not None:
        return hits / k
    return np.divide(hits, flat.length, out=np.zeros(len(flat.qids)), where=flat.length > 0)
