"""Small vector helpers shared by the pipelines and the service."""

from __future__ import annotations

import numpy as np


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x`` as float32 with every row (last axis) scaled to unit length; all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
