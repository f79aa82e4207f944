"""Metric names: aliases, the ``@k`` cut-off, and the patterns :func:`~medrank.metrics.evaluate` accepts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# name (lower case) -> canonical metric
_ALIASES: dict[str, str] = {
    "ndcg": "ndcg",
    "recall": "recall",
    "precision": "precision",
    "map": "map",
    "mrr": "mrr",
    "acc": "hit_rate",
    "hit_rate": "hit_rate",
    "r-precision": "r-precision",
    "r_precision": "r-precision",
}
_NO_K = frozenset({"r-precision"})

SUPPORTED_METRICS: tuple[str, ...] = (
    "ndcg",
    "ndcg@k",
    "recall",
    "recall@k",
    "precision",
    "precision@k",
    "map",
    "map@k",
    "mrr",
    "mrr@k",
    "acc",
    "acc@k",
    "hit_rate",
    "hit_rate@k",
    "r-precision",
)
"""Metric name patterns accepted by :func:`evaluate` (case-insensitive, k a positive integer)."""

_K_RE = re.compile(r"[0-9]+")


def _valid_names_hint() -> str:
    return "valid metrics (case-insensitive, k a positive integer): " + ", ".join(SUPPORTED_METRICS)


@dataclass(frozen=True, slots=True)
class Spec:
    name: str  # as the caller spelled it: the result key
    metric: str  # canonical: ndcg, recall, precision, map, mrr, hit_rate, r-precision
    k: int | None


def parse_metric(name: str) -> tuple[str, int | None]:
    """Parse a metric name into ``(canonical_metric, k)``; ``k`` is ``None`` without ``@k``.

    >>> parse_metric("nDCG@10")
    ('ndcg', 10)
    >>> parse_metric("acc@1")
    ('hit_rate', 1)

    Raises ``ValueError`` for an unknown name (listing the valid ones) or a
    ``k`` that is not a positive integer, ``TypeError`` for a non-string.
    """
    if not isinstance(name, str):
        raise TypeError(f"metric names must be strings, got {name!r}")
    text = name.strip().lower()
    base, sep, k_text = text.partition("@")
    metric = _ALIASES.get(base.strip())
    if metric is None:
        raise ValueError(f"unknown metric {name!r}; {_valid_names_hint()}")
    if not sep:
        return metric, None
    if metric in _NO_K:
        raise ValueError(f"metric {name!r}: {base.strip()} takes no @k cutoff")
    k_text = k_text.strip()
    if not _K_RE.fullmatch(k_text) or int(k_text) <= 0:
        raise ValueError(f"metric {name!r}: k must be a positive integer, got {k_text!r}")
    return metric, int(k_text)


def parse_metrics(metrics: str | Sequence[str]) -> list[Spec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, Iterable):
        raise TypeError(f"metrics must be a name or a sequence of names, got {type(metrics).__name__}")
    specs: dict[str, Spec] = {}
    for name in metrics:
        metric, k = parse_metric(name)
        specs.setdefault(name, Spec(name, metric, k))
    if not specs:
        raise ValueError(f"no metric requested; {_valid_names_hint()}")
    return list(specs.values())
