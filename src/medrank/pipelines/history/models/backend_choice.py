"""Which backend runs a global re-ranker: the fastest whose scores agree with the torch model's.

Agreement is measured on check inputs (dialogues with their candidate questions): for every input, the
Pearson correlation of the candidate scores with torch's and whether the top-5 candidates come in the
same order. A backend passes when the lowest correlation reaches its bar and the share of inputs with an
identical top-5 reaches its bar; among the backends that pass (torch always does: it is the reference),
the one with the lowest median time per input on the same inputs, timed interleaved, is chosen.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.encoders.onnx import check_backend
from medrank.pipelines.history.models.global_reranker import GlobalReranker

log = logging.getLogger(__name__)

#: default bars: backend -> (minimum Pearson correlation over the inputs, share of inputs with the same top-5 order)
DEFAULT_RERANKER_AGREEMENT: dict[str, tuple[float, float]] = {"onnx": (0.999, 1.0), "onnx-int8": (0.98, 0.9)}
TOP = 5


@dataclass(frozen=True)
class RerankerAgreement:
    """How one backend's scores compare with torch's on the check inputs."""

    min_correlation: float
    mean_correlation: float
    same_top5: float  # share of inputs whose top-5 candidates come in the same order
    inputs: int

    def as_dict(self) -> dict[str, float]:
        return {"min_correlation": round(self.min_correlation, 6), "mean_correlation": round(self.mean_correlation, 6),
                "same_top5": round(self.same_top5, 4), "inputs": self.inputs}


@dataclass(frozen=True)
class RerankerChoice:
    """The scorer chosen, its backend, why, and what was measured (backend -> agreement / median ms)."""

    scorer: Any
    backend: str
    reason: str
    agreement: dict[str, RerankerAgreement] = field(default_factory=dict)
    median_ms: dict[str, float] = field(default_factory=dict)


def top_order(scores: Sequence[float], top: int = TOP) -> list[int]:
    """Indices of the ``top`` highest scores, best first (ties by position)."""
    return [int(i) for i in np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:top]]


def compare(reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], top: int = TOP) -> RerankerAgreement:
    """Score correlation and top-``top`` order agreement between two backends over the same inputs."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError("compare needs the same, non-empty list of inputs scored by both backends")
    correlations, same = [], 0
    for ref, got in zip(reference, candidate, strict=True):
        a, b = np.asarray(ref, dtype=np.float64), np.asarray(got, dtype=np.float64)
        if len(a) != len(b):
            raise ValueError("the two backends scored different numbers of candidates")
        if len(a) < 2 or a.std() == 0 or b.std() == 0:
            correlations.append(1.0 if np.allclose(a, b, atol=1e-6) else 0.0)
        else:
            correlations.append(float(np.corrcoef(a, b)[0, 1]))
        same += top_order(a, top) == top_order(b, top)
    return RerankerAgreement(min(correlations), float(np.mean(correlations)), same / len(reference), len(reference))


def choose_reranker_backend(
    reranker: GlobalReranker,
    checks: Sequence[tuple[str, Sequence[str]]],
    prefer: Sequence[str] = ("onnx-int8", "onnx", "torch"),
    *,
    bars: dict[str, tuple[float, float]] | None = None,
    repeats: int = 3,
    threads: int | None = None,
    cache_root: str | os.PathLike[str] | None = None,
) -> RerankerChoice:
    """The fastest backend of ``prefer`` (plus torch) whose scores on ``checks`` agree with torch's.

    ``checks``: (dialogue, candidate questions) inputs, ideally real states of an inquiry. A backend that
    fails to export or to run is skipped with its reason; the reason is logged (never the texts).
    """
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    if not checks:
        raise ValueError("choose_reranker_backend needs at least one (dialogue, candidates) input")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for b in prefer:
        check_backend(b)
    bars = {**DEFAULT_RERANKER_AGREEMENT, **(bars or {})}
    scorers: dict[str, Any] = {"torch": reranker}
    skipped: list[str] = []
    for backend in prefer:
        if backend == "torch" or backend in scorers:
            continue
        try:
            scorers[backend] = OnnxGlobalReranker(reranker, quantized=backend == "onnx-int8", threads=threads,
                                                  cache_root=cache_root)
        except Exception as exc:  # noqa: BLE001 - any failure to export or load means: not this backend
            skipped.append(f"{backend} unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
    scores: dict[str, list[list[float]]] = {b: [] for b in scorers}
    times: dict[str, list[float]] = {b: [] for b in scorers}
    for dialogue, questions in checks:
        last: dict[str, list[float]] = {}
        for _ in range(repeats):  # interleaved, so a change in the machine's load touches every backend alike
            for backend, scorer in list(scorers.items()):
                t0 = time.perf_counter()
                try:
                    last[backend] = list(scorer.score(dialogue, list(questions)))
                except Exception as exc:  # noqa: BLE001 - a backend that fails to run is not chosen
                    if backend == "torch":
                        raise
                    skipped.append(f"{backend} failed ({type(exc).__name__})")
                    del scorers[backend]
                    continue
                times[backend].append(time.perf_counter() - t0)
        for backend in scorers:
            scores[backend].append(last[backend])
    median = {b: 1000 * float(np.median(times[b][1:] or times[b])) for b in scorers}
    agreement = {b: compare(scores["torch"], scores[b]) for b in scorers if b != "torch"}
    passing = ["torch"]
    for backend, agree in agreement.items():
        need_corr, need_top = bars[backend]
        if agree.min_correlation >= need_corr and agree.same_top5 >= need_top:
            passing.append(backend)
        else:
            failed = ([f"score correlation min {agree.min_correlation:.4f} < {need_corr}"]
                      if agree.min_correlation < need_corr else [])
            failed += [f"same top-5 order on {agree.same_top5:.2f} of the inputs < {need_top}"] if agree.same_top5 < need_top else []
            skipped.append(f"{backend} disagrees with torch ({', '.join(failed)})")
    best = min(passing, key=lambda b: median[b])
    timing = ", ".join(f"{b} {median[b]:.1f} ms" for b in sorted(median, key=median.get))
    reason = (f"{best}: fastest of those agreeing with torch on {len(checks)} inputs (median per input: {timing})"
              + (f"; {'; '.join(skipped)}" if skipped else ""))
    log.info("global re-ranker served by %s", reason)
    return RerankerChoice(scorers[best], best, reason, agreement, median)
