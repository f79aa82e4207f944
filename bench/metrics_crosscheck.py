"""Cross-check medrank.metrics against ranx on real runs.

Runs BM25 concept retrieval (top 100) on the CHIP-CDN validation split (gold
candidates) and on NCBI-disease devel (MEDIC), then scores each run with
medrank and with ranx and reports the largest absolute difference per metric
(mean and per query).

    python bench/metrics_crosscheck.py
"""

from __future__ import annotations

import warnings

import common

from medrank.config import data_root
from medrank.metrics import evaluate
from medrank.retrieval.concept import ConceptRetriever
from medrank.retrieval.concept_data import default_language, load_candidates, load_eval_set

PAIRS = [("ndcg@5", "ndcg@5"), ("ndcg@10", "ndcg@10"), ("recall@5", "recall@5"), ("precision@5", "precision@5"),
         ("map", "map"), ("mrr", "mrr"), ("acc@1", "hit_rate@1"), ("acc@5", "hit_rate@5")]


def main() -> None:
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate as rx_evaluate

    rows = []
    for dataset, split in (("chip-cdn", "valid"), ("ncbi-disease", "devel")):
        eval_set = load_eval_set(dataset, split)
        concepts = load_candidates(dataset, "gold", eval_set=eval_set)
        retriever = ConceptRetriever.build(concepts, method="bm25", language=default_language(dataset))
        rankings = retriever.search(list(eval_set.queries), k=100)
        # ranx breaks ties by its own ordering; keep strictly decreasing scores so both rank identically
        run = {r.query_id: {i: float(len(r.ids) - n) for n, i in enumerate(r.ids)} for r in rankings if r.ids}
        qrels = {q: dict(v) for q, v in eval_set.qrels.items() if any(g > 0 for g in v.values())}
        ours_mean, ours_pq = evaluate(qrels, run, [a for a, _ in PAIRS], return_per_query=True)
        rx_run = {q: run.get(q, {}) for q in qrels}
        rx_run = {q: v for q, v in rx_run.items() if v}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rq, rr = RQrels(qrels), RRun(rx_run)
            rx_mean = rx_evaluate(rq, rr, [b for _, b in PAIRS], make_comparable=True)
            rx_pq = rr.scores
        for ours_name, rx_name in PAIRS:
            # ranx averages over queries in qrels, filling missing runs with 0 (make_comparable), as medrank does
            diff_pq = max(abs(ours_pq[ours_name][q] - rx_pq[rx_name].get(q, 0.0)) for q in qrels)
            rows.append({"dataset": dataset, "metric": ours_name, "medrank": round(ours_mean[ours_name], 6),
                         "ranx": round(float(rx_mean[rx_name]), 6),
                         "abs_diff_mean": abs(ours_mean[ours_name] - float(rx_mean[rx_name])),
                         "max_abs_diff_per_query": diff_pq, "n_queries": len(qrels)})
            print(rows[-1])
    md = ["| dataset | metric | medrank | ranx | mean \\|diff\\| | max per-query \\|diff\\| |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['dataset']} | {r['metric']} | {r['medrank']:.6f} | {r['ranx']:.6f} | "
                  f"{r['abs_diff_mean']:.2e} | {r['max_abs_diff_per_query']:.2e} |")
    common.write("metrics_crosscheck", {"environment": common.environment(None, None, str(data_root())), "rows": rows},
                 "\n".join(md))


if __name__ == "__main__":
    import argparse

    # no options: the parser only answers --help (and refuses typos) instead of starting the run
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
