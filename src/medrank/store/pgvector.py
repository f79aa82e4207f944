"""The PostgreSQL + pgvector store: one table per collection, shared by any number of service replicas.

Schema (``format_version`` 1)::

    medrank_collections(name PK, dim, language, format_version, hnsw_m, ef_construction, created)
    medrank_items_<collection>(
        id text PRIMARY KEY, text text, metadata jsonb, embedding vector(dim), tsv tsvector)
      + HNSW index on embedding (vector_ip_ops: inner product = cosine for unit vectors)
      + GIN index on metadata (jsonb_path_ops: filters are jsonb containment, ``metadata @> '{"k": v}'``)
      + GIN index on tsv

Ingestion is a binary ``COPY`` into a temporary staging table followed by one
``INSERT … ON CONFLICT (id) DO UPDATE`` (upsert), in one transaction: ``add``
returns after ``COMMIT``, i.e. after PostgreSQL flushed its WAL, so an
acknowledged write survives a crash of the client or of the server. For a bulk
load, :meth:`PgVectorStore.bulk_load` drops the HNSW index and builds it once at
the end (much faster than maintaining the graph row by row); should the process
die in between, the next open recreates the missing index.

Lexical side: PostgreSQL full-text search, so that every replica sees the same
lexical index as the vectors (an embedded BM25 per replica would drift apart). The
text is tokenised in Python by the same :class:`~medrank.index.LexicalTokenizer`
as the embedded BM25 (English stemming, Chinese character uni+bigrams) and
stored as a ``tsvector`` literal with positions, bypassing PostgreSQL's parser
(whose notion of a letter depends on the server locale). Queries are an OR of the
query's tokens, ranked by ``ts_rank_cd`` (cover density) with log-length
normalisation — not BM25 (no idf), which is why hybrid search fuses ranks (RRF)
rather than scores.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import numpy as np

from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig
from medrank.store.base import LANGUAGES, STORE_FORMAT_VERSION, Store, StoreFormatError, validate_items

logger = logging.getLogger(__name__)

_COLLECTION = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_LEXEME = re.compile(r"^[^\W_]+$", re.UNICODE)
_MAX_POSITION = 16383  # PostgreSQL's largest tsvector position
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_COPY_BATCH = 5_000
# Options that configure medrank rather than the PostgreSQL connection.
_STORE_OPTIONS = {
    "collection": str,
    "hnsw_m": int,
    "ef_construction": int,
    "ef_search": int,
    "pool_size": int,
}


def parse_dsn(dsn: str) -> tuple[str, dict[str, Any]]:
    """Split ``postgresql://…?collection=x&ef_search=100&sslmode=…`` into (libpq DSN, medrank options)."""
    parts = urlsplit(dsn)
    opts: dict[str, Any] = {}
    keep = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _STORE_OPTIONS:
            try:
                opts[key] = _STORE_OPTIONS[key](value)
            except ValueError as exc:
                raise ValueError(
                    f"DSN option {key}={value!r} is not a valid {_STORE_OPTIONS[key].__name__}"
                ) from exc
        else:
            keep.append((key, value))
    # quote (%20), not quote_plus: libpq does not decode '+' as a space (e.g. in options=-c%20...)
    return urlunsplit(parts._replace(query=urlencode(keep, quote_via=quote))), opts


def tsvector_literal(tokens: Sequence[str]) -> str:
    """``'tok':1,3 'other':2`` — a tsvector with positions, built without PostgreSQL's parser."""
    positions: dict[str, list[int]] = {}
    for pos, tok in enumerate(tokens, 1):
        if pos > _MAX_POSITION:
            break
        if _LEXEME.match(tok) and len(tok.encode()) < 2000:
            positions.setdefault(tok, []).append(pos)
    return " ".join(f"'{tok}':{','.join(map(str, ps))}" for tok, ps in positions.items())


def tsquery_literal(tokens: Sequence[str]) -> str:
    """``'a' | 'b'`` — any query token matches (BM25-like OR semantics)."""
    uniq = dict.fromkeys(t for t in tokens if _LEXEME.match(t))
    return " | ".join(f"'{t}'" for t in uniq)


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def copy_binary_rows(
    ids: Sequence[str],
    texts: Sequence[str],
    lexes: Sequence[str],
    metas: Sequence[str],
    vectors: np.ndarray,
    header: bool = True,
    trailer: bool = True,
) -> bytes:
    """Rows ``(id text, text text, lex text, metadata jsonb, embedding vector)`` in COPY BINARY format.

    pgvector's binary ``vector``: int16 dim, int16 unused, then dim big-endian float4.
    jsonb's binary form is a version byte (1) followed by the JSON text.
    """
    n, dim = vectors.shape
    vec_bytes = np.ascontiguousarray(vectors, dtype=">f4").tobytes()
    vec_prefix = struct.pack("!ihh", 4 + 4 * dim, dim, 0)
    width = 4 * dim
    out = [_COPY_HEADER] if header else []
    for row in range(n):
        fields = [ids[row].encode(), texts[row].encode(), lexes[row].encode(), b"\x01" + metas[row].encode()]
        out.append(struct.pack("!h", 5))
        for f in fields:
            out.append(struct.pack("!i", len(f)))
            out.append(f)
        out.append(vec_prefix)
        out.append(vec_bytes[row * width : (row + 1) * width])
    if trailer:
        out.append(struct.pack("!h", -1))
    return b"".join(out)


class _Pool:
    """A small thread-safe pool of autocommit connections (at most ``size`` open at once)."""

    def __init__(self, dsn: str, size: int, connect_timeout: float) -> None:
        self.dsn = dsn
        self.connect_timeout = connect_timeout
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._all: list[Any] = []
        self._guard = threading.Lock()

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=int(self.connect_timeout))

    @contextmanager
    def connection(self) -> Iterator[Any]:
        self._slots.acquire()
        conn = None
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._connect()
                with self._guard:
                    self._all.append(conn)
            yield conn
        except BaseException:
            if conn is not None and (conn.broken or conn.closed):
                with self._guard:
                    self._all = [c for c in self._all if c is not conn]
                conn = None
            raise
        finally:
            if conn is not None and not conn.closed:
                self._idle.put(conn)
            self._slots.release()

    def close(self) -> None:
        with self._guard:
            for conn in self._all:
                conn.close()
            self._all = []


class PgVectorStore(Store):
    """A collection in PostgreSQL + pgvector. Open with :func:`medrank.store.open_store`.

    Args:
        dsn: ``postgresql://user[:password]@host:port/db?collection=name`` (``collection``, ``hnsw_m``,
            ``ef_construction``, ``ef_search``, ``pool_size`` may be given in the query string; other
            query parameters such as ``sslmode`` go to libpq).
        dim: vector dimension (required to create a collection; checked against an existing one).
        language: lexical tokenisation, ``"en"``, ``"zh"`` or ``"auto"`` (fixed at creation).
        collection: collection name (``[a-z][a-z0-9_]*``; default ``"medrank"``).
        hnsw_m, ef_construction: HNSW parameters (creation only). ef_search: HNSW search breadth.
        pool_size: connections kept for concurrent requests.
        create: allow creating the collection (and the ``vector`` extension).
    """

    def __init__(
        self,
        dsn: str,
        dim: int | None = None,
        language: str | None = None,
        collection: str | None = None,
        hnsw_m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 100,
        pool_size: int = 4,
        create: bool = True,
        connect_timeout: float = 10,
    ) -> None:
        libpq_dsn, opts = parse_dsn(dsn)
        collection = collection or opts.get("collection") or "medrank"
        if not _COLLECTION.match(collection):
            raise ValueError(f"collection name {collection!r} must match {_COLLECTION.pattern}")
        self.collection = collection
        self.table = f"medrank_items_{collection}"
        self.ef_search = int(opts.get("ef_search", ef_search))
        if not 1 <= self.ef_search <= 1000:
            raise ValueError(f"ef_search must be in [1, 1000] (pgvector's range), got {self.ef_search}")
        self._pool = _Pool(libpq_dsn, int(opts.get("pool_size", pool_size)), connect_timeout)
        self._closed = False
        try:
            self._open(
                dim,
                language,
                int(opts.get("hnsw_m", hnsw_m)),
                int(opts.get("ef_construction", ef_construction)),
                create,
            )
        except BaseException:
            self._pool.close()
            raise
        self.tokenizer = LexicalTokenizer(TokenizerConfig(language=self.language))  # type: ignore[arg-type]

    # -- schema ----------------------------------------------------------------------------------
    def _ident(self, suffix: str = "") -> Any:
        from psycopg import sql

        return sql.Identifier(self.table + suffix)

    def _open(
        self, dim: int | None, language: str | None, hnsw_m: int, ef_construction: int, create: bool
    ) -> None:
        from psycopg import errors, sql

        with self._pool.connection() as conn, conn.transaction():
            # Serialise creation across replicas opening the same collection at once.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('medrank_store'))")
            if create:
                try:
                    with conn.transaction():
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except errors.InsufficientPrivilege as exc:
                    raise StoreFormatError(
                        "the pgvector extension is not installed in this database and this user may not "
                        "create it: run CREATE EXTENSION vector as a superuser"
                    ) from exc
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS medrank_collections (name text PRIMARY KEY, dim int NOT NULL, "
                    "language text NOT NULL, format_version int NOT NULL, hnsw_m int NOT NULL, "
                    "ef_construction int NOT NULL, created timestamptz NOT NULL DEFAULT now())"
                )
            try:
                with conn.transaction():
                    row = conn.execute(
                        "SELECT dim, language, format_version, hnsw_m, ef_construction FROM medrank_collections "
                        "WHERE name = %s",
                        (self.collection,),
                    ).fetchone()
            except errors.UndefinedTable:
                row = None
            if row is None:
                if not create:
                    raise StoreFormatError(f"no medrank collection {self.collection!r} in this database")
                if dim is None or int(dim) < 1:
                    raise ValueError("dim (a positive int) is required to create a collection")
                language = language or "auto"
                if language not in LANGUAGES:
                    raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
                conn.execute(
                    "INSERT INTO medrank_collections (name, dim, language, format_version, hnsw_m, ef_construction) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (self.collection, int(dim), language, STORE_FORMAT_VERSION, hnsw_m, ef_construction),
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, text text NOT NULL, "
                        "metadata jsonb NOT NULL DEFAULT '{{}}', embedding vector({}) NOT NULL, "
                        "tsv tsvector NOT NULL)"
                    ).format(self._ident(), sql.Literal(int(dim)))
                )
                conn.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (metadata jsonb_path_ops)").format(
                        self._ident("_meta"), self._ident()
                    )
                )
                conn.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (tsv)").format(
                        self._ident("_tsv"), self._ident()
                    )
                )
                row = (int(dim), language, STORE_FORMAT_VERSION, hnsw_m, ef_construction)
            stored_dim, stored_language, version, self.hnsw_m, self.ef_construction = row
            if version != STORE_FORMAT_VERSION:
                raise StoreFormatError(
                    f"collection {self.collection!r} has store format version {version}; this medrank reads "
                    f"{STORE_FORMAT_VERSION}: re-ingest into a new collection"
                )
            if dim is not None and int(dim) != stored_dim:
                raise StoreFormatError(
                    f"collection {self.collection!r} has dim {stored_dim}, asked for {dim}"
                )
            if language is not None and language != stored_language:
                logger.warning(
                    "collection %r uses language %r; ignoring %r", self.collection, stored_language, language
                )
            self.dim, self.language = int(stored_dim), stored_language
        if not self.has_index():
            # Missing after a bulk load that died before its index build: rebuild it now.
            logger.info("collection %r has no HNSW index: building it", self.collection)
            self.build_index()

    def has_index(self) -> bool:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT to_regclass(%s)", (self.table + "_hnsw",)).fetchone()
        return row[0] is not None

    def build_index(self, maintenance_work_mem: str = "1GB", parallel_workers: int = 2) -> float:
        """Create the HNSW index if it is missing; returns the seconds it took (0 when it existed)."""
        from psycopg import sql

        if not re.match(r"^\d+(kB|MB|GB)$", maintenance_work_mem):
            raise ValueError(f"maintenance_work_mem must look like '512MB', got {maintenance_work_mem!r}")
        if self.has_index():
            return 0.0
        start = time.perf_counter()
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem))
            )
            conn.execute(
                sql.SQL("SET LOCAL max_parallel_maintenance_workers = {}").format(
                    sql.Literal(int(parallel_workers))
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_ip_ops) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(
                    self._ident("_hnsw"),
                    self._ident(),
                    sql.Literal(self.hnsw_m),
                    sql.Literal(self.ef_construction),
                )
            )
        return time.perf_counter() - start

    def drop_index(self) -> None:
        from psycopg import sql

        with self._pool.connection() as conn:
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(self._ident("_hnsw")))

    @contextmanager
    def bulk_load(self, **build_options: Any) -> Iterator[PgVectorStore]:
        """Drop the HNSW index, yield for many :meth:`add` calls, then build the index once."""
        self.drop_index()
        yield self
        self.build_index(**build_options)

    def drop_collection(self) -> None:
        """Delete the collection's table and its registry row (irreversible)."""
        from psycopg import sql

        with self._pool.connection() as conn, conn.transaction():
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._ident()))
            conn.execute("DELETE FROM medrank_collections WHERE name = %s", (self.collection,))

    # -- writes ----------------------------------------------------------------------------------
    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError("the store is closed")

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[dict[str, Any] | None] | None = None,
    ) -> int:
        from psycopg import sql

        ids, texts, vectors, metas = validate_items(ids, texts, vectors, metadata, self.dim)
        self._require_open()
        if not ids:
            return 0
        for i, t in enumerate(texts):
            if "\x00" in t or "\x00" in ids[i]:
                raise ValueError(f"item {ids[i]!r}: PostgreSQL text cannot hold NUL characters")
        lexes = [tsvector_literal(self.tokenizer(t)) for t in texts]
        meta_json = [json.dumps(m, ensure_ascii=False) for m in metas]
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS medrank_staging (id text, text text, lex text, metadata jsonb, "
                "embedding vector) ON COMMIT DELETE ROWS"
            )
            with conn.cursor() as cur:
                with cur.copy(
                    "COPY medrank_staging (id, text, lex, metadata, embedding) FROM STDIN (FORMAT BINARY)"
                ) as cp:
                    # Streamed in batches so a large add never holds the whole COPY payload in memory.
                    for s in range(0, len(ids), _COPY_BATCH):
                        e = s + _COPY_BATCH
                        block = copy_binary_rows(
                            ids[s:e],
                            texts[s:e],
                            lexes[s:e],
                            meta_json[s:e],
                            vectors[s:e],
                            header=s == 0,
                            trailer=e >= len(ids),
                        )
                        cp.write(block)
                cur.execute(
                    sql.SQL(
                        "INSERT INTO {} (id, text, metadata, embedding, tsv) "
                        "SELECT id, text, metadata, embedding, lex::tsvector FROM medrank_staging "
                        "ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, "
                        "embedding = EXCLUDED.embedding, tsv = EXCLUDED.tsv"
                    ).format(self._ident())
                )
        return len(ids)

    def delete(self, ids: Sequence[str]) -> int:
        from psycopg import sql

        self._require_open()
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        with self._pool.connection() as conn:
            cur = conn.execute(sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(self._ident()), (ids,))
            return int(cur.rowcount)

    # -- reads -----------------------------------------------------------------------------------
    def count(self) -> int:
        from psycopg import sql

        self._require_open()
        with self._pool.connection() as conn:
            return int(conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self._ident())).fetchone()[0])

    @staticmethod
    def _filter_sql(conditions: dict[str, list[Any]]) -> tuple[Any, list[Any]]:
        from psycopg import sql
        from psycopg.types.json import Jsonb

        if not conditions:
            return sql.SQL("TRUE"), []
        clauses, params = [], []
        for key, values in conditions.items():
            clauses.append(
                sql.SQL("(") + sql.SQL(" OR ").join([sql.SQL("metadata @> %s")] * len(values)) + sql.SQL(")")
            )
            params.extend(Jsonb({key: v}) for v in values)
        return sql.SQL(" AND ").join(clauses), params

    def _dense_search(
        self, vectors: list[np.ndarray | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        from psycopg import sql

        out: list[list[tuple[str, float]]] = [[] for _ in vectors]
        if all(v is None for v in vectors):
            return out
        self._require_open()
        where, params = self._filter_sql(conditions)
        query = sql.SQL(
            "SELECT id, -(embedding <#> %s::vector) FROM {} WHERE {} ORDER BY embedding <#> %s::vector LIMIT %s"
        ).format(self._ident(), where)
        with self._pool.connection() as conn, conn.transaction():
            # pgvector returns at most ef_search rows from an HNSW scan: keep it >= the depth asked for.
            conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                    sql.Literal(min(1000, max(self.ef_search, depth)))
                )
            )
            if conditions:  # keep scanning the graph until enough rows pass the filter (pgvector >= 0.8)
                conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            for qi, v in enumerate(vectors):
                if v is None:
                    continue
                lit = vector_literal(v)
                rows = conn.execute(query, [lit, *params, lit, depth]).fetchall()
                out[qi] = [(r[0], float(r[1])) for r in rows]
        return out

    def _lexical_search(
        self, texts: list[str | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        from psycopg import sql

        out: list[list[tuple[str, float]]] = [[] for _ in texts]
        queries = [(qi, tsquery_literal(self.tokenizer(t))) for qi, t in enumerate(texts) if t is not None]
        queries = [(qi, q) for qi, q in queries if q]
        if not queries:
            return out
        self._require_open()
        where, params = self._filter_sql(conditions)
        query = sql.SQL(
            "SELECT id, ts_rank_cd(tsv, q, 1) AS score FROM {}, CAST(%s AS tsquery) AS q "
            " WHERE tsv @@ q AND {} ORDER BY score DESC, id LIMIT %s"
        ).format(self._ident(), where)
        with self._pool.connection() as conn:
            for qi, tsq in queries:
                rows = conn.execute(query, [tsq, *params, depth]).fetchall()
                out[qi] = [(r[0], float(r[1])) for r in rows if r[1] > 0]
        return out

    def _fetch(self, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        from psycopg import sql

        if not ids:
            return {}
        with self._pool.connection() as conn:
            rows = conn.execute(
                sql.SQL("SELECT id, text, metadata FROM {} WHERE id = ANY(%s)").format(self._ident()), (ids,)
            ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    # -- lifecycle -------------------------------------------------------------------------------
    def save(self) -> None:
        """Nothing to do: every ``add``/``delete`` is committed before it returns."""

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    def __repr__(self) -> str:
        return f"PgVectorStore(collection={self.collection!r}, dim={self.dim}, language={self.language!r})"
