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

from collections.abc import Sequence
from typing import Any

import numpy as np

from medrank.data.questions import QuestionPair
from medrank.metrics import binary_prf, evaluate
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
