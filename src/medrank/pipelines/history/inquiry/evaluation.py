"""The inquiry protocol as an evaluator: ``medrank evaluate --dataset dxy-inquiry|ddxplus-inquiry``.

Report shape (stable; every value a number):

```
{"dataset": "ddxplus-inquiry", "language": "en", "engine": "ddxplus-kb", "data": "<file or carve-out>",
 "patients": 418, "budgets": [30],
 "systems": {"kb@30": {...}, "engine@30": {...}},
 "metric_names": ["GTPA@1", "PER", "DDR", "DDP", "DDF1", "IL"], "metric_scale": 1,
 "calibration": {"threshold": ..., "temperature": ..., "cutoff": ..., "budget": ..., "tuned_on": {...}},
 "reranker": null | {"kind": "global", "backend": "onnx-int8", "reason": "..."}, "seconds": ...}
```

``kb@B`` is the first stage alone asking until the budget ``B``; ``engine@B`` is the engine as served
(stopping rule, and the re-ranker when ``--model`` names one) with budget ``B``. DXY metrics are
``accuracy``, ``symptom_recall`` (implicit symptoms asked / all implicit symptoms, micro) and ``turns``
at budgets 5 and 10; DDXPlus metrics are GTPA@1, PER, DDR, DDP, DDF1 (percent) and IL (turns) at 30.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from medrank.pipelines.history.inquiry.build import (
    BUDGETS,
    attach_reranker,
    calibrate,
    fit_engine,
    load_corpus,
)
from medrank.pipelines.history.inquiry.engine import Calibration
from medrank.pipelines.history.inquiry.simulate import episode_metrics, run_episodes

METRICS = {"en": ["GTPA@1", "PER", "DDR", "DDP", "DDF1", "IL"], "zh": ["accuracy", "symptom_recall", "turns"]}
REPORT_BUDGETS = {"en": (30,), "zh": (5, 10)}
DATASETS = {"en": "ddxplus-inquiry", "zh": "dxy-inquiry"}


def evaluate_inquiry(language: str, test: Path | None = None, model: Path | None = None,
                     data_root: str | Path | None = None, max_patients: int | None = None,
                     backend: str = "torch") -> dict[str, Any]:
    """Run the simulated-patient protocol on ``test`` (default: the validation carve-out); ``backend``
    runs the re-ranker of ``model`` (torch | onnx | onnx-int8 | auto, see :func:`.build.attach_reranker`)."""
    t0 = time.perf_counter()
    corpus = load_corpus(language, data_root)
    patients = corpus.read_test(Path(test)) if test is not None else corpus.valid
    if max_patients is not None:
        patients = patients[:max_patients]
    budgets = REPORT_BUDGETS[language]
    cal, _ = calibrate(corpus, max(budgets))
    engine = fit_engine(corpus, corpus.train, Calibration(**{**cal.__dict__}))
    systems: dict[str, dict[str, float]] = {}
    first = run_episodes(engine, patients, max(budgets), rerank=False)
    for b in budgets:
        systems[f"kb@{b}"] = _strip(episode_metrics(engine, first, 2.0, b))
    served = first
    if model is not None:
        attach_reranker(engine, Path(model), backend)
        served = run_episodes(engine, patients, max(budgets), rerank=True)
    for b in budgets:
        systems[f"engine@{b}"] = _strip(episode_metrics(engine, served, cal.threshold, b))
    return {
        "dataset": DATASETS[language], "language": language, "engine": engine.name,
        "data": str(test) if test is not None else "validation carve-out of the visible records (seed 13, 20 %)",
        "patients": len(patients), "budgets": list(budgets), "systems": systems, "metric_names": METRICS[language],
        "metric_scale": 1,
        "calibration": {"threshold": cal.threshold, "temperature": cal.temperature, "cutoff": cal.cutoff,
                        "budget": cal.budget, "text_weight": cal.text_weight, "tuned_on": cal.tuned_on},
        "reranker": engine.reranker_backend,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _strip(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k != "episodes"}


def evaluator(language: str) -> Any:
    def run(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
        from medrank.config import requested_threads, set_threads, task_option

        unknown = set(options) - {"max_patients", "threads", "data", "backend"}
        if unknown:
            raise ValueError(f"unknown options {sorted(unknown)}; known: max_patients, threads, data, backend")
        if split not in (None, "valid"):
            raise ValueError(f"--split {split!r}: only the validation carve-out ('valid') is visible; use --test for others")
        threads = task_option(options, "threads", None, int)
        set_threads(threads if threads is not None else requested_threads())
        if language == "en" and test is not None and Path(test).is_dir():
            raise ValueError(f"{test}: expected a DDXPlus patients CSV file, got a folder")
        backend = str(options.get("backend", "torch"))
        if model is None and "backend" in options:
            raise ValueError("backend=... runs a re-ranker: give it with --model RUN")
        return evaluate_inquiry(language, test, model, options.get("data"),
                                task_option(options, "max_patients", None, int), backend)

    return run


__all__ = ["BUDGETS", "METRICS", "evaluate_inquiry", "evaluator"]
