"""Build state of each knowledge base and index, and how it is reported while the service already answers.

Every component the service builds is one :class:`BuildStep` (``symptoms:icd10cm``, ``normalize`` …).
A step goes ``waiting`` → ``building`` → ``ready`` (or ``failed: reason``); while it builds, its
progress (``done`` of ``total`` entries) gives a percentage and an ETA from the rate so far.

:class:`BuildReport` shows the steps to a person: on a terminal one named bar per step
("building hpo (5/7)  12,034/40,459 entries, ETA 3 min"), elsewhere (a log file, a pipe) plain
lines at most every ``log_every_s`` seconds, never wrapped.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from medrank.encoders.base import Encoder


def human_duration(seconds: float) -> str:
    """``45 s``, ``3 min``, ``1 h 5 min``."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{int(seconds // 3600)} h {round(seconds % 3600 / 60)} min"


@dataclass
class BuildStep:
    """One component being built in the background (thread-safe: one writer, readers take snapshots)."""

    name: str
    index: int = 1
    count: int = 1
    state: str = "waiting"
    what: str = ""
    done: int = 0
    total: int = 0
    unit: str = "entries"
    started: float | None = None
    progress_started: float | None = None
    finished: float | None = None
    reason: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"building {self.name} ({self.index}/{self.count})"

    def start(self) -> None:
        with self._lock:
            self.state, self.started = "building", time.time()

    def update(self, done: int, total: int, unit: str | None = None) -> None:
        with self._lock:
            if self.progress_started is None or done < self.done or total != self.total:
                self.progress_started = time.time()  # a new phase of the step (another encode): rate from here
            self.done, self.total = done, total
            if unit:
                self.unit = unit

    def finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            self.finished = time.time()
            if error is None:
                self.state = "ready"
            else:
                self.state, self.reason = "failed", f"{type(error).__name__}: {error}"

    def eta_s(self) -> float | None:
        """Seconds left from the rate since this phase began (None before any progress)."""
        with self._lock:
            if self.state != "building" or not self.total or not self.done or self.progress_started is None:
                return None
            elapsed = time.time() - self.progress_started
            return max(0.0, elapsed / self.done * (self.total - self.done))

    def fraction(self) -> float | None:
        return None if not self.total else min(1.0, self.done / self.total)

    def detail(self) -> str:
        """``waiting``, ``building 45 %``, ``ready`` or ``failed: reason``."""
        if self.state == "failed":
            return f"failed: {self.reason}"
        if self.state == "building":
            frac = self.fraction()
            return "building" if frac is None else f"building {math.floor(frac * 100)} %"
        return self.state

    def line(self) -> str:
        """``building hpo (5/7): 12,034/40,459 entries, ETA 3 min``."""
        eta = self.eta_s()
        progress = f": {self.done:,}/{self.total:,} {self.unit}" if self.total else ""
        return f"{self.label}{progress}" + (f", ETA {human_duration(eta)}" if eta is not None else "")

    def snapshot(self) -> dict[str, Any]:
        eta = self.eta_s()
        frac = self.fraction()
        return {"state": self.state, "detail": self.detail(), "progress": None if frac is None else round(frac, 4),
                "done": self.done, "total": self.total, "unit": self.unit,
                "eta_s": None if eta is None else round(eta, 1),
                "seconds": None if self.started is None else round((self.finished or time.time()) - self.started, 1)}


class BuildReport:
    """Shows build progress: tqdm bars on a terminal, throttled plain lines otherwise."""

    def __init__(self, stream: TextIO | None = None, log_every_s: float = 10.0, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.log_every_s = log_every_s
        self._bars: dict[str, Any] = {}
        self._last: dict[str, float] = {}

    def say(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def progress(self, step: BuildStep) -> None:
        if self.tty:
            from tqdm.auto import tqdm

            bar = self._bars.get(step.name)
            if bar is None or bar.total != step.total:
                if bar is not None:
                    bar.close()
                bar = self._bars[step.name] = tqdm(total=step.total, desc=step.label, unit=step.unit, file=self.stream,
                                                   dynamic_ncols=True, leave=False)
            bar.n = step.done
            bar.refresh()
            return
        now = time.time()
        if step.done >= step.total or now - self._last.get(step.name, 0.0) >= self.log_every_s:
            self._last[step.name] = now
            self.say(step.line())

    def finished(self, step: BuildStep) -> None:
        bar = self._bars.pop(step.name, None)
        if bar is not None:
            bar.close()
        took = step.snapshot()["seconds"]
        self.say(f"{step.label}: {step.detail()}" + (f" in {took:.0f} s" if took is not None else ""))


class ProgressEncoder(Encoder):
    """``inner`` encoding in chunks and calling ``report(done, total)`` after each: a build's progress and ETA."""

    def __init__(self, inner: Encoder, report: Callable[[int, int], None], chunk: int = 1024) -> None:
        self.inner = inner
        self.report = report
        self.chunk = chunk
        self.name = inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def fingerprint(self) -> dict[str, Any]:
        return self.inner.fingerprint()

    def __getattr__(self, name: str) -> Any:  # anything else an index asks of its encoder
        return getattr(self.inner, name)

    def _encode(self, texts: list[str], kind: Any, batch_size: int, show_progress: bool) -> np.ndarray:
        # chunks of texts of similar length: the encoder pads each batch to its longest text, so chunks cut from
        # the unsorted list would pad short texts to the length of the longest in the chunk
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), np.float32)
        self.report(0, len(texts))
        for a in range(0, len(texts), self.chunk):
            idx = order[a:a + self.chunk]
            out[idx] = self.inner.encode([texts[i] for i in idx], kind=kind, batch_size=batch_size, show_progress=False)
            self.report(min(a + self.chunk, len(texts)), len(texts))
        return out


def eta_header(steps: Sequence[BuildStep]) -> float | None:
    """The largest ETA among ``steps`` still building (None when none has one)."""
    etas = [e for e in (s.eta_s() for s in steps) if e is not None]
    return max(etas) if etas else None
