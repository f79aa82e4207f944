"""The embedded store: one directory, zero set-up.

Layout (``format_version`` 1)::

    DIR/manifest.json          type, format_version, dim, language, index settings, current snapshot
    DIR/store.sqlite           items(label, id, text, metadata, vector, seq) + state(seq, next_label); WAL
    DIR/snapshots/seq-N/       vectors.faiss (IndexIDMap2 over flat IP or HNSW), bm25/ (optional),
                               snapshot.json
    DIR/store.lock             flock held by the one writer

**SQLite is the source of truth.** ``add`` and ``delete`` run in one SQLite
transaction that commits (``synchronous=FULL``) before they return, so an
acknowledged write survives ``kill -9`` and power loss. The faiss and BM25 indexes
are *derived*: :meth:`EmbeddedStore.save` writes them as a new snapshot directory
(temp dir + rename, fsynced) and then atomically repoints ``manifest.json`` at it,
so a crash at any point leaves the previous snapshot intact. On open, the snapshot
is reconciled with SQLite: faiss labels are SQLite row labels that are never
reused (an upsert gets a new label), so ``labels in faiss − live labels`` are
removed (flat) or masked (HNSW cannot remove) and ``live − in faiss`` are added
from the stored vectors. A missing or unreadable snapshot is rebuilt from SQLite.
The BM25 index (idf depends on the whole corpus) is rebuilt lazily after writes,
on the first lexical query, and is reused from the snapshot when the snapshot is
as new as the database.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from medrank.index.bm25 import BM25Index
from medrank.index.topk import topk_positive, topk_stable
from medrank.store.base import (
    LANGUAGES,
    STORE_FORMAT_VERSION,
    Store,
    StoreFormatError,
    validate_items,
)
from medrank.utils.cpu import native_bf16
from medrank.utils.io import atomic_dir, atomic_write_json

logger = logging.getLogger(__name__)

STORE_TYPE = "medrank-embedded-store"
FACTORIES = ("flat", "hnsw")
# Below this many filter matches a filtered dense query is answered exactly from the stored vectors
# (an HNSW walk restricted to a small subset loses recall); above it the graph search uses an ID filter.
EXACT_FILTER_MAX = 20_000
#: flat indexes at least this large are scanned in bf16 first where the CPU has it natively (below, float32 is as quick)
BF16_SCAN_MIN = 4096
#: candidates per wanted hit that the bf16 scan passes to the float32 rescoring
BF16_CANDIDATES = 4
_SQL_CHUNK = 900  # SQLite's default limit on bound parameters is 999

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    label INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    vector BLOB NOT NULL,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _chunks(seq: Sequence[Any], size: int = _SQL_CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def _filter_sql(conditions: dict[str, list[Any]]) -> tuple[str, list[Any]]:
    """``WHERE`` clause over the JSON metadata column (keys were validated as plain names)."""
    clauses, params = [], []
    for key, values in conditions.items():
        path = f'$."{key}"'
        ors = []
        for v in values:
            if isinstance(v, bool):
                # json_extract gives 1/0 for JSON true/false; also check the JSON type so 1 != true.
                ors.append("(json_type(metadata, ?) = ? )")
                params.extend([path, "true" if v else "false"])
            elif isinstance(v, int):
                ors.append("(json_type(metadata, ?) = 'integer' AND json_extract(metadata, ?) = ?)")
                params.extend([path, path, v])
            else:
                ors.append("(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)")
                params.extend([path, path, v])
        clauses.append("(" + " OR ".join(ors) + ")")
    return " AND ".join(clauses), params


class EmbeddedStore(Store):
    """faiss + BM25 + SQLite in one directory. Open with :func:`medrank.store.open_store`.

    Args:
        path: the store directory (created when ``create`` and it does not hold a store yet).
        dim: vector dimension (required to create; checked against the store when given).
        language: BM25 tokenisation, ``"en"``, ``"zh"`` or ``"auto"`` (fixed at creation).
        index: ``"flat"`` (exact inner product, default) or ``"hnsw"`` (fixed at creation).
        hnsw_m, ef_construction: HNSW graph parameters (creation only).
        ef_search: HNSW search breadth (may be changed per open).
        read_only: open without the writer lock; ``add``/``delete``/``save`` raise.
        create: allow creating a new store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        dim: int | None = None,
        language: str | None = None,
        index: str | None = None,
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int | None = None,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._lock_fh: Any = None
        self._closed = False
        manifest_path = self.path / "manifest.json"
        if not manifest_path.exists() and (self.path / "store.sqlite").exists():
            self._recover_manifest()
        if manifest_path.exists():
            manifest = self._read_manifest()
            if dim is not None and int(dim) != manifest["dim"]:
                raise StoreFormatError(f"{self.path}: store has dim {manifest['dim']}, asked for {dim}")
            if language is not None and language != manifest["language"]:
                logger.warning(
                    "store %s was built for language %r; ignoring %r",
                    self.path,
                    manifest["language"],
                    language,
                )
            if index is not None and index != manifest["index"]["factory"]:
                raise StoreFormatError(
                    f"{self.path}: store uses a {manifest['index']['factory']!r} index, asked for {index!r}"
                )
        else:
            if not create:
                raise StoreFormatError(f"{self.path} is not a medrank store (no manifest.json)")
            if read_only:
                raise StoreFormatError(f"{self.path}: cannot create a store read-only")
            if dim is None or int(dim) < 1:
                raise ValueError("dim (a positive int) is required to create a store")
            language = language or "auto"
            if language not in LANGUAGES:
                raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
            index = index or "flat"
            if index not in FACTORIES:
                raise ValueError(f"index must be one of {FACTORIES}, got {index!r}")
            if self.path.exists() and any(p.name not in ("store.lock",) for p in self.path.iterdir()):
                raise StoreFormatError(f"{self.path} exists, is not empty and holds no medrank store")
            manifest = {
                "type": STORE_TYPE,
                "format_version": STORE_FORMAT_VERSION,
                "dim": int(dim),
                "language": language,
                "index": {
                    "factory": index,
                    "hnsw_m": int(hnsw_m),
                    "ef_construction": int(ef_construction),
                    "ef_search": int(ef_search or 128),
                },
                "snapshot": None,
                "snapshot_seq": None,
            }
            self.path.mkdir(parents=True, exist_ok=True)
        self.manifest = manifest
        self.dim = int(manifest["dim"])
        self.language = manifest["language"]
        self.factory = manifest["index"]["factory"]
        self.ef_search = int(ef_search or manifest["index"]["ef_search"])
        if not read_only:
            self._acquire_writer_lock()
        try:
            self._open_db()
            if not manifest_path.exists():
                atomic_write_json(manifest_path, manifest)  # last step of creation: now it is a store
            self._load_derived()
        except BaseException:
            self._release()
            raise

    # -- opening ---------------------------------------------------------------------------------
    def _read_manifest(self) -> dict[str, Any]:
        path = self.path / "manifest.json"
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreFormatError(f"{path}: unreadable manifest ({exc})") from exc
        if manifest.get("type") != STORE_TYPE:
            raise StoreFormatError(
                f"{self.path} is not an embedded medrank store (type {manifest.get('type')!r})"
            )
        version = manifest.get("format_version")
        if version != STORE_FORMAT_VERSION:
            raise StoreFormatError(
                f"{self.path}: store format version {version!r} is not supported (this medrank reads "
                f"{STORE_FORMAT_VERSION}); re-ingest into a new store or use the medrank version that wrote it"
            )
        return manifest

    def _recover_manifest(self) -> None:
        """A crash between creating store.sqlite and writing manifest.json: rebuild it from SQLite."""
        conn = sqlite3.connect(self.path / "store.sqlite")
        try:
            state = dict(conn.execute("SELECT key, value FROM state").fetchall())
        except sqlite3.DatabaseError as exc:
            raise StoreFormatError(
                f"{self.path}: store.sqlite without manifest.json and unreadable ({exc})"
            ) from exc
        finally:
            conn.close()
        if "manifest" not in state:
            raise StoreFormatError(f"{self.path}: store.sqlite without manifest.json")
        atomic_write_json(self.path / "manifest.json", json.loads(state["manifest"]))

    def _acquire_writer_lock(self) -> None:
        self._lock_fh = open(self.path / "store.lock", "a+")  # noqa: SIM115 - held for the store's life
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            self._lock_fh.close()
            self._lock_fh = None
            raise RuntimeError(
                f"{self.path} is open for writing elsewhere (one writer at a time); "
                "close it there or open with read_only=True"
            ) from exc

    def _open_db(self) -> None:
        db = self.path / "store.sqlite"
        if self.read_only:
            self.conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        else:
            self.conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            # FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss too.
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(_SCHEMA)
            manifest = {**self.manifest, "snapshot": None, "snapshot_seq": None}
            self.conn.execute(
                "INSERT OR IGNORE INTO state VALUES ('seq', '0'), ('next_label', '0'), ('manifest', ?)",
                (json.dumps(manifest),),
            )
        try:
            state = dict(self.conn.execute("SELECT key, value FROM state").fetchall())
        except sqlite3.DatabaseError as exc:
            raise StoreFormatError(f"{db}: unreadable ({exc})") from exc
        self._seq = int(state.get("seq", 0))

    def _new_faiss(self) -> Any:
        import faiss

        cfg = self.manifest["index"]
        if self.factory == "hnsw":
            inner = faiss.IndexHNSWFlat(self.dim, cfg["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = cfg["ef_construction"]
            inner.hnsw.efSearch = self.ef_search
        else:
            inner = faiss.IndexFlatIP(self.dim)
        return faiss.IndexIDMap2(inner)

    def _load_derived(self) -> None:
        """Load the snapshot named by the manifest and reconcile it with SQLite (see module doc)."""
        import faiss

        self.faiss_index = None
        self._bm25: BM25Index | None = None
        self._bm25_labels = np.zeros(0, dtype=np.int64)
        self._bm25_seq = -1
        #: the flat vectors in bf16 for :meth:`_flat_search_batch`, keyed by (seq, count)
        self._bf16_vectors: tuple[tuple[int, int], Any] | None = None
        self._tombstones = np.zeros(0, dtype=np.int64)
        snap = self.manifest.get("snapshot")
        snap_dir = self.path / snap if snap else None
        if snap_dir is not None:
            try:
                index = faiss.read_index(str(snap_dir / "vectors.faiss"))
                if index.d != self.dim:
                    raise StoreFormatError(f"snapshot has dim {index.d}")
                if not hasattr(index, "id_map"):
                    raise StoreFormatError("snapshot is not an id-mapped faiss index")
                self.faiss_index = index
                if self.factory == "hnsw":
                    faiss.downcast_index(index.index).hnsw.efSearch = self.ef_search
                info = json.loads((snap_dir / "snapshot.json").read_text(encoding="utf-8"))
                if info.get("bm25") and info["seq"] == self._seq:
                    self._bm25 = BM25Index.load(snap_dir / "bm25")  # type: ignore[assignment]
                    self._bm25_labels = np.load(snap_dir / "bm25_labels.npy")
                    self._bm25_seq = self._seq
            except Exception as exc:  # a damaged snapshot is only a cache: rebuild from SQLite
                logger.warning("snapshot %s unusable (%s); rebuilding the index from SQLite", snap_dir, exc)
                self.faiss_index = None
                self._bm25 = None
        if self.faiss_index is None:
            self.faiss_index = self._new_faiss()
        self._reconcile()

    def _reconcile(self) -> None:
        import faiss

        live = np.fromiter((r[0] for r in self.conn.execute("SELECT label FROM items")), dtype=np.int64)
        in_index = faiss.vector_to_array(self.faiss_index.id_map).astype(np.int64)
        extra = np.setdiff1d(in_index, live, assume_unique=True)
        missing = np.setdiff1d(live, in_index, assume_unique=True)
        if len(extra):
            self._remove_labels(extra)
        if len(missing):
            logger.info("catching up %d vectors from SQLite into the faiss index", len(missing))
            wanted = set(missing.tolist())
            cur = self.conn.execute(
                "SELECT label, vector FROM items WHERE label >= ? ORDER BY label", (int(missing.min()),)
            )
            while rows := cur.fetchmany(20_000):
                rows = [r for r in rows if r[0] in wanted]
                if rows:
                    labels = np.array([r[0] for r in rows], dtype=np.int64)
                    vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, self.dim)
                    self.faiss_index.add_with_ids(vecs, labels)

    def _remove_labels(self, labels: np.ndarray) -> None:
        if not len(labels):
            return
        if self.factory == "hnsw":  # faiss HNSW graphs cannot drop nodes: mask them at search time
            self._tombstones = np.union1d(self._tombstones, labels)
        else:
            self.faiss_index.remove_ids(np.ascontiguousarray(labels, dtype=np.int64))

    # -- writes ----------------------------------------------------------------------------------
    def _require_writable(self) -> None:
        if self._closed:
            raise RuntimeError("the store is closed")
        if self.read_only:
            raise RuntimeError(f"{self.path} was opened read-only")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _state(self, key: str) -> int:
        return int(self.conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()[0])

    def _old_labels(self, ids: Sequence[str]) -> list[int]:
        out: list[int] = []
        for chunk in _chunks(ids):
            q = f"SELECT label FROM items WHERE id IN ({','.join('?' * len(chunk))})"
            out.extend(r[0] for r in self.conn.execute(q, list(chunk)))
        return out

    def add(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: np.ndarray,
        metadata: Sequence[dict[str, Any] | None] | None = None,
    ) -> int:
        ids, texts, vectors, metas = validate_items(ids, texts, vectors, metadata, self.dim)
        if not ids:
            return 0
        with self._lock:
            self._require_writable()
            with self._transaction() as conn:
                seq = self._state("seq") + 1
                first = self._state("next_label")
                old = self._old_labels(ids)
                for chunk in _chunks(ids):
                    conn.execute(f"DELETE FROM items WHERE id IN ({','.join('?' * len(chunk))})", list(chunk))
                labels = np.arange(first, first + len(ids), dtype=np.int64)
                conn.executemany(
                    "INSERT INTO items (label, id, text, metadata, vector, seq) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        (int(lab), i, t, json.dumps(m, ensure_ascii=False), vectors[row].tobytes(), seq)
                        for row, (lab, i, t, m) in enumerate(zip(labels, ids, texts, metas, strict=True))
                    ),
                )
                conn.execute("UPDATE state SET value = ? WHERE key = 'seq'", (str(seq),))
                conn.execute("UPDATE state SET value = ? WHERE key = 'next_label'", (str(first + len(ids)),))
            # Committed: from here on the write is durable; the in-memory indexes follow.
            self._seq = seq
            self._remove_labels(np.array(old, dtype=np.int64))
            self.faiss_index.add_with_ids(vectors, labels)
        return len(ids)

    def delete(self, ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        with self._lock:
            self._require_writable()
            with self._transaction() as conn:
                old = self._old_labels(ids)
                if old:
                    for chunk in _chunks(ids):
                        conn.execute(
                            f"DELETE FROM items WHERE id IN ({','.join('?' * len(chunk))})", list(chunk)
                        )
                    seq = self._state("seq") + 1
                    conn.execute("UPDATE state SET value = ? WHERE key = 'seq'", (str(seq),))
            if old:
                self._seq = seq
                self._remove_labels(np.array(old, dtype=np.int64))
        return len(old)

    # -- reads -----------------------------------------------------------------------------------
    def count(self) -> int:
        with self._lock:
            return int(self.conn.execute("SELECT count(*) FROM items").fetchone()[0])

    def _allowed_labels(self, conditions: dict[str, list[Any]]) -> np.ndarray:
        where, params = _filter_sql(conditions)
        rows = self.conn.execute(f"SELECT label FROM items WHERE {where}", params)
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def _labels_to_ids(self, labels: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        uniq = list({int(x) for x in labels})
        for chunk in _chunks(uniq):
            q = f"SELECT label, id FROM items WHERE label IN ({','.join('?' * len(chunk))})"
            out.update(self.conn.execute(q, list(chunk)).fetchall())
        return out

    def _search_params(self, selector: Any, depth: int) -> Any:
        import faiss

        if self.factory == "hnsw":
            return faiss.SearchParametersHNSW(sel=selector, efSearch=max(self.ef_search, depth))
        return faiss.SearchParameters(sel=selector) if selector is not None else None

    def _dense_search(
        self, vectors: list[np.ndarray | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        import faiss

        rows = [i for i, v in enumerate(vectors) if v is not None]
        out: list[list[tuple[str, float]]] = [[] for _ in vectors]
        with self._lock:
            if not rows or self.faiss_index.ntotal == 0:
                return out
            queries = np.stack([vectors[i] for i in rows]).astype(np.float32)
            if conditions:
                allowed = self._allowed_labels(conditions)
                if not len(allowed):
                    return out
                if self.factory == "hnsw" and len(allowed) <= EXACT_FILTER_MAX:
                    # Exact over the few matching vectors (an HNSW walk over a sparse subset loses recall).
                    vecs = self.faiss_index.reconstruct_batch(allowed)
                    scores_all = queries @ vecs.T
                    n = min(depth, len(allowed))
                    idx = np.stack([topk_stable(s, n) for s in scores_all])
                    labels = allowed[idx]
                    scores = np.take_along_axis(scores_all, idx, axis=1)
                else:
                    sel = faiss.IDSelectorBatch(allowed)
                    scores, labels = self.faiss_index.search(
                        queries, depth, params=self._search_params(sel, depth)
                    )
            else:
                sel = None
                if len(self._tombstones):
                    sel = faiss.IDSelectorNot(faiss.IDSelectorBatch(self._tombstones))
                if sel is None and self.factory == "flat" and len(queries) > 1:
                    scores, labels = self._flat_search_batch(queries, depth)
                else:
                    scores, labels = self.faiss_index.search(queries, depth, params=self._search_params(sel, depth))
            names = self._labels_to_ids([x for x in labels.ravel() if x >= 0])
        for row, q in enumerate(rows):
            out[q] = [
                (names[int(lab)], float(s))
                for lab, s in zip(labels[row], scores[row], strict=True)
                if lab >= 0 and int(lab) in names
            ]
        return out

    def _flat_search_batch(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact inner-product top-``depth`` of a few queries in one matrix product over the flat index's own
        vectors (read in place): faiss scans the vectors once per query below twenty queries, and a complaint
        asks a handful (its clauses and its whole text) at once.

        On CPUs with native bf16 (AMX) and above :data:`BF16_SCAN_MIN` vectors, the scan reads a bf16 copy
        of the vectors (half the bytes, and the product runs on the matrix units): its top candidates, a few
        times ``depth``, are then scored again in float32, so the answer is the exact one unless a float32
        top-``depth`` entry falls behind that many others by bf16 rounding (about 1e-3 of a cosine)."""
        import faiss

        flat = faiss.downcast_index(self.faiss_index.index)
        n = int(flat.ntotal)
        vectors = faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)
        ids = faiss.vector_to_array(self.faiss_index.id_map).astype(np.int64)
        k = min(depth, n)
        if n >= BF16_SCAN_MIN and native_bf16():
            rows = self._bf16_candidates(vectors, queries, min(n, BF16_CANDIDATES * k + 32))
            exact = np.einsum("qcd,qd->qc", vectors[rows], queries)
            pick = np.stack([topk_stable(row, k) for row in exact])  # rows ascend: ties keep index order
            idx, top = np.take_along_axis(rows, pick, axis=1), np.take_along_axis(exact, pick, axis=1)
        else:
            scores_all = (vectors @ queries.T).T
            idx = np.stack([topk_stable(row, k) for row in scores_all])
            top = np.take_along_axis(scores_all, idx, axis=1)
        scores = np.full((len(queries), depth), -np.inf, dtype=np.float32)
        labels = np.full((len(queries), depth), -1, dtype=np.int64)
        scores[:, :k] = top
        labels[:, :k] = ids[idx]
        return scores, labels

    def _bf16_candidates(self, vectors: np.ndarray, queries: np.ndarray, count: int) -> np.ndarray:
        """Rows of the ``count`` best bf16 scores per query, ascending (the bf16 copy is made once per index state)."""
        import torch

        key = (self._seq, len(vectors))
        if self._bf16_vectors is None or self._bf16_vectors[0] != key:
            self._bf16_vectors = (key, torch.from_numpy(np.ascontiguousarray(vectors)).to(torch.bfloat16))
        approx = torch.mm(torch.from_numpy(queries).to(torch.bfloat16), self._bf16_vectors[1].T).float()
        return np.sort(torch.topk(approx, count, dim=1).indices.numpy(), axis=1)

    def _ensure_bm25(self) -> BM25Index | None:
        if self._bm25_seq == self._seq:
            return self._bm25
        rows = self.conn.execute("SELECT label, id, text FROM items ORDER BY label").fetchall()
        labels = np.array([r[0] for r in rows], dtype=np.int64)
        bm25 = None
        if rows:
            bm25 = BM25Index(language=self.language)
            try:
                bm25.build([r[1] for r in rows], [r[2] for r in rows])
            except Exception as exc:  # e.g. a corpus with no indexable token at all
                logger.warning("BM25 index not built (%s); lexical search returns nothing", exc)
                bm25 = None
        self._bm25, self._bm25_labels, self._bm25_seq = bm25, labels, self._seq
        return bm25

    def _lexical_search(
        self, texts: list[str | None], depth: int, conditions: dict[str, list[Any]]
    ) -> list[list[tuple[str, float]]]:
        out: list[list[tuple[str, float]]] = [[] for _ in texts]
        if all(t is None for t in texts):
            return out
        with self._lock:
            bm25 = self._ensure_bm25()
            if bm25 is None:
                return out
            mask = None
            if conditions:
                mask = np.isin(self._bm25_labels, self._allowed_labels(conditions))
            for qi, text in enumerate(texts):
                if text is None:
                    continue
                scores = bm25.query_scores(text)
                if mask is not None:
                    scores = np.where(mask, scores, 0.0)
                idx = topk_positive(scores, depth)  # no shared token = no lexical match
                out[qi] = [(bm25.entry_ids[i], float(scores[i])) for i in idx]
        return out

    def _fetch(self, ids: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        with self._lock:
            for chunk in _chunks(ids):
                q = f"SELECT id, text, metadata FROM items WHERE id IN ({','.join('?' * len(chunk))})"
                for item_id, text, meta in self.conn.execute(q, list(chunk)):
                    out[item_id] = (text, json.loads(meta))
        return out

    # -- persistence -----------------------------------------------------------------------------
    def save(self) -> None:
        """Write the faiss (and, when current, BM25) index as a new snapshot, atomically.

        Crash-safe at every step: the snapshot directory appears by rename, then
        ``manifest.json`` is replaced by rename; older snapshots are removed last.
        """
        import faiss

        with self._lock:
            self._require_writable()
            if self.manifest.get("snapshot_seq") == self._seq and self.manifest.get("snapshot"):
                return
            if self.factory == "hnsw" and len(self._tombstones) > 0.1 * max(1, self.faiss_index.ntotal):
                self._compact()
            name = f"snapshots/seq-{self._seq:012d}"
            bm25_current = self._bm25 is not None and self._bm25_seq == self._seq
            with atomic_dir(self.path / name) as tmp:
                faiss.write_index(self.faiss_index, str(tmp / "vectors.faiss"))
                if bm25_current:
                    self._bm25.save(tmp / "bm25")  # type: ignore[union-attr]
                    np.save(tmp / "bm25_labels.npy", self._bm25_labels)
                info = {"seq": self._seq, "ntotal": int(self.faiss_index.ntotal), "bm25": bm25_current}
                (tmp / "snapshot.json").write_text(json.dumps(info) + "\n", encoding="utf-8")
            self.manifest = {**self.manifest, "snapshot": name, "snapshot_seq": self._seq}
            atomic_write_json(self.path / "manifest.json", self.manifest)
            for old in (self.path / "snapshots").iterdir():
                if old.name != Path(name).name:
                    shutil.rmtree(old, ignore_errors=True)

    def _compact(self) -> None:
        """Rebuild the HNSW graph without masked (deleted/replaced) nodes."""
        self.faiss_index = self._new_faiss()
        self._tombstones = np.zeros(0, dtype=np.int64)
        self._reconcile()

    def close(self) -> None:
        """Save a snapshot if anything changed since the last one, then release the store."""
        with self._lock:
            if self._closed:
                return
            try:
                if not self.read_only:
                    self.save()
            finally:
                self._release()

    def _release(self) -> None:
        self._closed = True
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def __repr__(self) -> str:
        return f"EmbeddedStore({str(self.path)!r}, dim={self.dim}, index={self.factory!r}, language={self.language!r})"
