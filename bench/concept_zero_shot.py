"""Zero-shot concept retrieval: BM25, dense (each offline encoder) and hybrid.

* CHIP-CDN: the validation side of the fixed-seed split of the visible train
  file (seed 13, 20 %, grouped by mention text), candidates = the gold names of
  the visible train file (~3.5k, the Bi-HardNCE setting) and the full
  ICD-10 Beijing vocabulary (37,645 distinct names of 40,474 rows).
* NCBI-disease devel against MEDIC (names + synonyms, max over synonyms).

Metrics: NDCG@5, Recall@5 (Bi-HardNCE), Acc@1, Acc@5 (BioSyn), MRR.

Each vocabulary is encoded once per encoder (vectors cached on disk under
``$MEDRANK_CACHE/embeddings``); the hybrid index fuses the already-built BM25
and dense indexes (reciprocal rank fusion, depth 100).

    python bench/concept_zero_shot.py [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import common  # noqa: F401

from medrank.config import cache_dir, data_root, seed_everything, set_threads
from medrank.encoders import CachedEncoder, load_encoder
from medrank.index import HybridIndex
from medrank.metrics import to_markdown_table
from medrank.retrieval.concept import DEFAULT_METRICS, ConceptRetriever, evaluate_retriever
from medrank.retrieval.concept_data import load_candidates, load_eval_set

SETTINGS = [
    # (dataset, split, candidates, language, methods)
    ("chip-cdn", "valid", "gold", "zh", [("bm25", None), ("dense", "e5-small"), ("dense", "minilm"), ("hybrid", "e5-small")]),
    ("chip-cdn", "valid", "vocab", "zh", [("bm25", None), ("dense", "e5-small"), ("hybrid", "e5-small")]),
    ("ncbi-disease", "devel", "medic", "en", [("bm25", None), ("dense", "minilm"), ("hybrid", "minilm"), ("dense", "e5-small")]),
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
        built: dict[str, ConceptRetriever] = {}
        for method, enc_name in methods:
            enc = None
            if enc_name:
                if enc_name not in encoders:
                    encoders[enc_name] = CachedEncoder(load_encoder(enc_name), cache_dir() / "embeddings")
                enc = encoders[enc_name]
            t0 = time.perf_counter()
            if method == "hybrid":
                bm25 = built.get("bm25") or ConceptRetriever.build(concepts, method="bm25", language=lang)
                dense = built.get(f"dense:{enc_name}") or ConceptRetriever.build(
                    concepts, method="dense", encoder=enc, language=lang
                )
                retriever = ConceptRetriever(HybridIndex.from_built([bm25.index, dense.index], depth=100), concepts)
            else:
                retriever = ConceptRetriever.build(concepts, method=method, encoder=enc, language=lang)
                built[method if enc_name is None else f"{method}:{enc_name}"] = retriever
            build_s = time.perf_counter() - t0
            res = evaluate_retriever(retriever, eval_set, DEFAULT_METRICS)
            name = method if enc_name is None else f"{method} ({enc_name})"
            res.update(dataset=dataset, split=split, candidates=cand, system=name, build_seconds=round(build_s, 1))
            results.append(res)
            rows[name] = res["metrics"]
            print(dataset, cand, name, {k: round(v, 4) for k, v in res["metrics"].items()}, f"build {build_s:.0f}s")
            # write after every system, so an interrupted run still leaves its finished rows
            write(args, results, tables + [section(dataset, split, cand, results, rows)])
        tables.append(section(dataset, split, cand, results, rows))
    write(args, results, tables)


def section(dataset: str, split: str, cand: str, results: list, rows: dict) -> str:
    first = next(r for r in results if r["dataset"] == dataset and r["candidates"] == cand)
    return (
        f"### {dataset} {split}, candidates = {cand} ({first['n_candidates']:,} concepts, "
        f"{first['n_entries']:,} entries; {first['n_queries']:,} queries, "
        f"{first['queries_with_a_reachable_gold']:,} with a reachable gold)\n\n"
        + to_markdown_table(rows, list(DEFAULT_METRICS))
    )


def write(args: argparse.Namespace, results: list, tables: list[str]) -> None:
    common.write(
        "concept_zero_shot",
        {"environment": common.environment(args.threads, args.seed, str(data_root())), "results": results},
        "\n\n".join(tables),
    )


if __name__ == "__main__":
    main()
