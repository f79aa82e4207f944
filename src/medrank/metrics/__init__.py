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
pairs.

Layout (ranx's ``metrics/`` is the model): one file per ranking metric, :mod:`.names` parses
names, :mod:`.ranking` holds the name table and :func:`evaluate`, :mod:`.sets` the set and
classification metrics, :mod:`.reporting` the Markdown tables.
"""

from medrank.metrics.names import SUPPORTED_METRICS, parse_metric
from medrank.metrics.ranking import METRICS, evaluate
from medrank.metrics.reporting import to_markdown_table
from medrank.metrics.sets import binary_prf, evaluate_sets, exact_set_accuracy, set_prf

__all__ = [
    "METRICS",
    "SUPPORTED_METRICS",
    "binary_prf",
    "evaluate",
    "evaluate_sets",
    "exact_set_accuracy",
    "parse_metric",
    "set_prf",
    "to_markdown_table",
]
