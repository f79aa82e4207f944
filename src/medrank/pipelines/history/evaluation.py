"""Scoring built samples with any re-ranker and turning the scores into nDCG / MAP.

Metrics come from :func:`medrank.metrics.evaluate`: ``ndcg`` (no cut-off, linear gain), ``map``,
``mrr`` and ``ndcg@5`` over each sample's candidate list, with the positives inside the list as
the relevant items (grade 1). Order-sensitive models are scored on ``shuffles`` random candidate
orders (seeded) and the metrics averaged, as in the paper.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from medrank.metrics import evaluate
from medrank.pipelines.history.artefacts import (
    BI_ENCODER_MARKER,
    CROSS_ENCODER_MARKER,
    GLOBAL_RERANKER_MARKER,
)
from medrank.pipelines.history.data import Sample, candidate_qrels, render_dialogue, run_from_scores

METRICS = ["ndcg", "map", "mrr", "ndcg@5"]
#: (dialogue text, candidate question texts) -> one score per candidate
ScoreFn = Callable[[str, Sequence[str]], Sequence[float]]


def subsample(samples: Sequence[Sample], limit: int | None, seed: int) -> list[Sample]:
    """A seeded random subset of at most ``limit`` samples (original order kept)."""
    if not limit or limit >= len(samples):
        return list(samples)
    keep = sorted(np.random.default_rng(seed).choice(len(samples), size=limit, replace=False).tolist())
    return [samples[i] for i in keep]


def first_stage_metrics(samples: Sequence[Sample]) -> dict[str, float]:
    """Metrics of the first stage's own order (the candidate lists as built)."""
    run = run_from_scores(samples, {s.id: [-i for i in range(len(s.candidates))] for s in samples})
    return evaluate(candidate_qrels(samples), run, METRICS)


def evaluate_scorer(
    score: ScoreFn, samples: Sequence[Sample], texts: dict[str, str], shuffles: int = 1, seed: int = 13,
    show_progress: bool = False, desc: str = "rerank",
) -> dict[str, Any]:
    """Mean metrics over ``shuffles`` candidate orders, plus their spread and the scoring time."""
    if shuffles < 1:
        raise ValueError(f"shuffles must be >= 1, got {shuffles}")
    qrels = candidate_qrels(samples)
    per_shuffle = []
    t0 = time.perf_counter()
    for r in range(shuffles):
        rng = np.random.default_rng(seed + r)
        scores: dict[str, list[float]] = {}
        for s in tqdm(samples, desc=f"{desc} ({r + 1}/{shuffles})", disable=not show_progress, unit="sample"):
            perm = rng.permutation(len(s.candidates)) if shuffles > 1 else np.arange(len(s.candidates))
            out = np.asarray(score(render_dialogue(s.context), [texts[s.candidates[i]] for i in perm]), dtype=np.float64)
            back = np.empty(len(perm))
            back[perm] = out
            scores[s.id] = back.tolist()
        per_shuffle.append(evaluate(qrels, run_from_scores(samples, scores), METRICS))
    seconds = time.perf_counter() - t0
    mean = {m: float(np.mean([p[m] for p in per_shuffle])) for m in METRICS}
    return {
        "metrics": mean,
        "std_over_shuffles": {m: float(np.std([p[m] for p in per_shuffle])) for m in METRICS},
        "shuffles": shuffles,
        "samples": len(samples),
        "seconds_per_sample": seconds / max(1, shuffles * len(samples)),
    }


#: the ways a saved re-ranker can run: torch, ONNX Runtime fp32 / int8 (the global re-ranker), or auto
RERANKER_BACKENDS = ("torch", "onnx", "onnx-int8", "auto")


@dataclass(frozen=True)
class LoadedReranker:
    """A saved re-ranker ready to score: its kind, the scorer, the backend running it, and why."""

    kind: str
    scorer: Any
    backend: str
    reason: str


def open_reranker(path: str | Path, backend: str = "torch",
                  checks: Sequence[tuple[str, Sequence[str]]] | None = None) -> LoadedReranker:
    """A saved re-ranker folder (or a run folder holding ``model/``) on ``backend``.

    ``"onnx"`` / ``"onnx-int8"`` serve a global re-ranker by ONNX Runtime; ``"auto"`` times torch and both
    ONNX forms on ``checks`` ((dialogue, candidates) inputs) and keeps the fastest whose scores agree with
    torch's (:func:`~medrank.pipelines.history.models.backend_choice.choose_reranker_backend`). The
    cross-encoder and bi-encoder baselines run on torch (``"auto"`` keeps torch for them).
    """
    from medrank.encoders.onnx import OnnxBackendError
    from medrank.pipelines.history.models import GlobalReranker, HistoryBiEncoder, HistoryCrossEncoder

    if backend not in RERANKER_BACKENDS:
        raise OnnxBackendError(f"backend must be one of {', '.join(RERANKER_BACKENDS)}, got {backend!r}")
    path = Path(path)
    if (path / "model").is_dir():
        path = path / "model"
    if (path / GLOBAL_RERANKER_MARKER).exists():
        model = GlobalReranker.load(path)
        if backend == "torch":
            return LoadedReranker("global", model, "torch", "torch (asked for)")
        if backend == "auto":
            from medrank.pipelines.history.models.backend_choice import choose_reranker_backend

            if not checks:
                raise ValueError("backend 'auto' needs check inputs (dialogues with candidate questions) to compare on")
            choice = choose_reranker_backend(model, checks, repeats=1)
            return LoadedReranker("global", choice.scorer, choice.backend, choice.reason)
        from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

        return LoadedReranker("global", OnnxGlobalReranker(model, quantized=backend == "onnx-int8"), backend,
                              f"{backend} (asked for)")
    if (path / CROSS_ENCODER_MARKER).exists():
        kind, model = "cross-encoder", HistoryCrossEncoder.load(path)
    elif (path / BI_ENCODER_MARKER).exists():
        kind, model = "bi-encoder", HistoryBiEncoder.load(path)
    else:
        raise FileNotFoundError(f"{path} holds no saved history re-ranker")
    if backend in ("onnx", "onnx-int8"):
        raise OnnxBackendError(f"only the global re-ranker has an ONNX Runtime path; this {kind} runs on torch")
    return LoadedReranker(kind, model, "torch", "torch" + (" (the only backend of the baselines)" if backend == "auto" else " (asked for)"))


def load_reranker(path: str | Path, backend: str = "torch") -> tuple[str, Any]:
    """``(kind, scorer)`` of a saved re-ranker folder (or a run folder holding ``model/``) on ``backend``
    (``"torch"``, or ``"onnx"`` / ``"onnx-int8"`` for a global re-ranker; see :func:`open_reranker`)."""
    loaded = open_reranker(path, backend)
    return loaded.kind, loaded.scorer


def evaluate_history(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """First stage (and a saved re-ranker) on a built split or any file in the built format.

    Options: ``data_dir`` (built folder; default the cache's ``history/<dataset>``), ``shuffles``
    (5 for the global re-ranker), ``max_samples`` (seeded subset), ``seed``, ``threads`` (default: the
    global ``--threads``, else every core; the committed figures used 1).
    """
    from medrank.config import requested_threads, set_threads, task_option
    from medrank.pipelines.history.builders import default_out_dir
    from medrank.pipelines.history.data import bank_texts, read_bank, read_samples

    unknown = set(options) - {"data_dir", "shuffles", "max_samples", "seed", "threads", "dataset", "backend"}
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}")
    threads = task_option(options, "threads", None, int)
    set_threads(threads if threads is not None else requested_threads())
    dataset = str(options.get("dataset", "mts-aci"))
    folder = Path(options["data_dir"]) if options.get("data_dir") else default_out_dir(dataset)
    path = test if test is not None else folder / f"{split or 'valid'}.jsonl"
    seed = task_option(options, "seed", 13, int)
    samples = subsample(read_samples(path), task_option(options, "max_samples", None, int), seed + 1)
    if not samples:
        raise ValueError(f"{path}: no samples")
    systems: dict[str, dict[str, float]] = {"first stage": first_stage_metrics(samples)}
    details: dict[str, Any] = {}
    if model is not None:
        texts = bank_texts(read_bank(folder / "bank.jsonl"))
        backend = str(options.get("backend", "torch"))
        checks = [(render_dialogue(s.context), [texts[c] for c in s.candidates]) for s in samples[:8]]
        loaded = open_reranker(model, backend, checks)
        kind, reranker = loaded.kind, loaded.scorer
        shuffles = task_option(options, "shuffles", 5 if kind == "global" else 1, int)
        res = evaluate_scorer(reranker.score, samples, texts, shuffles, seed, show_progress=True)
        systems[f"{kind}:{Path(model).name}"] = res["metrics"]
        details = {**res, "backend": loaded.backend, "backend_reason": loaded.reason}
    return {"systems": systems, "metric_names": METRICS, "samples": len(samples), "file": str(path), "details": details}
