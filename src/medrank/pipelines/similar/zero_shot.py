"""A matcher with no training: the cosine of a pretrained sentence encoder's vectors.

STMT re-ranks BM25's top 20 with a matcher trained on labelled question pairs. Before one is trained (a fresh
checkout), a sentence encoder that was trained on question pairs elsewhere stands in for it: all-MiniLM-L6-v2's
training data holds duplicate-question pairs (Reimers & Gurevych, 2019; the sentence-transformers training sets), and
multilingual-e5 is trained on question-answer and paraphrase pairs (Wang et al., 2022). Each of the two questions is
encoded on its own (a bi-encoder) and the pair scores ``cos(v_1, v_2)``; e5 reads both with its ``"query: "`` prompt,
as it does for symmetric tasks. ``bench/similar_zero_shot.py`` measures it against BM25's own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class EncoderCosineMatcher:
    """``score(pairs)``: the cosine of ``encoder``'s vectors of the two questions of each pair, shape ``(n,)``; the
    matcher interface :class:`~medrank.pipelines.similar.retrieval.SimilarQuestionSearcher` reads (no training, nothing
    to save)."""

    def __init__(self, encoder: Any) -> None:
        if not callable(getattr(encoder, "encode", None)):
            raise TypeError(f"encoder must have encode(texts, kind=...), got {type(encoder).__name__}")
        self.encoder = encoder
        self.name = f"{getattr(encoder, 'name', 'encoder')} cosine"

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        # a question shared by several pairs (the new one, against each candidate) is encoded once
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        row = {t: i for i, t in enumerate(texts)}
        vectors = self.encoder.encode(texts, kind="query", batch_size=batch_size, show_progress=False)
        first = vectors[[row[a] for a, _ in pairs]]
        second = vectors[[row[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", first, second).astype(np.float32)
