"""The store interface shared by the embedded and the PostgreSQL + pgvector backends.

A *store* holds items ``(id, text, vector, metadata)``. Ids are unique strings and
``add`` upserts by id. ``search`` ranks items for a query vector (dense), a query
text (lexical) or both (hybrid: reciprocal rank fusion of the two rankings), with
optional metadata equality filters. Every backend makes an ``add`` durable before
it returns, so an acknowledged write survives a crash of the process.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.index.hybrid import fuse_rankings
from medrank.records import Ranking

STORE_FORMAT_VERSION = 1
MODES = ("dense", "bm25", "hybrid")
LANGUAGES = ("en", "zh", "auto")
# Metadata keys become JSON paths (SQLite) or jsonb keys (PostgreSQL); keep them plain.
_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
# Each side of a hybrid search retrieves this many candidates before fusion.
HYBRID_DEPTH = 100
RRF_K = 60


class StoreFormatError(ValueError):
    """A store on disk / in the database is missing, corrupt or of an unknown format version."""


@dataclass(frozen=True)
class Hit:
    """One search result: the item's id, its score (higher is better), its text and metadata."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def validate_items(
    ids: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    metadata: Sequence[dict[str, Any] | None] | None,
    dim: int,
) -> tuple[list[str], list[str], np.ndarray, list[dict[str, Any]]]:
    """Check an ``add`` batch and de-duplicate ids (the last occurrence wins, like sequential upserts)."""
    ids, texts = list(ids), list(texts)
    if len(ids) != len(texts):
        raise ValueError(f"got {len(ids)} ids but {len(texts)} texts")
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape != (len(ids), dim):
        raise ValueError(f"vectors must have shape ({len(ids)}, {dim}), got {vectors.shape}")
    if not np.isfinite(vectors).all():
        raise ValueError("vectors contain NaN or inf")
    if metadata is None:
        metas: list[dict[str, Any]] = [{} for _ in ids]
    else:
        metas = [dict(m) if m else {} for m in metadata]
        if len(metas) != len(ids):
            raise ValueError(f"got {len(ids)} ids but {len(metas)} metadata dicts")
    for i, (item_id, text, meta) in enumerate(zip(ids, texts, metas, strict=True)):
        if not isinstance(item_id, str) or not item_id:
            raise ValueError(f"item {i}: id must be a non-empty string, got {item_id!r}")
        if not isinstance(text, str):
            raise TypeError(f"item {item_id!r}: text must be a string, got {type(text).__name__}")
        try:
            json.dumps(meta)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"item {item_id!r}: metadata must be JSON-serialisable ({exc})") from exc
    last = {item_id: i for i, item_id in enumerate(ids)}
    if len(last) != len(ids):
        keep = sorted(last.values())
        ids = [ids[i] for i in keep]
        texts = [texts[i] for i in keep]
        metas = [metas[i] for i in keep]
        vectors = vectors[keep]
    return ids, texts, np.ascontiguousarray(vectors), metas


def validate_filter(filter: dict[str, Any] | None) -> dict[str, list[Any]]:
    """Normalise a metadata filter to ``{key: [allowed values]}`` (scalar = equality, list = "in")."""
    if not filter:
        return {}
    if not isinstance(filter, dict):
        raise TypeError(f"filter must be a dict, got {type(filter).__name__}")
    out: dict[str, list[Any]] = {}
    for key, value in filter.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"filter key {key!r} must match {_KEY.pattern}")
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
        if not values:
            raise ValueError(f"filter[{key!r}] is an empty list: nothing can match")
        for v in values:
            if not isinstance(v, (str, int, bool)) or (isinstance(v, float) and not math.isfinite(v)):
                raise TypeError(f"filter[{key!r}] values must be str, int or bool, got {type(v).__name__}")
        out[key] = values
    return out


def validate_query(
    vector: np.ndarray | None, text: str | None, k: int, mode: str, dim: int
) -> np.ndarray | None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be a string or None, got {type(text).__name__}")
    if vector is not None:
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape != (dim,):
            raise ValueError(f"query vector must have {dim} dimensions, got {vector.shape[0]}")
        if not np.isfinite(vector).all():
            raise ValueError("query vector contains NaN or inf")
    if mode == "dense" and vector is None:
        raise ValueError("mode='dense' needs a query vector")
    if mode == "bm25" and not (text and text.strip()):
        raise ValueError("mode='bm25' needs a non-empty query text")
    if mode == "hybrid" and vector is None and not (text and text.strip()):
        raise ValueError("mode='hybrid' needs a query vector, a query text, or both")
    return vector


def rrf_fuse(
    dense: list[tuple[str, float]], lexical: list[tuple[str, float]], k: int
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion (Cormack et al., SIGIR 2009) of two ``[(id, score)]`` lists, best first."""
    parts = [Ranking.from_pairs("q", dense), Ranking.from_pairs("q", lexical)]
    return fuse_rankings(parts, method="rrf", rrf_k=RRF_K)[:k]


class Store(ABC):
    """Base class of the stores. Use :func:`medrank.store.open_store` to open one."""

    dim: int
    language: str

    # -- writes ----------------------------------------------------------------------------------
    @abstractmethod
    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[dict[str, Any] | None] | None = None,
    ) -> int:
        """Upsert items by id; durable when it returns. Returns the number of items written."""

    @abstractmethod
    def delete(self, ids: Sequence[str]) -> int:
        """Delete items by id; durable when it returns. Returns how many existed."""

    # -- reads -----------------------------------------------------------------------------------
    @abstractmethod
    def count(self) -> int:
        """Number of items in the store."""

    def search(
        self,
        vector: np.ndarray | None = None,
        text: str | None = None,
        k: int = 10,
        filter: dict[str, Any] | None = None,
        mode: str = "hybrid",
    ) -> list[Hit]:
        """Top-``k`` items for one query. ``mode``: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (RRF of both;
        a missing side is skipped). Dense scores are inner products (cosine for unit vectors), lexical
        scores are the backend's text-match score, hybrid scores are RRF scores."""
        vectors = None if vector is None else np.asarray(vector, dtype=np.float32).reshape(1, -1)
        return self.search_batch(vectors, [text], k=k, filter=filter, mode=mode)[0]

    def search_batch(
        self,
        vectors: np.ndarray | None,
        texts: Sequence[str | None] | None,
        k: int = 10,
        filter: dict[str, Any] | None = None,
        mode: str = "hybrid",
    ) -> list[list[Hit]]:
        """:meth:`search` for many queries (``vectors`` row ``i`` goes with ``texts[i]``)."""
        n = len(vectors) if vectors is not None else len(texts) if texts is not None else 0
        if n == 0:
            return []
        if vectors is not None and texts is not None and len(vectors) != len(texts):
            raise ValueError(f"got {len(vectors)} query vectors but {len(texts)} query texts")
        rows = [None] * n if vectors is None else list(np.asarray(vectors, dtype=np.float32))
        txts = [None] * n if texts is None else list(texts)
        queries = [validate_query(v, t, k, mode, self.dim) for v, t in zip(rows, txts, strict=True)]
        conditions = validate_filter(filter)
        return self._search_batch(queries, txts, k, conditions, mode)

    def _search_batch(
        self,
        vectors: list[np.ndarray | None],
        texts: list[str | None],
        k: int,
        conditions: dict[str, list[Any]],
        mode: str,
    ) -> list[list[Hit]]:
        dense_side = mode in ("dense", "hybrid")
        lexical_side = mode in ("bm25", "hybrid")
        depth = k if mode != "hybrid" else max(k, HYBRID_DEPTH)
        want_dense = [v if dense_side else None for v in vectors]
        want_text = [t if lexical_side and t and t.strip() else None for t in texts]
        dense = self._dense_search(want_dense, depth, conditions)
        lexical = self._lexical_search(want_text, depth, conditions)
        fused = []
        for d, lex in zip(dense, lexical, strict=True):
            if mode == "dense":
                fused.append(d[:k])
            elif mode == "bm25":
                fused.append(lex[:k])
            else:
                fused.append(rrf_fuse(d, lex, k))
        wanted = sorted({item for pairs in fused for item, _ in pairs})
        records = self._fetch(wanted)
        return [[Hit(i, float(s), *records[i]) for i, s in pairs if i in records] for pairs in fused]

    @abstractmethod
    def _dense_search(
        self, vectors: list[np.ndarray | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        """Per query ``[(id, inner product)]`` best first (``[]`` where the vector is ``None``)."""

    @abstractmethod
    def _lexical_search(
        self, texts: list[str | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        """Per query ``[(id, lexical score)]`` best first, positive scores only (``[]`` for ``None``)."""

    @abstractmethod
    def _fetch(self, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """``{id: (text, metadata)}`` for the ids that exist."""

    # -- lifecycle -------------------------------------------------------------------------------
    def save(self) -> None:  # noqa: B027 - optional hook, PostgreSQL has nothing to do
        """Persist derived state (indexes). Writes are already durable; this only speeds up reopening."""

    @abstractmethod
    def close(self) -> None:
        """Release files/connections (saving derived state first where that helps)."""

    @classmethod
    def load(cls, uri: str, **kwargs: Any) -> Store:
        """Reopen an existing store: ``"embedded:/dir"`` / a directory path, or a ``postgresql://`` DSN."""
        from medrank.store import open_store

        return open_store(uri, create=False, **kwargs)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.count()
