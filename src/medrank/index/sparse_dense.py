"""BioSyn's score: a dense cosine plus a weighted character n-gram TF-IDF cosine, over every entry.

``s(q, e) = s_dense(q, e) + w · s_sparse(q, e)`` (Sung et al., ACL 2020, eq. 3), where ``s_dense``
is the cosine of the encoder's vectors (a :class:`~medrank.index.dense.DenseIndex`), ``s_sparse``
that of character n-gram TF-IDF vectors (a :class:`~medrank.index.char_tfidf.CharTfidfIndex`)
and ``w`` the sparse weight (learned by the BioSyn training, or tuned on held-out mentions). The
sum is computed exactly for every entry, not over two truncated candidate lists, so a concept
that is second in both lists can win; an item scores its best entry.

Unlike rank fusion (:class:`~medrank.index.hybrid.HybridIndex`), the weighted sum keeps the
scores' magnitudes: with ``w = 0`` it is the dense index, and large ``w`` tends to the sparse one.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index.base import Index, IndexFormatError, load_index, register
from medrank.index.char_tfidf import CharTfidfIndex, rank_entries
from medrank.index.dense import DenseIndex
from medrank.records import Ranking


def check_weight(weight: Any) -> float:
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
        raise ValueError(f"sparse_weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


@register
class SparseDenseIndex(Index):
    """Dense + ``sparse_weight`` × sparse score over the same entries (BioSyn's inference)."""

    kind: ClassVar[str] = "sparse-dense"

    def __init__(self, dense: DenseIndex, sparse: CharTfidfIndex, sparse_weight: float = 1.0, batch_size: int = 64) -> None:
        super().__init__()
        if not isinstance(dense, DenseIndex) or not isinstance(sparse, CharTfidfIndex):
            raise TypeError("SparseDenseIndex needs a DenseIndex and a CharTfidfIndex")
        self.dense, self.sparse = dense, sparse
        self.sparse_weight = check_weight(sparse_weight)
        self.batch_size = batch_size
        self._vectors: np.ndarray | None = None
        self._items = np.array([], dtype=object)

    @classmethod
    def create(cls, encoder: Encoder, sparse_weight: float = 1.0, **sparse_kwargs: Any) -> SparseDenseIndex:
        """An unbuilt index over ``encoder`` and a character TF-IDF with ``sparse_kwargs``."""
        return cls(DenseIndex(encoder), CharTfidfIndex(**sparse_kwargs), sparse_weight)

    @classmethod
    def from_built(cls, dense: DenseIndex, sparse: CharTfidfIndex, sparse_weight: float = 1.0) -> SparseDenseIndex:
        """Combine two indexes already built over the same entries (no re-encoding)."""
        if dense.entry_ids != sparse.entry_ids or dense.entry_items != sparse.entry_items:
            raise ValueError("the dense and sparse indexes must hold the same entries in the same order")
        index = cls(dense, sparse, sparse_weight)
        index.entry_ids, index.entry_texts, index.entry_items = list(dense.entry_ids), list(dense.entry_texts), list(dense.entry_items)
        index._sync()
        return index

    def _sync(self) -> None:
        self._vectors = np.ascontiguousarray(self.dense.vectors(), dtype=np.float32)
        self._items = np.array(self.entry_items, dtype=object)

    def _build(self) -> None:
        self.dense.build(self.entry_ids, self.entry_texts, self.entry_items)
        self.sparse.build(self.entry_ids, self.entry_texts, self.entry_items)
        self._sync()

    def _add(self, start: int) -> None:
        args = (self.entry_ids[start:], self.entry_texts[start:], self.entry_items[start:])
        self.dense.add(*args)
        self.sparse.add(*args)
        self._sync()

    def entry_scores(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(dense, sparse)`` scores, each ``(n, entries)``, of ``texts`` against every entry."""
        q = self.dense._require_encoder().encode(texts, kind="query", batch_size=self.dense.batch_size, show_progress=False)
        assert self._vectors is not None
        return q @ self._vectors.T, self.sparse.entry_scores(texts)

    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        out = []
        for start in range(0, len(texts), self.batch_size):  # (batch, entries) score rows: bounded memory
            dense, sparse = self.entry_scores(texts[start : start + self.batch_size])
            fused = dense + self.sparse_weight * sparse
            out += [rank_entries(qid, row, self._items, k) for qid, row in zip(qids[start : start + self.batch_size], fused, strict=True)]
        return out

    def _save(self, path: Path) -> None:
        self.dense.save(path / "dense")
        self.sparse.save(path / "sparse")

    def config(self) -> dict[str, Any]:
        return {"sparse_weight": self.sparse_weight, "batch_size": self.batch_size}

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> SparseDenseIndex:
        dense, sparse = load_index(path / "dense", **kwargs), load_index(path / "sparse")
        if not isinstance(dense, DenseIndex) or not isinstance(sparse, CharTfidfIndex):
            raise IndexFormatError(f"{path}: expected a dense and a char-tfidf component")
        return cls(dense, sparse, config["sparse_weight"], config.get("batch_size", 64))

    def _load_entries(self, path: Path) -> None:
        super()._load_entries(path)
        if self.dense.entry_ids != self.entry_ids or self.sparse.entry_ids != self.entry_ids:
            raise IndexFormatError(f"{path}: the components do not hold this index's entries")
        self._sync()
