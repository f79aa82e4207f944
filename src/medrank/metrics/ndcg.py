"""nDCG@k with linear gain (Järvelin & Kekäläinen 2002; trec_eval ``ndcg``, ranx ``"ndcg"``).

``DCG@k / IDCG@k``, ``DCG@k = sum_{i<=k} grade_i / log2(i + 1)``; IDCG@k is the DCG of every judged
relevant item sorted by grade, truncated at k.
"""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat, at_most, discount, per_query


def ndcg(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query nDCG@k (``k=None``: the whole ranking)."""
    mask = at_most(flat, k)
    dcg = per_query(flat, mask, flat.hit_gain[mask] * discount(flat.hit_pos[mask]))
    imask = slice(None) if k is None else flat.ideal_pos < k
    idcg = np.bincount(
        flat.ideal_q[imask],
        weights=flat.ideal_gain[imask] * discount(flat.ideal_pos[imask]),
        minlength=len(flat.qids),
    )
    return dcg / idcg  # idcg > 0: every evaluated query has a relevant item
