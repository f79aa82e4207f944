"""Evaluation metrics shared by every medrank pipeline.

Ranking metrics are requested by name, ranx style::

    evaluate(qrels, run, ["ndcg@10", "recall@5", "map", "mrr", "acc@1"])
    -> {"ndcg@10": 0.71, "recall@5": 0.64, "map": 0.58, "mrr": 0.66, "acc@1": 0.52}

Names are case-insensitive; ``@k`` (k a positive integer) truncates the ranking
at depth k, and a name without ``@k`` uses the whole ranking. Result keys are
the names exactly as the caller spelled them.

Supported names
---------------
Relevance is graded: an item is *relevant* when its qrels grade is ``>= 1``
(grade 0 and negative grades mean judged non-relevant; unjudged items are
non-relevant). ``rel`` below is the set of relevant items of a query, ``R = |rel|``.

``ndcg`` / ``ndcg@k``
    ``DCG@k / IDCG@k`` with ``DCG@k = sum_{i<=k} gain_i / log2(i + 1)`` (rank i is
    1-based) and ``gain = grade`` (linear gain, Järvelin & Kekäläinen 2002; this
    is the trec_eval ``ndcg`` and ranx ``"ndcg"`` definition, **not** ranx's
    ``"ndcg_burges"`` with gain ``2**grade - 1``). IDCG@k is the DCG of all
    judged relevant items sorted by grade, truncated at k -- it does not depend
    on how many items the run returned.
``recall`` / ``recall@k``
    ``|rel ∩ top-k| / R``.
``precision`` / ``precision@k``
    ``|rel ∩ top-k| / k`` (a ranking shorter than k is still divided by k, as in
    trec_eval and ranx). Without ``@k`` the denominator is the ranking length
    (0 for an empty ranking).
``map`` / ``map@k``
    Average precision (trec_eval): ``sum over relevant items at ranks r <= k of
    precision@r``, divided by ``R`` (all relevant items, also for ``map@k``,
    as in ranx). Relevant items that were not retrieved contribute 0.
``mrr`` / ``mrr@k``
    ``1 / rank`` of the first relevant item (0 if none in the top k).
``acc@k`` / ``hit_rate@k``
    Hit rate, BioSyn's Acc@k: 1 if any relevant item is in the top k, else 0.
    ``hit_rate`` is an alias of ``acc``; ``acc`` without ``@k`` looks at the
    whole ranking.
``r-precision`` (alias ``r_precision``)
    ``|rel ∩ top-R| / R``; takes no ``@k``.

Averaging
---------
Every metric is the arithmetic mean over the queries **in qrels that have at
least one relevant item**. Queries with no relevant item are skipped (their
score would be undefined); queries missing from the run score 0; run queries
absent from qrels are ignored. If no qrels query has a relevant item,
:func:`evaluate` raises ``ValueError`` rather than returning a meaningless
average. This matches ranx with ``make_comparable=True`` on qrels whose queries
all have a relevant item.

Tie-breaking
------------
* A :class:`~medrank.records.Ranking` is already ranked: its order is used as
  is and is never re-sorted (its scores are only checked for NaN).
* A mapping ``item_id -> score`` is sorted by descending score with a
  **stable** sort, so equal scores keep the mapping's insertion order -- the
  same rule as :class:`~medrank.records.Ranking` ("ties keep the order they
  were produced in"). Item ids never break ties.

ranx (0.3.21) sorts a ``ranx.Run`` with numba's ``np.argsort`` (quicksort):
for up to 15 items per query that falls back to insertion sort and is exactly
this stable rule; for longer rankings with tied scores ranx's order is an
artefact of its unstable quicksort (neither insertion order nor item id), and
evaluating a plain ``dict`` through ``ranx.evaluate`` even reverses tied items.
medrank's rule is deterministic and documented instead; on tie-free rankings
(or ties within <= 15 items per query) the two agree to floating-point
precision, which ``tests/test_metrics.py`` checks.

Set-based and classification metrics
------------------------------------
For answers that are *sets* of terms (multi-term normalisation) use
:func:`exact_set_accuracy`, :func:`set_prf` and :func:`evaluate_sets`; for
pair classification use :func:`binary_prf`. :func:`to_markdown_table` renders
metric dictionaries of several systems for bench reports.

Everything is plain numpy/python, vectorised over all (query, relevant hit)
pairs: 10k queries x 100 items evaluate in about half a second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal, overload

import numpy as np

from medrank.records import Qrels, Ranking, Run

__all__ = [
    "SUPPORTED_METRICS",
    "binary_prf",
    "evaluate",
    "evaluate_sets",
    "exact_set_accuracy",
    "parse_metric",
    "set_prf",
    "to_markdown_table",
]

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
class _Spec:
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


def _parse_metrics(metrics: str | Sequence[str]) -> list[_Spec]:
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, Iterable):
        raise TypeError(f"metrics must be a name or a sequence of names, got {type(metrics).__name__}")
    specs: dict[str, _Spec] = {}
    for name in metrics:
        metric, k = parse_metric(name)
        specs.setdefault(name, _Spec(name, metric, k))
    if not specs:
        raise ValueError(f"no metric requested; {_valid_names_hint()}")
    return list(specs.values())


# ---------------------------------------------------------------------------
# Flattening qrels + run into per-hit arrays
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Flat:
    """All (query, relevant retrieved item) hits of the evaluated queries, in rank order.

    ``hit_q`` is sorted (query-major), and within a query ``hit_pos`` increases.
    """

    qids: list[str]
    n_rel: np.ndarray  # (nq,) number of relevant items R
    length: np.ndarray  # (nq,) ranking length
    hit_q: np.ndarray  # (H,) query index of each hit
    hit_pos: np.ndarray  # (H,) 0-based rank of each hit
    hit_gain: np.ndarray  # (H,) grade of each hit
    hit_count: np.ndarray  # (H,) 1-based number of hits up to and including this one
    first_hit: np.ndarray  # (nq,) 0-based rank of the first hit, -1 if none
    ideal_q: np.ndarray  # (M,) query index of each relevant item
    ideal_pos: np.ndarray  # (M,) 0-based rank in the ideal ranking
    ideal_gain: np.ndarray  # (M,) grades sorted descending within each query


def _relevant_grades(qrels: Qrels | Mapping[str, Mapping[str, int]]) -> Iterator[tuple[str, dict[str, int]]]:
    """Yield ``(query_id, {item: grade >= 1})`` for every qrels query (validated)."""
    if not isinstance(qrels, Mapping):
        raise TypeError(
            f"qrels must be a Qrels or a mapping query_id -> {{item_id: grade}}, got {type(qrels).__name__}"
        )
    trusted = isinstance(qrels, Qrels)  # grades validated on construction
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise TypeError(f"qrels[{qid!r}] must be a mapping item_id -> grade, got {type(judged).__name__}")
        if not trusted:
            for iid, grade in judged.items():
                if not isinstance(grade, Integral) or isinstance(grade, bool):
                    raise TypeError(f"relevance grade for ({qid!r}, {iid!r}) must be an int, got {grade!r}")
        yield qid, {iid: int(g) for iid, g in judged.items() if g >= 1}


def _hit_positions(qid: str, ranked: object, rel: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (0-based ranks of relevant items, their grades, ranking length) for one query."""
    if isinstance(ranked, Ranking):
        ids = ranked.ids
        try:
            scores = np.asarray(ranked.scores, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"run[{qid!r}]: scores must be numbers ({exc})") from None
        if np.isnan(scores).any():
            raise ValueError(f"run[{qid!r}]: NaN score(s) in the ranking")
        if len(set(ids)) != len(ids):
            raise ValueError(f"run[{qid!r}]: the ranking lists an item id more than once")
        gains = np.fromiter((rel.get(i, 0) for i in ids), dtype=np.float64, count=len(ids))
        pos = np.flatnonzero(gains)
        return pos, gains[pos], len(ids)
    if isinstance(ranked, Mapping):
        ids = list(ranked.keys())
        try:
            scores = np.fromiter(ranked.values(), dtype=np.float64, count=len(ids))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"run[{qid!r}]: scores must be numbers ({exc})") from None
        if np.isnan(scores).any():
            bad = [i for i, s in zip(ids, scores, strict=True) if math.isnan(s)][:5]
            raise ValueError(f"run[{qid!r}]: NaN score for item(s) {bad}")
        gains = np.fromiter((rel.get(i, 0) for i in ids), dtype=np.float64, count=len(ids))
        if not gains.any():
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), len(ids)
        # Stable sort: equal scores keep the mapping's insertion order.
        gains = gains[np.argsort(-scores, kind="stable")]
        pos = np.flatnonzero(gains)
        return pos, gains[pos], len(ids)
    raise TypeError(
        f"run[{qid!r}] must be a Ranking or a mapping item_id -> score, got {type(ranked).__name__}"
    )


def _flatten(qrels: Qrels | Mapping[str, Mapping[str, int]], run: Mapping[str, object]) -> _Flat:
    if not isinstance(run, Mapping):
        raise TypeError(
            f"run must be a mapping query_id -> Ranking or {{item_id: score}}, got {type(run).__name__}"
        )
    qids: list[str] = []
    n_rel: list[int] = []
    lengths: list[int] = []
    pos_chunks: list[np.ndarray] = []
    gain_chunks: list[np.ndarray] = []
    ideal_chunks: list[list[int]] = []
    for qid, rel in _relevant_grades(qrels):
        if not rel:
            continue
        ranked = run.get(qid)
        if ranked is None:
            pos, gain, length = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 0
        else:
            pos, gain, length = _hit_positions(qid, ranked, rel)
        qids.append(qid)
        n_rel.append(len(rel))
        lengths.append(length)
        pos_chunks.append(pos)
        gain_chunks.append(gain)
        ideal_chunks.append(sorted(rel.values(), reverse=True))
    if not qids:
        raise ValueError("no query in qrels has a relevant item (grade >= 1); ranking metrics are undefined")
    nq = len(qids)
    hits_per_q = np.fromiter((len(p) for p in pos_chunks), dtype=np.int64, count=nq)
    hit_q = np.repeat(np.arange(nq), hits_per_q)
    hit_pos = np.concatenate(pos_chunks).astype(np.int64, copy=False)
    hit_gain = np.concatenate(gain_chunks)
    starts = np.concatenate(([0], np.cumsum(hits_per_q)[:-1]))
    hit_count = np.arange(len(hit_q)) - starts[hit_q] + 1
    first_hit = np.full(nq, -1, dtype=np.int64)
    has = hits_per_q > 0
    first_hit[has] = hit_pos[starts[has]]
    n_rel_arr = np.asarray(n_rel, dtype=np.int64)
    ideal_q = np.repeat(np.arange(nq), n_rel_arr)
    ideal_starts = np.concatenate(([0], np.cumsum(n_rel_arr)[:-1]))
    ideal_pos = np.arange(len(ideal_q)) - ideal_starts[ideal_q]
    ideal_gain = np.fromiter(
        (g for chunk in ideal_chunks for g in chunk), dtype=np.float64, count=len(ideal_q)
    )
    return _Flat(
        qids=qids,
        n_rel=n_rel_arr,
        length=np.asarray(lengths, dtype=np.int64),
        hit_q=hit_q,
        hit_pos=hit_pos,
        hit_gain=hit_gain,
        hit_count=hit_count,
        first_hit=first_hit,
        ideal_q=ideal_q,
        ideal_pos=ideal_pos,
        ideal_gain=ideal_gain,
    )


def _discount(pos: np.ndarray) -> np.ndarray:
    """1 / log2(rank + 1) for 0-based positions (rank = pos + 1)."""
    return 1.0 / np.log2(pos + 2.0)


def _compute(flat: _Flat, metric: str, k: int | None) -> np.ndarray:
    nq = len(flat.qids)
    if k is None:
        mask = np.ones(len(flat.hit_q), dtype=bool)
    else:
        mask = flat.hit_pos < k
    q = flat.hit_q[mask]

    def per_query(weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(q, weights=weights, minlength=nq).astype(np.float64, copy=False)

    if metric == "ndcg":
        dcg = per_query(flat.hit_gain[mask] * _discount(flat.hit_pos[mask]))
        imask = slice(None) if k is None else flat.ideal_pos < k
        idcg = np.bincount(
            flat.ideal_q[imask],
            weights=flat.ideal_gain[imask] * _discount(flat.ideal_pos[imask]),
            minlength=nq,
        )
        return dcg / idcg  # idcg > 0: every evaluated query has a relevant item
    if metric == "recall":
        return per_query() / flat.n_rel
    if metric == "precision":
        hits = per_query()
        if k is not None:
            return hits / k
        return np.divide(hits, flat.length, out=np.zeros(nq), where=flat.length > 0)
    if metric == "hit_rate":
        return (per_query() > 0).astype(np.float64)
    if metric == "map":
        precision_at_hit = flat.hit_count[mask] / (flat.hit_pos[mask] + 1.0)
        return per_query(precision_at_hit) / flat.n_rel
    if metric == "mrr":
        found = flat.first_hit >= 0
        if k is not None:
            found &= flat.first_hit < k
        out = np.zeros(nq)
        out[found] = 1.0 / (flat.first_hit[found] + 1.0)
        return out
    if metric == "r-precision":
        in_top_r = flat.hit_pos < flat.n_rel[flat.hit_q]
        return np.bincount(flat.hit_q[in_top_r], minlength=nq) / flat.n_rel
    raise AssertionError(f"unhandled metric {metric!r}")  # pragma: no cover - guarded by parse_metric


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
    specs = _parse_metrics(metrics)
    flat = _flatten(qrels, run)
    means: dict[str, float] = {}
    per_query: dict[str, dict[str, float]] = {}
    for spec in specs:
        scores = _compute(flat, spec.metric, spec.k)
        means[spec.name] = float(scores.mean())
        if return_per_query:
            per_query[spec.name] = dict(zip(flat.qids, scores.tolist(), strict=True))
    if return_per_query:
        return means, per_query
    return means


# ---------------------------------------------------------------------------
# Set-based metrics (multi-term answers) and binary classification
# ---------------------------------------------------------------------------


def _as_set(value: object, what: str) -> frozenset[str]:
    if isinstance(value, str | bytes):
        raise TypeError(f"{what} must be a set of terms, got the string {value!r} (wrap it: {{{value!r}}})")
    if not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a set of terms, got {type(value).__name__}")
    return frozenset(value)


def _paired_sets(
    gold: Sequence[Iterable[str]], predicted: Sequence[Iterable[str]]
) -> list[tuple[frozenset[str], frozenset[str]]]:
    if isinstance(gold, str | bytes) or isinstance(predicted, str | bytes):
        raise TypeError("gold and predicted must be sequences of term sets, not strings")
    gold_l, pred_l = list(gold), list(predicted)
    if len(gold_l) != len(pred_l):
        raise ValueError(f"gold has {len(gold_l)} examples but predicted has {len(pred_l)}")
    if not gold_l:
        raise ValueError("no examples to evaluate (gold and predicted are empty)")
    return [
        (_as_set(g, f"gold[{i}]"), _as_set(p, f"predicted[{i}]"))
        for i, (g, p) in enumerate(zip(gold_l, pred_l, strict=True))
    ]


def exact_set_accuracy(gold: Sequence[set[str]], predicted: Sequence[set[str]]) -> float:
    """Fraction of examples whose predicted term set equals the gold set exactly.

    Order and duplicates inside an example do not matter; a partial overlap scores 0.
    """
    pairs = _paired_sets(gold, predicted)
    return sum(g == p for g, p in pairs) / len(pairs)


def _safe_div(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _safe_div(2.0 * precision * recall, precision + recall)


def set_prf(
    gold: Sequence[set[str]],
    predicted: Sequence[set[str]],
    average: Literal["micro", "macro"] = "micro",
) -> dict[str, float]:
    """Precision, recall and F1 of predicted term sets against gold term sets.

    ``average="micro"`` pools the counts over all examples:
    ``P = sum|g ∩ p| / sum|p|``, ``R = sum|g ∩ p| / sum|g|``, ``F1 = 2PR / (P + R)``.

    ``average="macro"`` (example-based) averages per-example ``P_i = |g ∩ p| / |p|``,
    ``R_i = |g ∩ p| / |g|`` and ``F1_i`` over examples; F1 is the mean of ``F1_i``
    (not the harmonic mean of the macro P and R). An example whose gold and predicted
    sets are both empty scores 1 on all three.

    A zero denominator gives 0 (``P`` with no prediction at all, etc.).
    """
    pairs = _paired_sets(gold, predicted)
    if average == "micro":
        tp = sum(len(g & p) for g, p in pairs)
        n_pred = sum(len(p) for _, p in pairs)
        n_gold = sum(len(g) for g, _ in pairs)
        precision, recall = _safe_div(tp, n_pred), _safe_div(tp, n_gold)
        return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}
    if average == "macro":
        ps, rs, fs = [], [], []
        for g, p in pairs:
            if not g and not p:
                ps.append(1.0)
                rs.append(1.0)
                fs.append(1.0)
                continue
            tp = len(g & p)
            pi, ri = _safe_div(tp, len(p)), _safe_div(tp, len(g))
            ps.append(pi)
            rs.append(ri)
            fs.append(_f1(pi, ri))
        n = len(pairs)
        return {"precision": sum(ps) / n, "recall": sum(rs) / n, "f1": sum(fs) / n}
    raise ValueError(f"average must be 'micro' or 'macro', got {average!r}")


def evaluate_sets(
    gold: Sequence[set[str]],
    predicted: Sequence[set[str]],
    split_by_size: bool = True,
) -> dict[str, float]:
    """Exact-set accuracy overall and, for terminology normalisation, by gold-set size.

    Returns ``{"total": acc, "n_total": n}`` and, with ``split_by_size``, also
    ``"single"``/``"n_single"`` (gold set of exactly one term) and ``"multi"``/``"n_multi"``
    (gold set of two or more terms). An empty subset has accuracy ``nan`` (rendered
    as ``-`` by :func:`to_markdown_table`). With ``split_by_size`` every gold set must be
    non-empty (an empty one is neither single nor multi): ``ValueError`` otherwise.
    """
    pairs = _paired_sets(gold, predicted)
    correct = [g == p for g, p in pairs]
    out: dict[str, float] = {"total": sum(correct) / len(pairs), "n_total": len(pairs)}
    if not split_by_size:
        return out
    single: list[bool] = []
    multi: list[bool] = []
    for i, ((g, _), ok) in enumerate(zip(pairs, correct, strict=True)):
        if not g:
            raise ValueError(f"gold[{i}] is empty: it is neither a single- nor a multi-term answer")
        (single if len(g) == 1 else multi).append(ok)
    out["single"] = sum(single) / len(single) if single else math.nan
    out["n_single"] = len(single)
    out["multi"] = sum(multi) / len(multi) if multi else math.nan
    out["n_multi"] = len(multi)
    return out


def _as_binary(values: Sequence[int | bool], what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of 0/1 labels, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{what} must hold 0/1 (or bool) labels, got dtype {arr.dtype}")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        raise ValueError(f"{what} must hold only 0/1 labels; found {arr[bad][:5].tolist()}")
    return arr.astype(bool)


def binary_prf(y_true: Sequence[int | bool], y_pred: Sequence[int | bool]) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of binary predictions (positive class = 1/True).

    A zero denominator (no predicted or no true positives) gives 0.
    """
    t, p = _as_binary(y_true, "y_true"), _as_binary(y_pred, "y_pred")
    if len(t) != len(p):
        raise ValueError(f"y_true has {len(t)} labels but y_pred has {len(p)}")
    if len(t) == 0:
        raise ValueError("no labels to evaluate")
    tp = int(np.sum(t & p))
    precision = _safe_div(tp, int(p.sum()))
    recall = _safe_div(tp, int(t.sum()))
    return {
        "accuracy": float(np.mean(t == p)),
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
    }


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def _lookup(values: Mapping[str, float], metric: str) -> object:
    if metric in values:
        return values[metric]
    folded = metric.lower()
    for key, value in values.items():
        if key.lower() == folded:
            return value
    return None


def to_markdown_table(
    rows: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str],
    scale: float = 100,
    digits: int = 2,
    *,
    name_header: str = "system",
) -> str:
    """Render ``{system: {metric: value}}`` as a GitHub markdown table.

    One row per system (in mapping order), one right-aligned column per metric.
    Values are multiplied by ``scale`` (100 turns fractions into percentages) and
    shown with ``digits`` decimals; a missing metric (looked up exactly, then
    case-insensitively) or a NaN value shows as ``-``.
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    if not metrics:
        raise ValueError("metrics must name at least one column")
    if not isinstance(digits, Integral) or isinstance(digits, bool) or digits < 0:
        raise ValueError(f"digits must be a non-negative int, got {digits!r}")
    if not isinstance(scale, Real) or isinstance(scale, bool):
        raise TypeError(f"scale must be a number, got {scale!r}")

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")

    lines = [
        "| " + " | ".join([cell(name_header), *(cell(m) for m in metrics)]) + " |",
        "|" + "|".join([" --- ", *(" ---: " for _ in metrics)]) + "|",
    ]
    for system, values in rows.items():
        cells = [cell(system)]
        for metric in metrics:
            value = _lookup(values, metric)
            if value is None:
                cells.append("-")
                continue
            if not isinstance(value, Real) or isinstance(value, bool):
                raise TypeError(f"rows[{system!r}][{metric!r}] must be a number, got {value!r}")
            v = float(value)
            cells.append("-" if math.isnan(v) else f"{v * float(scale):.{int(digits)}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
