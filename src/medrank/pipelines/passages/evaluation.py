"""The ``medquad`` evaluator: CDV and every baseline under the paper's protocol on one corpus.

``medrank evaluate --dataset medquad [--split valid|train|all] [--test FILE] [--model CDV_RUN]
[--set systems='["bm25","tfidf","dense","cdv","cross-encoder","dssm","knrm","hybrid"]']
[--set cross_encoder=RUN] [--set dssm=RUN] [--set knrm=RUN] [--set full=true] [--set seed=13] [--set cascade_depth=10]``

``cascade_depth`` > 0 runs the cross-encoder only on the top passages of the
CDV + BM25 hybrid (a CPU budget) instead of on all 64 candidates.

``--test`` takes any file in the visible format: a MedQuAD XML file or folder,
or a JSONL of documents/queries (see :mod:`medrank.data.medquad`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.config import task_option
from medrank.data.medquad import PassageCorpus, load_passage_corpus
from medrank.pipelines.passages.protocol import (
    NUM_CANDIDATES,
    FixedScores,
    build_candidates,
    evaluate_full,
    evaluate_reranker,
    fuse,
)

log = logging.getLogger(__name__)

ALL_SYSTEMS = ("bm25", "tfidf", "dense", "dssm", "knrm", "cdv", "hybrid-bm25", "cross-encoder", "hybrid")
METRIC_NAMES = ["R@1", "R@10", "MAP", "MRR", "nDCG@10"]


def cascade(
    first: Mapping[str, np.ndarray],
    tops: Mapping[str, Sequence[str]],
    second: Mapping[str, np.ndarray],
    candidates: Mapping[str, Sequence[str]],
    weight: float = 0.5,
) -> dict[str, np.ndarray]:
    """Scores of a two-stage ranking: the first stage's top passages re-ordered by ``weight``·z(first) +
    (1 − weight)·z(second) above every other candidate, which keep the first stage's order."""
    out = {}
    for q, cands in candidates.items():
        f = np.asarray(first[q], dtype=np.float64)
        pos = {c: i for i, c in enumerate(cands)}
        idx = np.array([pos[c] for c in tops[q]])
        z = fuse([({q: f[idx]}, weight), ({q: np.asarray(second[q], dtype=np.float64)}, 1.0 - weight)])[q]
        final = f - f.max() - 1.0 - (np.abs(z).max() if len(z) else 0.0)  # all below any re-scored passage
        final[idx] = z
        out[q] = final
    return out


def _resolve_run(value: Any) -> Path | None:
    if value in (None, "", False):
        return None
    p = Path(str(value))
    if not p.exists():
        raise FileNotFoundError(f"{p} not found")
    return p


def evaluate_systems(
    corpus: PassageCorpus,
    systems: list[str],
    cdv_run: Path | None = None,
    cross_encoder_run: Path | None = None,
    dssm_run: Path | None = None,
    knrm_run: Path | None = None,
    seed: int = 13,
    k: int = NUM_CANDIDATES,
    full: bool = True,
    hybrid_weight: float = 0.5,
    show_progress: bool = True,
    cascade_depth: int = 0,
) -> dict[str, Any]:
    """Metrics (fractions) of each requested system on ``corpus``; ``full`` adds full-corpus retrieval."""
    from medrank.pipelines.passages import baselines

    unknown = set(systems) - set(ALL_SYSTEMS)
    if unknown:
        raise ValueError(f"unknown systems {sorted(unknown)}; known: {list(ALL_SYSTEMS)}")
    t0 = time.perf_counter()
    bm25 = baselines.BM25Ranker(corpus)
    candidates = build_candidates(corpus, k=k, seed=seed, bm25=bm25.index)
    rows: dict[str, dict[str, float]] = {}
    full_rows: dict[str, dict[str, float]] = {}
    details: dict[str, Any] = {}
    scores: dict[str, Any] = {}

    def run(name: str, ranker: Any, rank_all: bool) -> None:
        res = evaluate_reranker(ranker, corpus, candidates)
        rows[name] = res["metrics"]
        scores[name] = res["scores"]
        details[name] = {"rerank_seconds": res["seconds"]}
        log.info("%s: %s", name, res["metrics"])
        if full and rank_all and hasattr(ranker, "rank_all"):
            fres = evaluate_full(ranker.rank_all, corpus)
            full_rows[name] = fres["metrics"]
            details[name]["full_seconds"] = fres["seconds"]

    if "bm25" in systems:
        run("BM25", bm25, True)
    if "tfidf" in systems:
        run("TF-IDF", baselines.TfidfRanker(corpus), True)
    if "dense" in systems:
        from medrank.encoders import load_encoder

        run("Dense bi-encoder (MiniLM)", baselines.DenseRanker(corpus, load_encoder("minilm"), show_progress=show_progress), True)
    if "dssm" in systems and dssm_run is not None:
        from medrank.pipelines.passages.neural import load_neural_ranker

        run("DSSM", load_neural_ranker(dssm_run, corpus), False)
    if "knrm" in systems and knrm_run is not None:
        from medrank.pipelines.passages.neural import load_neural_ranker

        run("KNRM", load_neural_ranker(knrm_run, corpus), False)
    if "cdv" in systems and cdv_run is not None:
        from medrank.pipelines.passages.cdv import TrainedCDV

        t = time.perf_counter()
        index = TrainedCDV(cdv_run).build_index(list(corpus.documents), show_progress=show_progress)
        details["cdv_index_seconds"] = round(time.perf_counter() - t, 2)
        run("CDV", baselines.CDVRanker(index), True)
    if "hybrid-bm25" in systems and "CDV" in scores and "BM25" in scores:
        fused = fuse([(scores["CDV"], hybrid_weight), (scores["BM25"], 1.0 - hybrid_weight)])
        run(f"Hybrid CDV + BM25 (z-score, w={hybrid_weight})", FixedScores("hybrid-bm25", fused), False)
    if "cross-encoder" in systems and cross_encoder_run is not None:
        from medrank.pipelines.passages.cross_encoder import CrossEncoderRanker

        ce = CrossEncoderRanker.load(cross_encoder_run, corpus, show_progress=show_progress)
        if cascade_depth <= 0:
            run("Cross-encoder (MiniLM)", ce, False)
        else:
            first_name = next((n for n in scores if n.startswith("Hybrid CDV + BM25")), "CDV")
            first = scores.get(first_name)
            if first is None:
                raise ValueError("a cross-encoder cascade needs CDV scores (add 'cdv' and a CDV run)")
            t = time.perf_counter()
            tops = {q: [candidates[q][i] for i in np.argsort(-np.asarray(first[q]), kind="stable")[:cascade_depth]]
                    for q in candidates}
            ce_scores = ce.score(list(corpus.queries), tops)
            details["cross_encoder_cascade_seconds"] = round(time.perf_counter() - t, 2)
            details["cross_encoder_cascade"] = {"first_stage": first_name, "depth": cascade_depth}
            run(f"{first_name} → cross-encoder top-{cascade_depth}",
                FixedScores("cascade", cascade(first, tops, ce_scores, candidates, hybrid_weight)), False)
    if "hybrid" in systems and "CDV" in scores and "Cross-encoder (MiniLM)" in scores:
        fused = fuse([(scores["CDV"], hybrid_weight), (scores["Cross-encoder (MiniLM)"], 1.0 - hybrid_weight)])
        run(f"Hybrid CDV + cross-encoder (z-score, w={hybrid_weight})", FixedScores("hybrid", fused), False)
    return {
        "dataset": "medquad",
        "corpus": corpus.name,
        "corpus_stats": corpus.describe(),
        "protocol": f"BM25 top-{k} candidates from all corpus passages, true answers inserted over the lowest false ones, "
        f"shuffled (seed {seed})",
        "systems": rows,
        "full_corpus": full_rows,
        "metric_names": METRIC_NAMES,
        "details": details,
        "seconds": round(time.perf_counter() - t0, 1),
        "_scores": scores,
        "_candidates": candidates,
    }


def evaluate_medquad(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """Registered evaluator for ``medrank evaluate --dataset medquad``."""
    seed = task_option(options, "seed", 13, int)
    corpus = load_passage_corpus(
        test,
        split or "valid",
        valid_fraction=task_option(options, "valid_fraction", 0.2, float),
        seed=seed,
        min_passages=task_option(options, "min_passages", 2, int),
    )
    systems = options.get("systems") or list(ALL_SYSTEMS)
    if isinstance(systems, str):
        systems = [s.strip() for s in systems.split(",") if s.strip()]
    payload = evaluate_systems(
        corpus,
        list(systems),
        cdv_run=_resolve_run(model or options.get("cdv")),
        cross_encoder_run=_resolve_run(options.get("cross_encoder")),
        dssm_run=_resolve_run(options.get("dssm")),
        knrm_run=_resolve_run(options.get("knrm")),
        seed=seed,
        k=task_option(options, "k", NUM_CANDIDATES, int),
        full=bool(options.get("full", True)),
        hybrid_weight=task_option(options, "hybrid_weight", 0.5, float),
        cascade_depth=task_option(options, "cascade_depth", 0, int),
    )
    payload.pop("_scores")
    payload.pop("_candidates")
    payload["split"] = split or ("valid" if test is None else None)
    payload["test_file"] = str(test) if test else None
    # full-corpus rows go into the same table with a suffix so the CLI prints them too
    for name, m in payload["full_corpus"].items():
        payload["systems"][f"{name} [full corpus]"] = m
    return payload
