"""Stores for the service: items ``(id, text, vector, metadata)`` with dense, BM25 and hybrid search.

Two backends behind one interface (:class:`Store`):

* :class:`EmbeddedStore` (``"embedded:/path/dir"`` or a plain path) — faiss + BM25 + SQLite in one
  directory, zero set-up, crash-safe.
* :class:`PgVectorStore` (``"postgresql://user@host:port/db?collection=name"``) — PostgreSQL +
  pgvector (HNSW) + PostgreSQL full-text search, for collections beyond one machine's memory and
  for many service replicas sharing one store.

See ``docs/store.md`` for formats, the crash-safety argument and the Dask bulk-encoding path.
"""

from __future__ import annotations

from typing import Any

from medrank.store.base import STORE_FORMAT_VERSION, Hit, Store, StoreFormatError
from medrank.store.embedded import EmbeddedStore

__all__ = [
    "STORE_FORMAT_VERSION",
    "EmbeddedStore",
    "Hit",
    "PgVectorStore",
    "Store",
    "StoreFormatError",
    "open_store",
]


def __getattr__(name: str) -> Any:
    # psycopg is only imported when the PostgreSQL backend is used.
    if name == "PgVectorStore":
        from medrank.store.pgvector import PgVectorStore

        return PgVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_postgres_uri(uri: str) -> bool:
    return uri.startswith(("postgresql://", "postgres://"))


def open_store(uri: str, dim: int | None = None, language: str | None = None, **options: Any) -> Store:
    """Open (or create) a store.

    Args:
        uri: ``"embedded:/path/dir"`` (or just a directory path) for the embedded store;
            ``"postgresql://user@host:port/db?collection=name"`` for PostgreSQL + pgvector.
        dim: vector dimension; required to create a store, checked against an existing one.
        language: lexical tokenisation, ``"en"``, ``"zh"`` or ``"auto"``; fixed when the store is created.
        options: backend options, e.g. ``index="hnsw"``, ``ef_search=128``, ``read_only=True``,
            ``create=False`` (embedded) or ``hnsw_m=16``, ``ef_search=100``, ``pool_size=4`` (pgvector).
    """
    if not isinstance(uri, str) or not uri:
        raise ValueError(f"store uri must be a non-empty string, got {uri!r}")
    if is_postgres_uri(uri):
        from medrank.store.pgvector import PgVectorStore

        return PgVectorStore(uri, dim=dim, language=language, **options)
    path = uri.removeprefix("embedded:")
    if "://" in path:
        raise ValueError(f"unknown store uri scheme in {uri!r}: use 'embedded:/dir' or 'postgresql://…'")
    return EmbeddedStore(path, dim=dim, language=language, **options)
