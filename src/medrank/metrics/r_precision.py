"""R-precision: ``|rel ∩ top-R| / R``; takes no ``@k``."""

from __future__ import annotations

import numpy as np

from medrank.metrics.flatten import Flat


def r_precision(flat: Flat, k: int | None) -> np.ndarray:
    """Per-query R-precision (``k`` is always ``None``: the name parser refuses a cut-off)."""
    in_top_r = flat.hit_pos < flat.n_rel[flat.hit_q]
    return np.bincount(flat.hit_q[in_top_r], minlength=len(flat.qids)) / flat.n_rel
