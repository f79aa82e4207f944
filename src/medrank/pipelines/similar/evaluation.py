"""Pair-classification and ranking metrics of a matcher on labelled question pairs.

* Accuracy, precision, recall, F1 of the positive class, predicting "same
  intent" when ``p >= threshold`` (0.5, the argmax of the two-way softmax;
  never tuned on validation).
* NDCG@3 as in the STMT paper's Tables 4-5: pairs are grouped by their first
  question, its candidates (the second questions) are ranked by score, and
  the graded labels (KUAKE-QQR 0/1/2, else 0/1) are the gains. Groups without
  a relevant candidate are skipped (the shared metrics rule); the number of
  groups used, and how many have at least two candidates, are reported.

All numbers come from :mod:`medrank.metrics` (``binary_prf``, ``evaluate``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.config import task_option
from medrank.data.questions import QuestionPair, load_question_pairs, split_pairs
from medrank.metrics import binary_prf, evaluate
from medrank.pipelines.similar.artefacts import MATCHER_MARKER
from medrank.records import Qrels, Ranking

PAIR_METRICS = ("accuracy", "precision", "recall", "f1", "ndcg@3")


def ranking_by_first_question(pairs: Sequence[QuestionPair], scores: np.ndarray) -> tuple[Qrels, dict[str, Ranking]]:
    """Qrels and run for NDCG: one query per distinct ``text1``, its pairs as the ranked items."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(p.text1, []).append(i)
    qrels = Qrels()
    run: dict[str, Ranking] = {}
    for g, (_, idx) in enumerate(groups.items()):
        qid = f"q{g}"
        for i in idx:
            qrels.add(qid, pairs[i].id, int(pairs[i].grade))
        order = sorted(idx, key=lambda i: -float(scores[i]))  # stable: ties keep the file order
        run[qid] = Ranking(qid, tuple(pairs[i].id for i in order), tuple(float(scores[i]) for i in order))
    return qrels, run


def pair_metrics(pairs: Sequence[QuestionPair], scores: Sequence[float] | np.ndarray, threshold: float = 0.5) -> dict[str, Any]:
    """Accuracy / precision / recall / F1 at ``threshold`` and NDCG@3 grouped by the first question."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(scores)} scores")
    if not len(pairs):
        raise ValueError("no pairs to evaluate")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    out: dict[str, Any] = dict(binary_prf([p.label for p in pairs], (scores >= threshold).astype(int).tolist()))
    qrels, run = ranking_by_first_question(pairs, scores)
    ranked = [q for q in qrels if qrels.relevant(q)]
    out["ndcg@3"] = evaluate(qrels, run, ["ndcg@3"])["ndcg@3"] if ranked else float("nan")
    out["ndcg_groups"] = len(ranked)
    out["ndcg_groups_with_2plus_candidates"] = sum(1 for q in ranked if len(qrels[q]) >= 2)
    return out


def metric_subset(metrics: dict[str, Any]) -> dict[str, float]:
    """Only the table metrics (:data:`PAIR_METRICS`)."""
    return {k: float(metrics[k]) for k in PAIR_METRICS if k in metrics}


SPLITS = ("valid", "train", "all")


def _run_dirs(model: Path) -> list[Path]:
    """A matcher folder, a run with ``matcher/``, or a folder of such runs (sorted)."""
    if (model / MATCHER_MARKER).exists() or (model / "matcher" / MATCHER_MARKER).exists():
        return [model]
    runs = sorted(p for p in model.iterdir() if p.is_dir() and (p / "matcher" / MATCHER_MARKER).exists()) if model.is_dir() else []
    if not runs:
        raise FileNotFoundError(f"{model}: no matcher (a run directory with matcher/, a matcher folder, or a folder of runs)")
    return runs


def evaluation_pairs(dataset: str, test: Path | None, split: str | None, options: dict[str, Any]) -> list[QuestionPair]:
    """The pairs to score: a file in the dataset's visible format, or a split of the visible file."""
    if test is not None:
        return load_question_pairs(dataset, test)
    split = split or "valid"
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    pairs = load_question_pairs(dataset, options.get("data"))
    if split == "all":
        return pairs
    parts = split_pairs(pairs, task_option(options, "valid_fraction", 0.2, float), task_option(options, "split_seed", 13, int))
    return parts.valid if split == "valid" else parts.train


def evaluate_pairs(
    dataset: str, test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]
) -> dict[str, Any]:
    """A saved matcher (or every run in a folder) scored on ``dataset``'s pairs: the ``medrank evaluate`` evaluator."""
    from medrank.pipelines.similar.matchers import load_matcher

    if model is None:
        raise ValueError(f"--model is required for {dataset}: a run directory from `medrank train` (or a folder of runs)")
    pairs = evaluation_pairs(dataset, test, split, options)
    threshold = task_option(options, "threshold", 0.5, float)
    systems, details = {}, {}
    for run in _run_dirs(model):
        matcher = load_matcher(run)
        t0 = time.perf_counter()
        scores = matcher.score([(p.text1, p.text2) for p in pairs], task_option(options, "batch_size", 256, int))
        seconds = time.perf_counter() - t0
        metrics = pair_metrics(pairs, scores, threshold)
        name = matcher.name if matcher.name not in systems else f"{matcher.name} ({run.name})"
        systems[name] = metric_subset(metrics)
        details[name] = {**metrics, "run": str(run), "seconds": round(seconds, 2),
                         "pairs_per_second": round(len(pairs) / seconds, 1) if seconds > 0 else None}
    return {
        "dataset": dataset, "split": None if test else (split or "valid"), "test_file": str(test) if test else None,
        "n_pairs": len(pairs), "n_positive": sum(p.label for p in pairs), "threshold": threshold,
        "systems": systems, "details": details, "metric_names": list(PAIR_METRICS),
    }
