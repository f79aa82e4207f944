"""Detection threshold of a symptom run: the β at which the top-k predictions reach precision α."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from medrank.pipelines.symptom.efn import calibrate_threshold
from medrank.records import ConceptDataset


def detection_threshold(model: Any, valid: ConceptDataset, retriever: Any, alpha: float, k: int = 5) -> float | None:
    """β for ``medrank detect``: the lowest top-``k`` score at which predictions are gold with precision ``alpha``."""
    rankings = retriever.search(list(valid.queries), k=k)
    scores, labels = [], []
    for r in rankings:
        rel = valid.qrels.relevant(r.query_id)
        scores.extend(r.scores)
        labels.extend(i in rel for i in r.ids)
    beta = calibrate_threshold(np.array(scores), np.array(labels), alpha)
    return round(beta, 6) if math.isfinite(beta) else None
