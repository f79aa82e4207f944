"""Deterministic top-k selection.

Ties are broken by position (lower entry index first), so the same index and
query always give the same ranking, before and after a save/load round trip.
"""

from __future__ import annotations

import numpy as np


def topk_stable(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``scores``, descending; ties keep index order."""
    n = scores.shape[0]
    if k >= n:
        return np.argsort(-scores, kind="stable")
    # argpartition finds the k-th value; keep everything at least that large so no tie is cut arbitrarily.
    kth = np.partition(scores, n - k)[n - k]
    cand = np.flatnonzero(scores >= kth)
    order = np.argsort(-scores[cand], kind="stable")
    return cand[order][:k]


def topk_positive(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest positive ``scores``, descending, ties in index order (:func:`topk_stable` of the
    positive entries). A lexical score is positive only for the few entries that share a query token: selecting among
    those costs far less than a selection over every entry."""
    matched = np.flatnonzero(scores > 0)
    return matched[topk_stable(scores[matched], min(k, len(matched)))]
