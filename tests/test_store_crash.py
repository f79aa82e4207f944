"""Crash safety: SIGKILL an ingesting / index-building process (and the PostgreSQL server itself), restart,
and check that the store opens, nothing acknowledged is lost, every add is all-or-nothing, and search works.

Slow (subprocesses, a real PostgreSQL server): run with ``make test-slow``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from medrank.store import open_store

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("store_crash_child.py")
sys.path.insert(0, str(CHILD.parent))
from store_crash_child import batch  # noqa: E402
from store_support import start_postgres_or_skip  # noqa: E402


class Child:
    """A child process whose stdout lines are collected by a thread."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_for(self, predicate, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while not predicate(self.lines):
            if self.proc.poll() is not None and not predicate(self.lines):
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"child exited ({self.proc.returncode}) early: {self.lines[-3:]} {err[-2000:]}")
            if time.monotonic() > end:
                raise AssertionError(f"timed out; child printed {self.lines[-3:]}")
            time.sleep(0.02)

    def kill(self) -> int:
        """SIGKILL, then drain stdout: every ACK that reached the pipe was acknowledged before the kill."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        return self.acked()

    def acked(self) -> int:
        acks = [int(line.split()[1]) for line in self.lines if line.startswith("ACK ")]
        return max(acks, default=0)


def n_acks(at_least: int):
    return lambda lines: sum(line.startswith("ACK ") for line in lines) >= at_least


def verify(uri: str, acked: int, batch_size: int) -> int:
    """The store opens; it holds every acknowledged batch, whole batches only; search works; reopens."""
    store = open_store(uri)
    try:
        count = store.count()
        assert count >= acked, f"acknowledged {acked} items but only {count} survived"
        assert count % batch_size == 0, f"{count} items: a partial add became visible"
        for b in range(count // batch_size):
            ids, texts, vectors = batch(b, batch_size)
            for i in (0, batch_size - 1):
                hits = store.search(vectors[i], texts[i], k=1, mode="dense")
                assert hits and hits[0].id == ids[i] and hits[0].score == pytest.approx(1.0, abs=1e-4)
        assert store.search(None, "fever cough", k=3, mode="bm25")
    finally:
        store.close()
    with open_store(uri) as again:  # and it still opens after being closed normally
        assert again.count() == count
    return count


@pytest.fixture
def pg():
    server = start_postgres_or_skip()
    yield server
    server.stop()


@pytest.mark.parametrize("backend", ["embedded", "pgvector"])
def test_kill_client_during_ingestion(backend, tmp_path, request):
    uri = f"embedded:{tmp_path / 'store'}" if backend == "embedded" else request.getfixturevalue("pg").dsn
    size = 200
    child = Child("ingest", uri, str(size), "500")
    child.wait_for(n_acks(12))  # past at least one snapshot save (every 10 batches)
    acked = child.kill()
    assert "DONE" not in child.lines, "the child finished before it was killed: make the run longer"
    count = verify(uri, acked, size)
    assert count <= acked + size  # at most the one add in flight
    # a second writer can ingest after the crash (the dead writer's lock went with it)
    resumed = Child("ingest", uri, str(size), "2")
    resumed.wait_for(lambda lines: "DONE" in lines)


def test_kill_during_embedded_index_build_and_save(tmp_path):
    """Open with no usable snapshot rebuilds the HNSW graph from SQLite; kill that build (and the save)."""
    uri = f"embedded:{tmp_path / 'store'}"
    size, n_batches = 1000, 12
    store = open_store(uri, dim=64, language="en", index="hnsw")
    for b in range(n_batches):
        store.add(*batch(b, size))
    store._release()  # like a crash: 12k vectors in SQLite, no snapshot

    def spoil_snapshots() -> None:  # force the next open to rebuild the graph from SQLite
        for snap in (tmp_path / "store" / "snapshots").iterdir():
            (snap / "vectors.faiss").write_bytes(b"x")

    # time one uninterrupted build + save first: fixed delays were too late on a fast host
    child = Child("build", uri)
    child.wait_for(lambda lines: "BUILDING" in lines)
    started = time.monotonic()
    child.wait_for(lambda lines: "SAVED" in lines)
    full = time.monotonic() - started
    child.proc.wait(timeout=60)
    spoil_snapshots()
    for fraction in (0.2, 0.6):
        child = Child("build", uri)
        child.wait_for(lambda lines: "BUILDING" in lines)
        time.sleep(fraction * full)
        child.kill()
        assert "SAVED" not in child.lines, f"the build finished before the kill ({fraction} of {full:.2f} s)"
        assert verify(uri, size * n_batches, size) == size * n_batches
        spoil_snapshots()  # verify() closed the store, which saved a snapshot
    child = Child("build", uri)
    child.wait_for(lambda lines: "SAVED" in lines)
    child.proc.wait(timeout=60)
    assert child.proc.returncode == 0
    assert verify(uri, size * n_batches, size) == size * n_batches


def test_kill_postgres_server_during_ingestion(pg):
    size = 200
    child = Child("ingest", pg.dsn, str(size), "500")
    child.wait_for(n_acks(10))
    pg.kill()  # SIGKILL the postmaster mid-ingest: the server, not just the client, dies
    child.proc.wait(timeout=60)
    child._reader.join(timeout=30)
    acked = child.acked()
    pg.start()  # WAL recovery
    count = verify(pg.dsn, acked, size)
    assert count <= acked + size


def test_kill_postgres_server_during_index_build(pg):
    """Bulk load: rows committed, HNSW build in progress; kill the server; restart recreates the index."""
    import psycopg

    size, n_batches = 1000, 12
    child = Child("bulk", pg.dsn, str(size), str(n_batches))
    child.wait_for(lambda lines: "BUILDING" in lines)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        end = time.monotonic() + 60
        while not conn.execute("SELECT count(*) FROM pg_stat_progress_create_index").fetchone()[0]:
            assert "BUILT" not in child.lines, "index build finished before it could be interrupted"
            assert time.monotonic() < end
            time.sleep(0.01)
    pg.kill()
    child.proc.wait(timeout=60)
    pg.start()
    from medrank.store.pgvector import PgVectorStore

    store = PgVectorStore(pg.dsn, create=False)  # the interrupted build left no index: it is rebuilt on open
    assert store.has_index()
    store.close()
    assert verify(pg.dsn, size * n_batches, size) == size * n_batches
    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # no invalid index left behind
        assert conn.execute("SELECT count(*) FROM pg_index WHERE NOT indisvalid").fetchone()[0] == 0
