"""CDV query latency over the whole MedQuAD corpus and indexing throughput on CPU.

Latency (1 thread): per (entity, aspect) query — encode the query (entity:
knowledge-base lookup, or MiniLM encoding of an unseen mention; aspect:
lookup) + score every sentence of the corpus (one matrix–vector product) +
mean per passage + top-10 passages. Queries: the validation (entity, aspect)
queries. Two rows: entities found in the index's entity table (the normal
case: every indexed document's focus and synonyms) and unseen mentions
(forced through the label encoder: MiniLM or IDF-weighted GloVe, as the model was trained).

Indexing throughput (documents/s): sentence splitting + features + BiLSTM
document encoder, (a) over the whole corpus with sentence features already
cached, (b) cold — sentence features (MiniLM when the model uses them)
computed from scratch — on a sample of documents with an empty feature cache.

    python bench/passages_latency.py --cdv runs/passages/cdv [--queries 1000] [--cold-docs 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import common
import numpy as np

from medrank.config import data_root, seed_everything, set_threads
from medrank.data.medquad import load_medquad, load_medquad_documents
from medrank.index.topk import topk_stable
from medrank.pipelines.passages.cdv import TrainedCDV, make_featurizer
from medrank.pipelines.passages.index import plot_score_curve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cdv", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--cold-docs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--index-threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    seed_everything(args.seed)
    set_threads(args.index_threads)
    docs = load_medquad_documents()
    cdv = TrainedCDV(args.cdv)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    index = cdv.build_index(docs, show_progress=False, timings=timings)
    warm_s = time.perf_counter() - t0

    # cold indexing on a sample with an empty feature cache
    rng = np.random.default_rng(args.seed)
    sample = [docs[i] for i in sorted(rng.choice(len(docs), size=min(args.cold_docs, len(docs)), replace=False))]
    with tempfile.TemporaryDirectory() as tmp:
        cold = TrainedCDV(args.cdv, featurizer=make_featurizer({**cdv.cfg, "feature_cache": tmp}))
        cold_t: dict[str, float] = {}
        t0 = time.perf_counter()
        cold.build_index(sample, show_progress=False, timings=cold_t)
        cold_s = time.perf_counter() - t0

    valid = load_medquad("valid", seed=args.seed)
    queries = [(q.meta["entity"], q.meta["aspect"]) for q in valid.queries][: args.queries]
    set_threads(args.threads)
    for e, a in queries[:20]:  # warm-up
        index.passage_scores(index.query_vector(e, a))

    def measure(pairs: list[tuple[str, str]]) -> list[float]:
        samples = []
        for e, a in pairs:
            t = time.perf_counter()
            scores = index.passage_scores(index.query_vector(e, a))
            topk_stable(scores, 10)
            samples.append(time.perf_counter() - t)
        return samples

    known = common.percentiles(measure(queries))
    # an unseen mention: a prefix the entity table does not hold forces the MiniLM encoder
    unseen = common.percentiles(measure([(f"the {e}", a) for e, a in queries[:300]]))
    # decomposition of the known-entity path
    qv = index.query_vector(*queries[0])
    t = time.perf_counter()
    for _ in range(50):
        s = index.sentence_scores(qv)
    matvec_ms = (time.perf_counter() - t) / 50 * 1000
    t = time.perf_counter()
    for _ in range(50):
        np.add.reduceat(s, index.table.passage_offsets[:-1])
    reduce_ms = (time.perf_counter() - t) / 50 * 1000

    # the paper's Figure 4 for one validation query
    e, a = queries[0]
    doc = next(iter(valid.queries[0].meta["doc_ids"]))
    plot_score_curve(index.score_curve(e, a, doc), common.RESULTS / "passages_score_curve.png", f"{e} — {a}")

    label_enc = getattr(index.label_space.encoder, "name", "encoder")
    feats = "MiniLM + GloVe" if cdv.cfg["use_minilm"] else "GloVe"
    rows = {
        "label_encoder": label_enc,
        "sentence_features": feats,
        "corpus": {"documents": len(docs), "passages": len(index), "sentences": index.n_sentences,
                   "vector_dim": int(index.vectors.shape[1])},
        "latency_known_entity": known,
        "latency_unseen_mention": unseen,
        "matvec_ms": round(matvec_ms, 3),
        "passage_mean_ms": round(reduce_ms, 3),
        "indexing_warm": {"documents": len(docs), "seconds": round(warm_s, 2), "docs_per_s": round(len(docs) / warm_s, 1),
                          **{k: round(v, 2) for k, v in timings.items()}},
        "indexing_cold": {"documents": len(sample), "seconds": round(cold_s, 2),
                          "docs_per_s": round(len(sample) / cold_s, 2), **{k: round(v, 2) for k, v in cold_t.items()}},
    }
    md = [
        f"Corpus: all {len(docs):,} visible MedQuAD documents with ≥ 2 answers — {len(index):,} passages, "
        f"{index.n_sentences:,} sentences × {index.vectors.shape[1]} floats. Query latency on {args.threads} thread(s); "
        f"paper: 247 ms/query; bar: ≤ 25 ms p50.\n",
        "| query path | n | p50 ms | p95 ms | p99 ms | mean ms |",
        "|---|---|---|---|---|---|",
        f"| entity in the index's entity table | {known['n']} | {known['p50_ms']} | {known['p95_ms']} | {known['p99_ms']} | {known['mean_ms']} |",
        f"| unseen mention (encoded by {label_enc}) | {unseen['n']} | {unseen['p50_ms']} | {unseen['p95_ms']} | {unseen['p99_ms']} | {unseen['mean_ms']} |",
        f"\nOf which: sentence scores (mat-vec) {matvec_ms:.2f} ms, passage means {reduce_ms:.2f} ms.\n",
        f"Indexing on {args.index_threads} threads: warm (features cached) {rows['indexing_warm']['docs_per_s']} docs/s "
        f"({len(docs):,} docs in {warm_s:.1f} s); cold ({feats} sentence features from scratch, empty cache) "
        f"{rows['indexing_cold']['docs_per_s']} docs/s ({len(sample)} docs in {cold_s:.1f} s).",
        "\nScore curve of one query: `bench/results/passages_score_curve.png`.",
    ]
    common.write("passages_latency", {"environment": common.environment(args.threads, args.seed, str(data_root())), **rows},
                 "\n".join(md))


if __name__ == "__main__":
    main()
