"""Zero-shot concept retrieval: BM25, dense (each offline encoder) and hybrid.

* CHIP-CDN: the validation side of the fixed-seed split of the visible train
  file (seed 13, 20 %, grouped by mention text), candidates = the gold names of
  the visible train file (~3.5k, the Bi-HardNCE setting) and the full
  ICD-10 Beijing vocabulary (37,645 distinct names of 40,474 rows).
* NCBI-disease devel against MEDIC (names + synonyms, max over synonyms).

Metrics: NDCG@5, Recall@5 (Bi-HardNCE), Acc@1, Acc@5 (BioSyn), MRR.

    python bench/concept_zero_shot.py [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import common  # noqa: F401
from medrank.config import data_root, seed_everything, set_threads
from medrank.encoders import load_encoder
from medrank.metrics import to_markdown_table
from medrank.pipelines.concept import DEFAULT_METRICS, ConceptRetriever, evaluate_retriever
from medrank.pipelines.concept_data import load_candidates, load_eval_set

SETTINGS = [
    # (dataset, split, candidates, language, methods)
    ("chip-cdn", "valid", "gold", "zh", [("bm25", None), ("dense", "e5-small"), ("dense", "minilm"), ("hybrid", "e5-small")]),
    ("chip-cdn", "valid", "vocab", "zh", [("bm25", None), ("dense", "e5-small"), ("hybrid", "e5-small")]),
    ("ncbi-disease", "devel", "medic", "en", [("bm25", None), ("dense", "minilm"), ("dense", "e5-small"), ("hybrid", "minilm")]),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    encoders = {}
    results = []
    tables = []
    for dataset, split, cand, lang, methods in SETTINGS:
        eval_set = load_eval_set(dataset, split)
        concepts = load_candidates(dataset, "gold" if cand == "medic" else cand, eval_set=eval_set)
        rows = {}
        for method, enc_name in methods:
            enc = None
            if enc_name:
                enc = encoders.setdefault(enc_name, load_encoder(enc_name))
            t0 = time.perf_counter()
            retriever = ConceptRetriever.build(concepts, method=method, encoder=enc, language=lang)
            build_s = time.perf_counter() - t0
            res = evaluate_retriever(retriever, eval_set, DEFAULT_METRICS)
            name = method if enc_name is None else f"{method} ({enc_name})"
            res.update(dataset=dataset, split=split, candidates=cand, system=name, build_seconds=round(build_s, 1))
            results.append(res)
            rows[name] = res["metrics"]
            print(dataset, cand, name, {k: round(v, 4) for k, v in res["metrics"].items()}, f"build {build_s:.0f}s")
        first = next(r for r in results if r["dataset"] == dataset and r["candidates"] == cand)
        tables.append(
            f"### {dataset} {split}, candidates = {cand} ({first['n_candidates']:,} concepts, "
            f"{first['n_entries']:,} entries; {first['n_queries']:,} queries, "
            f"{first['queries_with_a_reachable_gold']:,} with a reachable gold)\n\n"
            + to_markdown_table(rows, list(DEFAULT_METRICS))
        )
    common.write(
        "concept_zero_shot",
        {"environment": common.environment(args.threads, args.seed, str(data_root())), "results": results},
        "\n\n".join(tables),
    )


if __name__ == "__main__":
    main()
