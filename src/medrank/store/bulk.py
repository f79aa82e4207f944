"""Bulk encoding on ``dask.distributed``: encode corpus shards in parallel workers, write to a store.

Each worker loads the encoder itself (once per worker process, by name or path — so
the name must resolve on every worker machine: an alias such as ``"minilm"`` or a
path on a shared file system) and encodes the shards it is given. Results are
written by:

* the driver (this process), for the embedded store, which has a single writer;
* the workers themselves, for PostgreSQL + pgvector, which takes concurrent
  writers: vectors then never travel back through the driver.

On one machine, pass nothing (a ``LocalCluster`` on 127.0.0.1 is started and
stopped; its workers are processes, so a script must call this under
``if __name__ == "__main__":``) or your own ``Client``. On a multi-machine Dask cluster, pass the
scheduler address::

    encode_into_store(texts, ids, "minilm", "postgresql://…?collection=docs",
                      client="tcp://scheduler-host:8786")
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

_ENCODERS: dict[str, Any] = {}
_ENCODERS_LOCK = threading.Lock()


def _worker_encoder(encoder_name: str, torch_threads: int | None) -> Any:
    """The encoder, loaded once per worker process (threads of one process share it)."""
    with _ENCODERS_LOCK:
        if encoder_name not in _ENCODERS:
            from medrank.encoders import load_encoder

            if torch_threads:
                import torch

                torch.set_num_threads(torch_threads)
            _ENCODERS[encoder_name] = load_encoder(encoder_name)
        return _ENCODERS[encoder_name]


def encode_shard(
    encoder_name: str, texts: list[str], kind: str | None, batch_size: int, torch_threads: int | None
) -> np.ndarray:
    """Worker task: unit vectors ``(len(texts), dim)`` float32."""
    encoder = _worker_encoder(encoder_name, torch_threads)
    vectors = encoder.encode(texts, kind=kind, batch_size=batch_size, show_progress=False)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def encoder_dim(encoder_name: str, torch_threads: int | None) -> int:
    """Worker task: the encoder's output dimension."""
    return int(encode_shard(encoder_name, ["dimension probe"], None, 1, torch_threads).shape[1])


def encode_and_write_shard(
    encoder_name: str,
    store_uri: str,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]] | None,
    kind: str | None,
    batch_size: int,
    torch_threads: int | None,
) -> int:
    """Worker task: encode a shard and upsert it into a (PostgreSQL) store; returns the rows written."""
    from medrank.store import open_store

    vectors = encode_shard(encoder_name, texts, kind, batch_size, torch_threads)
    store = open_store(store_uri, create=False, pool_size=1)
    try:
        return store.add(ids, texts, vectors, metadata)
    finally:
        store.close()


def _client(client: Any) -> tuple[Any, Any]:
    """``(client, cluster_to_close)`` from a Client, a scheduler address, or None (local cluster)."""
    from distributed import Client, LocalCluster

    if client is None:
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        )
        return Client(cluster), cluster
    if isinstance(client, str):
        return Client(client), None
    return client, None


def encode_into_store(
    texts: Sequence[str],
    ids: Sequence[str],
    encoder_name: str,
    store_uri: str,
    client: Any = None,
    shards: int | None = None,
    metadata: Sequence[dict[str, Any] | None] | None = None,
    *,
    kind: str | None = "passage",
    language: str | None = None,
    batch_size: int = 64,
    shard_size: int = 2048,
    workers_write: bool | None = None,
    bulk: bool = False,
    torch_threads: int | None = 1,
    show_progress: bool = True,
) -> int:
    """Encode ``texts`` on a Dask cluster and upsert them (with ``ids``, ``metadata``) into a store.

    Args:
        texts, ids, metadata: the corpus (``metadata`` optional, one dict per text).
        encoder_name: an encoder alias or model folder that every worker can load.
        store_uri: as for :func:`medrank.store.open_store`; created (dimension from the encoder) when missing.
        client: a ``distributed.Client``, a scheduler address (``"tcp://host:8786"``), or ``None``
            for a 2-worker ``LocalCluster`` on 127.0.0.1 started for this call.
        shards: number of shards (default: ``ceil(len(texts) / shard_size)``).
        kind: encoder text kind (``"passage"``, ``"query"`` or ``None``).
        workers_write: workers write to the store themselves (default: yes for PostgreSQL, no for embedded,
            whose single writer is this process).
        bulk: PostgreSQL only — drop the HNSW index during the load and build it once at the end.
        torch_threads: torch threads per worker process.
    Returns:
        the number of items written.
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    from medrank.store import is_postgres_uri, open_store
    from medrank.store.base import StoreFormatError

    texts, ids = list(texts), list(ids)
    if len(texts) != len(ids):
        raise ValueError(f"got {len(ids)} ids but {len(texts)} texts")
    metas = list(metadata) if metadata is not None else None
    if metas is not None and len(metas) != len(ids):
        raise ValueError(f"got {len(ids)} ids but {len(metas)} metadata dicts")
    if not texts:
        return 0
    n_shards = shards or math.ceil(len(texts) / shard_size)
    if n_shards < 1:
        raise ValueError(f"shards must be positive, got {shards}")
    n_shards = min(n_shards, len(texts))
    bounds = np.linspace(0, len(texts), n_shards + 1).astype(int)
    postgres = is_postgres_uri(store_uri)
    workers_write = postgres if workers_write is None else workers_write
    if workers_write and not postgres:
        raise ValueError("only a PostgreSQL store takes writes from several workers; use workers_write=False")
    if bulk and not postgres:
        raise ValueError("bulk=True is for PostgreSQL stores (the embedded store has no index to defer)")

    dask_client, cluster = _client(client)
    try:
        try:
            store = open_store(store_uri, create=False)
        except StoreFormatError:
            dim = dask_client.submit(encoder_dim, encoder_name, torch_threads, pure=False).result()
            store = open_store(store_uri, dim=dim, language=language)
        written = 0
        try:
            if bulk:
                store.drop_index()  # type: ignore[attr-defined]
            futures = {}
            for s, e in zip(bounds[:-1], bounds[1:], strict=True):
                shard_meta = metas[s:e] if metas is not None else None
                if workers_write:
                    fut = dask_client.submit(
                        encode_and_write_shard, encoder_name, store_uri, ids[s:e], texts[s:e], shard_meta,
                        kind, batch_size, torch_threads, pure=False,
                    )
                else:
                    fut = dask_client.submit(
                        encode_shard, encoder_name, texts[s:e], kind, batch_size, torch_threads, pure=False
                    )
                futures[fut] = (s, e)
            with tqdm(total=len(texts), desc="encode → store", unit="text", disable=not show_progress) as bar:
                for fut in as_completed(list(futures)):
                    s, e = futures.pop(fut)
                    result = fut.result()
                    if workers_write:
                        written += int(result)
                    else:
                        written += store.add(ids[s:e], texts[s:e], result, metas[s:e] if metas is not None else None)
                    bar.update(e - s)
            if bulk:
                store.build_index()  # type: ignore[attr-defined]
        finally:
            store.close()
        return written
    finally:
        if cluster is not None:
            dask_client.close()
            cluster.close()
