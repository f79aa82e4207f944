"""Query latency over the 40k-row ICD-10 Beijing vocabulary (CHIP-CDN), one query at a time.

Encode + search per query on 1 thread, for dense (e5-small, exact faiss inner
product and HNSW), BM25 and hybrid; queries are CHIP-CDN validation mentions.
Reports p50/p95/p99 in milliseconds.

    python bench/query_latency.py [--queries 500] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import common

from medrank.config import cache_dir, data_root, seed_everything, set_threads
from medrank.encoders import CachedEncoder, load_encoder
from medrank.retrieval.concept import ConceptRetriever
from medrank.retrieval.concept_data import load_candidates, load_eval_set


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    seed_everything(args.seed)
    set_threads(2)  # build with both cores; latency is measured on --threads
    eval_set = load_eval_set("chip-cdn", "valid")
    queries = [q.text for q in eval_set.queries[: args.queries]]
    concepts = load_candidates("chip-cdn", "vocab")
    encoder = load_encoder("e5-small")
    # entry vectors come from the embedding cache the zero-shot bench fills; queries are encoded live
    cached = CachedEncoder(encoder, cache_dir() / "embeddings")
    dense = ConceptRetriever.build(concepts, method="dense", encoder=cached, language="zh")
    dense.index.encoder = encoder
    vectors = dense.index.vectors()
    systems = {"dense e5-small (flat)": dense}
    from medrank.index import DenseIndex
    from medrank.retrieval.concept import concept_entries

    ids, texts, items = concept_entries(concepts)
    hnsw_index = DenseIndex(encoder, factory="hnsw")
    hnsw_index.entry_ids, hnsw_index.entry_texts, hnsw_index.entry_items = ids, texts, items
    hnsw_index.build_from_vectors(vectors)
    systems["dense e5-small (hnsw)"] = ConceptRetriever(hnsw_index, concepts)
    systems["bm25 (char 1-2 grams)"] = ConceptRetriever.build(concepts, method="bm25", language="zh")
    from medrank.index import BM25Index, HybridIndex

    hybrid_index = HybridIndex.from_built([systems["bm25 (char 1-2 grams)"].index, dense.index], depth=50)
    systems["hybrid (rrf)"] = ConceptRetriever(hybrid_index, concepts)
    assert isinstance(systems["bm25 (char 1-2 grams)"].index, BM25Index)

    set_threads(args.threads)
    rows = []
    for name, retriever in systems.items():
        for q in queries[:20]:
            retriever.search(q, k=5)  # warm-up
        samples = []
        for q in queries:
            t0 = time.perf_counter()
            retriever.search(q, k=5)
            samples.append(time.perf_counter() - t0)
        row = {"system": name, "n_concepts": len(concepts), "n_entries": len(retriever.index), **common.percentiles(samples)}
        rows.append(row)
        print(row)
    md = ["| system | entries | p50 ms | p95 ms | p99 ms | mean ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['system']} | {r['n_entries']:,} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['mean_ms']} |")
    common.write(
        "query_latency",
        {"environment": common.environment(args.threads, args.seed, str(data_root())), "rows": rows},
        "\n".join(md),
    )


if __name__ == "__main__":
    main()
