"""Child process for the crash-safety tests (tests/test_store_crash.py); killed with SIGKILL mid-way.

    python store_crash_child.py ingest URI BATCH_SIZE N_BATCHES   # prints "ACK <total>" after each add returns
    python store_crash_child.py build URI                          # open (catch-up index build), then save
    python store_crash_child.py bulk URI BATCH_SIZE N_BATCHES      # pgvector bulk_load: adds, then HNSW build
"""

from __future__ import annotations

import sys

import numpy as np

DIM = 64


def batch(b: int, size: int) -> tuple[list[str], list[str], np.ndarray]:
    """Batch ``b``: deterministic ids, texts and unit vectors (the parent regenerates them to verify)."""
    rng = np.random.default_rng(1000 + b)
    vectors = rng.normal(size=(size, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"b{b}-{i}" for i in range(size)]
    texts = [f"batch {b} item {i} fever cough" for i in range(size)]
    return ids, texts, vectors


def main() -> None:
    from medrank.store import open_store

    mode, uri = sys.argv[1], sys.argv[2]
    if mode == "build":
        print("BUILDING", flush=True)
        store = open_store(uri)
        print("OPENED", flush=True)
        store.save()
        print("SAVED", flush=True)
        store.close()
        return
    size, n_batches = int(sys.argv[3]), int(sys.argv[4])
    options = {"index": "hnsw"} if uri.startswith("embedded:") else {}
    store = open_store(uri, dim=DIM, language="en", **options)
    total = 0
    if mode == "bulk":
        with store.bulk_load():  # type: ignore[attr-defined]
            for b in range(n_batches):
                total += store.add(*batch(b, size))
                print(f"ACK {total}", flush=True)
            print("BUILDING", flush=True)
        print("BUILT", flush=True)
        return
    for b in range(n_batches):
        total += store.add(*batch(b, size))
        print(f"ACK {total}", flush=True)
        if b % 10 == 9 and hasattr(store, "path"):
            store.save()  # also get killed during snapshot writes
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
