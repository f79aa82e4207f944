"""BioSyn's score: a dense cosine plus a weighted character n-gram TF-IDF cosine, over every entry.

``s(q, e) = s_dense(q, e) + w · s_sparse(q, e)`` (Sung et al., ACL 2020, eq. 3), where ``s_dense``
is the cosine of the encoder's vectors (a :class:`~medrank.index.dense.DenseIndex`), ``s_sparse``
that of character n-gram TF-IDF vectors (a :class:`~medrank.index.char_tfidf.CharTfidfIndex`)
and ``w`` the sparse weight (learned by the BioSyn training, or tuned on held-out mentions). The
sum is computed exactly for every entry, not over two truncated candidate lists, so a concept
that is second in both lists can win; an item scores its best entry.

Unlike rank fusion (:class:`~medrank.index.hybrid.HybridIndex`), the weighted sum keeps the
scores' magnitudes: with ``w = 0`` it is the dense index, and large ``w`` tends to the sparse one.

When the dense component searches approximately (an HNSW graph or an IVF index, e.g. after
:meth:`DenseIndex.to_hnsw`), a query no longer multiplies every entry vector: the pool of entries
scored is its dense index's top ``candidates`` plus the top ``candidates`` by the (exact) sparse
score, and every pooled entry gets the exact sum. An entry outside both lists cannot win then;
a query whose pool holds fewer than ``k`` concepts is scored over every entry.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index.base import Index, IndexFormatError, load_index, register, top_items
from medrank.index.char_tfidf import CharTfidfIndex, rank_entries
from medrank.index.dense import DenseIndex
from medrank.records import Ranking, is_integer


def check_weight(weight: Any) -> float:
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
        raise ValueError(f"sparse_weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


@register
class SparseDenseIndex(Index):
    """Dense + ``sparse_weight`` × sparse score over the same entries (BioSyn's inference)."""

    kind: ClassVar[str] = "sparse-dense"

    def __init__(self, dense: DenseIndex, sparse: CharTfidfIndex, sparse_weight: float = 1.0, batch_size: int = 64,
                 candidates: int = 100) -> None:
        super().__init__()
        if not isinstance(dense, DenseIndex) or not isinstance(sparse, CharTfidfIndex):
            raise TypeError("SparseDenseIndex needs a DenseIndex and a CharTfidfIndex")
        if not is_integer(candidates) or candidates < 1:
            raise ValueError(f"candidates must be an integer >= 1, got {candidates!r}")
        self.dense, self.sparse = dense, sparse
        self.sparse_weight = check_weight(sparse_weight)
        self.batch_size = batch_size
        #: per score, how many entries an approximate dense search pools for the exact sum
        self.candidates = int(candidates)
        self._vectors: np.ndarray | None = None
        self._items = np.array([], dtype=object)
        self._n_items = 0

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

    @property
    def components(self) -> list[Index]:
        """The dense and the sparse index (what serving code walks to swap a query encoder or the search)."""
        return [self.dense, self.sparse]

    def _sync(self) -> None:
        self._vectors = np.ascontiguousarray(self.dense.vectors(), dtype=np.float32)
        self._items = np.array(self.entry_items, dtype=object)
        self._n_items = len(set(self.entry_items))

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
        if self.dense.factory != "flat":
            return self._search_pooled(qids, texts, k)
        out = []
        for start in range(0, len(texts), self.batch_size):  # (batch, entries) score rows: bounded memory
            dense, sparse = self.entry_scores(texts[start : start + self.batch_size])
            fused = dense + self.sparse_weight * sparse
            out += [rank_entries(qid, row, self._items, k) for qid, row in zip(qids[start : start + self.batch_size], fused, strict=True)]
        return out

    def _search_pooled(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        """The exact sum over each query's pool: its approximate dense top entries and its sparse top entries."""
        assert self._vectors is not None
        n_entries = len(self._items)
        depth = min(n_entries, max(self.candidates, k))
        n_items = self._n_items
        out = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            q = self.dense._require_encoder().encode(chunk, kind="query", batch_size=self.dense.batch_size, show_progress=False)
            q = np.ascontiguousarray(q, dtype=np.float32)
            _, dense_top = self.dense._faiss_search(q, depth)
            sparse = self.sparse.entry_scores(chunk) if self.sparse_weight > 0 else None
            for row, qid in enumerate(qids[start : start + self.batch_size]):
                pool = dense_top[row][dense_top[row] >= 0]
                if sparse is not None:
                    sparse_top = np.argpartition(-sparse[row], depth - 1)[:depth] if depth < n_entries else np.arange(n_entries)
                    pool = np.union1d(pool, sparse_top)
                fused = self._vectors[pool] @ q[row]
                if sparse is not None:
                    fused += self.sparse_weight * sparse[row][pool]
                order = np.argsort(-fused, kind="stable")
                ids, scores = top_items(self._items, pool[order], fused[order], k)
                if len(ids) < min(k, n_items):  # the pool is short of concepts: score every entry
                    full = self._vectors @ q[row] + (self.sparse_weight * sparse[row] if sparse is not None else 0.0)
                    out.append(rank_entries(qid, full, self._items, k))
                else:
                    out.append(Ranking(qid, tuple(ids), tuple(scores)))
        return out

    def _save(self, path: Path) -> None:
        self.dense.save(path / "dense")
        self.sparse.save(path / "sparse")

    def config(self) -> dict[str, Any]:
        return {"sparse_weight": self.sparse_weight, "batch_size": self.batch_size, "candidates": self.candidates}

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> SparseDenseIndex:
        dense, sparse = load_index(path / "dense", **kwargs), load_index(path / "sparse")
        if not isinstance(dense, DenseIndex) or not isinstance(sparse, CharTfidfIndex):
            raise IndexFormatError(f"{path}: expected a dense and a char-tfidf component")
        return cls(dense, sparse, config["sparse_weight"], config.get("batch_size", 64), config.get("candidates", 100))

    def _load_entries(self, path: Path) -> None:
        super()._load_entries(path)
        if self.dense.entry_ids != self.entry_ids or self.sparse.entry_ids != self.entry_ids:
            raise IndexFormatError(f"{path}: the components do not hold this index's entries")
        self._sync()
