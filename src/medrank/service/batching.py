"""Micro-batching of query encodes: concurrent requests share one forward pass.

Every request encodes one short query. Under load, dozens of request threads would each run a
batch-of-one forward pass; :class:`BatchingEncoder` queues small calls and a single worker thread
encodes whatever has arrived (up to ``max_batch`` texts, waiting at most ``max_wait_s`` for company)
in one batch, then hands each caller its rows. A batch of 32 short queries costs little more than one,
so throughput under concurrency rises and the tokenizer/model are only ever driven from one thread.
Large calls (more than ``max_batch`` texts, e.g. sentence scoring) go straight to the wrapped encoder.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder, TextKind, WrappedEncoder


class BatchingEncoder(WrappedEncoder):
    """Wraps ``encoder``; small concurrent :meth:`encode` calls are coalesced into one batch."""

    def __init__(self, encoder: Encoder, max_batch: int = 32, max_wait_s: float = 0.002) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        super().__init__(encoder)
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: queue.Queue[tuple[list[str], TextKind | None, Future[np.ndarray]]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._start_lock = threading.Lock()
        #: batches run and texts encoded through the queue (for tests and /models details)
        self.stats = {"batches": 0, "texts": 0}

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        if len(texts) > self.max_batch:
            return self.encoder.encode(texts, kind=kind, batch_size=batch_size, show_progress=show_progress)
        self._ensure_worker()
        future: Future[np.ndarray] = Future()
        self._queue.put((texts, kind, future))
        return future.result()

    def _ensure_worker(self) -> None:
        if self._worker is None:
            with self._start_lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._run, name=f"batch-encode-{self.name}", daemon=True)
                    self._worker.start()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            n = len(batch[0][0])
            deadline = time.monotonic() + self.max_wait_s
            while n < self.max_batch:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                batch.append(item)
                n += len(item[0])
            for kind in dict.fromkeys(k for _, k, _ in batch):
                group = [(texts, fut) for texts, k, fut in batch if k == kind]
                flat = [t for texts, _ in group for t in texts]
                try:
                    vectors = self.encoder.encode(flat, kind=kind, batch_size=max(len(flat), 1), show_progress=False)
                except BaseException as exc:  # hand the error to every waiting caller
                    for _, fut in group:
                        fut.set_exception(exc)
                    continue
                self.stats["batches"] += 1
                self.stats["texts"] += len(flat)
                start = 0
                for texts, fut in group:
                    fut.set_result(vectors[start : start + len(texts)])
                    start += len(texts)


def batch_queries(index: Any, max_batch: int = 32) -> None:
    """Wrap the query encoder of a dense index (or of each dense part of a hybrid index) in :class:`BatchingEncoder`."""
    for part in getattr(index, "components", [index]):
        enc = getattr(part, "encoder", None)
        if isinstance(enc, Encoder) and not isinstance(enc, BatchingEncoder):
            part.encoder = BatchingEncoder(enc, max_batch=max_batch)
