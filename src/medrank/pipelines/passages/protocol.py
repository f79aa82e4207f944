"""The evaluation protocol of the CDV paper (Arnold et al., WWW 2020, Section 5).

For every (entity, aspect) query:

1. BM25 retrieves the top 64 passages from *all* passages of the evaluated
   documents, with the query text ``entity + " " + aspect`` (``/``, ``-``,
   ``:`` replaced by spaces, as in the paper's candidate index);
2. every true answer missing from the 64 is inserted by overwriting the
   lowest-ranked false candidates (the last one first);
3. the 64 are shuffled (one ``numpy.random.default_rng(seed)`` stream over the
   queries in corpus order), so no model profits from BM25's order or from ties;
4. each model re-ranks the 64; R@1, R@10 and MAP (plus MRR, nDCG@10) come from
   :func:`medrank.metrics.evaluate`.

A second setting ranks every passage of the corpus (no candidate list):
:func:`evaluate_full` with a ``rank_all`` function.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from medrank.data.medquad import PassageCorpus
from medrank.index import BM25Index
from medrank.index.topk import topk_stable
from medrank.metrics import evaluate
from medrank.records import Query, Ranking, Run

NUM_CANDIDATES = 64
METRICS = ("recall@1", "recall@10", "map", "mrr", "ndcg@10")
REPORT_NAMES = {"recall@1": "R@1", "recall@10": "R@10", "map": "MAP", "mrr": "MRR", "ndcg@10": "nDCG@10"}

_PUNCT = re.compile(r"[/\-:]")


def bm25_query_text(entity: str, aspect: str) -> str:
    return _PUNCT.sub(" ", f"{entity} {aspect}")


def query_fields(q: Query) -> tuple[str, str]:
    """``(entity, aspect)`` of a query."""
    try:
        return str(q.meta["entity"]), str(q.meta["aspect"])
    except KeyError as exc:
        raise ValueError(f"query {q.id!r} lacks meta[{exc}] (an (entity, aspect) query is needed)") from None


def passage_bm25(corpus: PassageCorpus) -> BM25Index:
    passages = corpus.passages
    return BM25Index(language="en").build([p.id for p in passages], [p.text for p in passages])


def build_candidates(
    corpus: PassageCorpus, k: int = NUM_CANDIDATES, seed: int = 13, bm25: BM25Index | None = None
) -> dict[str, list[str]]:
    """The shuffled ``k`` candidates of every query (true answers guaranteed inside)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    bm25 = bm25 or passage_bm25(corpus)
    ids = np.asarray(bm25.entry_ids, dtype=object)
    rng = np.random.default_rng(seed)
    out: dict[str, list[str]] = {}
    for q in corpus.queries:
        entity, aspect = query_fields(q)
        scores = bm25.query_scores(bm25_query_text(entity, aspect))
        top = [str(i) for i in ids[topk_stable(scores, min(k, len(ids)))]]
        relevant = sorted(corpus.qrels.relevant(q.id))
        missing = [r for r in relevant if r not in set(top)]
        if len(relevant) > k:
            raise ValueError(f"query {q.id!r} has {len(relevant)} true answers, more than k={k}")
        # overwrite the lowest-ranked false candidates, from the bottom up
        slot = len(top) - 1
        rel = set(relevant)
        for m in missing:
            if len(top) < k:
                top.append(m)
                continue
            while top[slot] in rel:
                slot -= 1
            top[slot] = m
            slot -= 1
        order = rng.permutation(len(top))
        out[q.id] = [top[i] for i in order]
    return out


class Reranker(Protocol):
    name: str

    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        """Scores of each query's candidates (same order as given)."""
        ...


def rerank(scores: Mapping[str, np.ndarray], candidates: Mapping[str, Sequence[str]]) -> Run:
    """Sort each candidate list by score (stable: ties keep the shuffled order)."""
    run: Run = {}
    for qid, cands in candidates.items():
        s = np.asarray(scores[qid], dtype=np.float64)
        if len(s) != len(cands):
            raise ValueError(f"query {qid!r}: {len(s)} scores for {len(cands)} candidates")
        order = np.argsort(-s, kind="stable")
        run[qid] = Ranking(qid, tuple(cands[i] for i in order), tuple(float(s[i]) for i in order))
    return run


def score_run(corpus: PassageCorpus, run: Run, metrics: Sequence[str] = METRICS) -> dict[str, float]:
    values = evaluate(corpus.qrels, run, list(metrics))
    return {REPORT_NAMES.get(m, m): round(float(v), 6) for m, v in values.items()}


def evaluate_reranker(
    reranker: Reranker, corpus: PassageCorpus, candidates: Mapping[str, Sequence[str]], metrics: Sequence[str] = METRICS
) -> dict[str, Any]:
    """Metrics (fractions) of ``reranker`` on the candidate lists, plus the per-query scores and timing."""
    t0 = time.perf_counter()
    scores = reranker.score(list(corpus.queries), candidates)
    seconds = time.perf_counter() - t0
    run = rerank(scores, candidates)
    return {"metrics": score_run(corpus, run, metrics), "seconds": round(seconds, 2), "scores": scores, "run": run}


def evaluate_full(
    rank_all: Callable[[Sequence[Query], int], Run], corpus: PassageCorpus, k: int = 100, metrics: Sequence[str] = METRICS
) -> dict[str, Any]:
    """Full-corpus retrieval: every passage of the corpus is a candidate (top ``k`` kept)."""
    t0 = time.perf_counter()
    run = rank_all(list(corpus.queries), k)
    seconds = time.perf_counter() - t0
    return {"metrics": score_run(corpus, run, metrics), "seconds": round(seconds, 2), "run": run}


def zscore(scores: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for q, s in scores.items():
        s = np.asarray(s, dtype=np.float64)
        sd = s.std()
        out[q] = (s - s.mean()) / sd if sd > 0 else s - s.mean()
    return out


def fuse(parts: Sequence[tuple[Mapping[str, np.ndarray], float]]) -> dict[str, np.ndarray]:
    """Weighted sum of per-query z-normalised score lists (the hybrid re-ranker)."""
    normed = [(zscore(s), w) for s, w in parts]
    qids = normed[0][0].keys()
    return {q: sum(w * s[q] for s, w in normed) for q in qids}


class FixedScores:
    """A reranker that returns precomputed scores (for fusions and cached runs)."""

    def __init__(self, name: str, scores: Mapping[str, np.ndarray]) -> None:
        self.name = name
        self._scores = scores

    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        return {q.id: np.asarray(self._scores[q.id]) for q in queries}
