"""Speed of the similar-question pipeline on 1 CPU thread.

* STMT throughput (pairs/s): scoring validation pairs in batches of 64, and in
  batches of 20 (one re-ranking call of ``medrank similar``).
* ``similar`` latency: a new question → BM25 top-20 over a corpus of ≥ 50,000
  questions → the matcher re-ranks the 20 → sorted results. p50/p95/p99 over
  held-out validation questions used as new questions (each timed alone, after
  one warm-up call). The BM25 recall alone and the re-ranking alone are timed too.

Each STMT run found is timed: the paper-size one (N = 6) and the serving-size one (N = 3,
``stmt-small.yaml``), with transfer when that run exists.

Corpus: ``en`` = every distinct question of medical-question-pairs, RQE and
MedQuAD (52,915), matcher = the English STMT trained by ``similar_tables.py``;
``zh`` = every distinct question of CHIP-STS and KUAKE-QQR (35,491, below the
50k of the bar, reported for reference), matcher = the Chinese STMT.

    nice -n 10 python bench/similar_latency.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common

from medrank.config import data_root, set_threads
from medrank.data.questions import load_question_pairs, split_pairs, unique_questions
from medrank.pipelines.similar.corpus import language_corpus
from medrank.pipelines.similar.matchers import load_matcher
from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"en": "medical-question-pairs", "zh": "chip-sts"}


def pick_runs(dataset: str) -> list[Path]:
    """The paper-size STMT (N = 6) and the serving-size one (N = 3): of each, the run (with or without
    transfer) with the higher validation F1 (the visible validation split, as in the tables)."""
    base = ROOT / "runs" / "similar" / dataset
    runs = []
    for family in ("stmt", "stmt-small"):
        found = [base / n for n in (family, f"{family}+transfer") if (base / n / "matcher" / "matcher.json").exists()]
        if found:
            runs.append(max(found, key=lambda r: valid_f1(r)))
    if not runs:
        raise SystemExit(f"no STMT run under {base}; run bench/similar_tables.py --dataset {dataset} first")
    return runs


def valid_f1(run: Path) -> float:
    summary = run / "summary.json"
    return json.loads(summary.read_text(encoding="utf-8"))["valid"]["f1"] if summary.exists() else -1.0


def throughput(matcher, pairs, batch_size: int, repeats: int = 1) -> float:
    texts = [(p.text1, p.text2) for p in pairs]
    matcher.score(texts[:batch_size], batch_size)  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        for i in range(0, len(texts), batch_size):
            matcher.score(texts[i : i + batch_size], batch_size)
    return repeats * len(texts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--languages", default="en,zh")
    args = ap.parse_args()
    set_threads(args.threads)
    results, rows = {}, []
    for lang in args.languages.split(","):
        dataset = SETTINGS[lang]
        valid = split_pairs(load_question_pairs(dataset), 0.2, 13).valid
        t0 = time.perf_counter()
        corpus = language_corpus(lang)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        base_searcher = SimilarQuestionSearcher.build(corpus, None, language=lang, recall_k=20)
        build_s = time.perf_counter() - t0
        queries = unique_questions(valid)[: args.queries]
        for run in pick_runs(dataset):
            matcher = load_matcher(run)
            searcher = SimilarQuestionSearcher(base_searcher.index, matcher, recall_k=20)
            key = f"{lang}/{run.name}"
            results[key] = measure(searcher, matcher, queries, valid, dataset, run, load_s, build_s)
            res = results[key]
            print(key, res, flush=True)
            rows.append(
                f"| {lang} | {res['corpus_questions']:,} | {run.name} | {res['layers']} | {100 * valid_f1(run):.2f} | {res['similar_latency']['p50_ms']:.1f} | "
                f"{res['similar_latency']['p95_ms']:.1f} | {res['bm25_top20_latency']['p50_ms']:.1f} | "
                f"{res['rerank20_latency']['p50_ms']:.1f} | {res['stmt_pairs_per_s_batch64']:,} | {res['stmt_pairs_per_s_batch20']:,} |"
            )
    md = (
        f"`medrank similar` path on {args.threads} thread(s): BM25 top-20 recall + STMT re-ranking of the 20; "
        "queries = distinct validation questions (not in the training side). N = STMT layers (paper: 6); of each size the run with the higher validation F1 (with or without transfer).\n\n"
        "| corpus | questions | matcher run | N | valid F1 | similar p50 ms | similar p95 ms | BM25 top-20 p50 ms | re-rank 20 p50 ms "
        "| STMT pairs/s (batch 64) | STMT pairs/s (batch 20) |\n"
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(rows)
    )
    common.write("similar_latency", {"environment": common.environment(args.threads, 13, str(data_root())), "results": results}, md)


def measure(searcher: SimilarQuestionSearcher, matcher, queries: list[str], valid, dataset: str, run: Path,
            load_s: float, build_s: float) -> dict:
    """Latency of the full path, of the recall alone and of the re-ranking alone, plus pairs/s."""
    searcher.search(queries[0], k=10)  # warm-up
    full, recall_only, rerank_only = [], [], []
    for q in queries:
        t = time.perf_counter()
        searcher.search(q, k=10)
        full.append(time.perf_counter() - t)
        t = time.perf_counter()
        ranking = searcher.index.search(q, k=20)[0]
        recall_only.append(time.perf_counter() - t)
        cands = [(q, searcher.text(i)) for i in ranking.ids]
        t = time.perf_counter()
        if cands:
            matcher.score(cands)
        rerank_only.append(time.perf_counter() - t)
    res = {
        "dataset_of_matcher": dataset, "run": str(run.relative_to(ROOT)), "matcher": matcher.name,
        "corpus_questions": len(searcher), "corpus_load_s": round(load_s, 1), "index_build_s": round(build_s, 1),
        "n_queries": len(queries), "similar_latency": common.percentiles(full),
        "bm25_top20_latency": common.percentiles(recall_only), "rerank20_latency": common.percentiles(rerank_only),
        "stmt_pairs_per_s_batch64": round(throughput(matcher, valid[:1024], 64), 1),
        "stmt_pairs_per_s_batch20": round(throughput(matcher, valid[:400], 20), 1),
    }
    res["layers"] = len(getattr(getattr(matcher.module, "encoder", None), "layers", [])) or None
    return res


if __name__ == "__main__":
    main()
