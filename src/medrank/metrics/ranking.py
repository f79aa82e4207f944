"""The ranking-metric name table (ranx's ``metric_switch``) and :func:`evaluate`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, overload

import numpy as np

from medrank.metrics.average_precision import average_precision
from medrank.metrics.flatten import Flat, flatten
from medrank.metrics.hit_rate import hit_rate
from medrank.metrics.names import parse_metrics
from medrank.metrics.ndcg import ndcg
from medrank.metrics.precision import precision
from medrank.metrics.r_precision import r_precision
from medrank.metrics.recall import recall
from medrank.metrics.reciprocal_rank import reciprocal_rank
from medrank.records import Qrels, Ranking, Run

#: canonical metric name (:func:`~medrank.metrics.parse_metric`) -> per-query scores of a flattened run
METRICS: dict[str, Callable[[Flat, int | None], np.ndarray]] = {
    "ndcg": ndcg,
    "recall": recall,
    "precision": precision,
    "map": average_precision,
    "mrr": reciprocal_rank,
    "hit_rate": hit_rate,
    "r-precision": r_precision,
}


@overload
def evaluate(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    run: Run | Mapping[str, Mapping[str, float]] | Mapping[str, Ranking],
    metrics: str | Sequence[str],
    *,
    return_per_query: Literal[False] = ...,
) -> dict[str, float]: ...


@overload
def evaluate(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    run: Run | Mapping[str, Mapping[str, float]] | Mapping[str, Ranking],
    metrics: str | Sequence[str],
    *,
    return_per_query: Literal[True],
) -> tuple[dict[str, float], dict[str, dict[str, float]]]: ...


def evaluate(
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    run: Run | Mapping[str, Mapping[str, float]] | Mapping[str, Ranking],
    metrics: str | Sequence[str],
    *,
    return_per_query: bool = False,
) -> dict[str, float] | tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score ``run`` against ``qrels`` with the named ranking metrics.

    Args:
        qrels: relevance judgments ``query_id -> {item_id: int grade}``.
        run: ``query_id -> Ranking`` (order used as is) or ``query_id -> {item_id: score}``
            (sorted by descending score, ties in insertion order). Both kinds may be mixed.
        metrics: one name or a sequence of names, e.g. ``["ndcg@10", "recall@5", "mrr"]``;
            see the module docstring for the definitions.
        return_per_query: also return ``{metric: {query_id: score}}`` for every evaluated query.

    Returns:
        ``{metric: mean score}`` keyed by the names as given (scores in [0, 1]), and with
        ``return_per_query=True`` a ``(means, per_query)`` tuple.

    Averages are over the qrels queries with at least one relevant item (grade >= 1);
    queries missing from the run score 0, run queries absent from qrels are ignored.

    Raises:
        ValueError: unknown metric name (the message lists the valid ones), ``k`` not a
            positive integer, a NaN score (naming the query), a duplicated item in a
            Ranking, or no qrels query with a relevant item.
        TypeError: malformed qrels/run containers, non-integer grades, non-numeric scores.
    """
    specs = parse_metrics(metrics)
    flat = flatten(qrels, run)
    means: dict[str, float] = {}
    per_query: dict[str, dict[str, float]] = {}
    for spec in specs:
        scores = METRICS[spec.metric](flat, spec.k)
        means[spec.name] = float(scores.mean())
        if return_per_query:
            per_query[spec.name] = dict(zip(flat.qids, scores.tolist(), strict=True))
    if return_per_query:
        return means, per_query
    return means
