"""Hard-negative mining time: all CHIP-CDN queries × the 40k-row ICD-10 vocabulary on CPU.

What one Bi-HardNCE epoch pays before training (``SymptomTask.prepare_epoch``): encode every
query and every term with the current model, then for every query the top-100 incorrect terms
and for every gold term the top-100 incorrect queries (chunked matmul + argpartition), then
HD-sampling of 3 terms / 3 queries per pair.

* **one-time**: the frozen bottom (embeddings + 11 of 12 blocks of e5-small) for every text,
  cached on disk and shared by every model of the comparison (computed for the texts the
  cache lacks; ``--cache-dir EMPTY_DIR`` measures a cold start, as reported in the results);
* **per epoch**: the trainable top block over every text + the similarity search + sampling;
* **reference**: the full 12-block encoder on a sample, extrapolated to all texts — what a
  per-epoch re-encode costs without the cache (the paper's full fine-tuning on a GPU).

    python bench/symptom_mining.py --cache-dir /tmp/symptom-cold-cache [--threads 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import common
import numpy as np

from medrank.config import data_root, seed_everything, set_threads
from medrank.data import gold_terms, load_chip_cdn, load_chip_cdn_vocabulary
from medrank.encoders import load_encoder
from medrank.models import BiEncoder
from medrank.pipelines.symptom.task import default_cache_dir
from medrank.training.miners import HDSamplingMiner, mine_candidates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--train-layers", type=int, default=1)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--sample", type=int, default=1000, help="texts for the full-model reference")
    ap.add_argument(
        "--cache-dir",
        default=None,
        help="frozen-layer cache to use (default: the one training shares); an empty folder measures a cold start",
    )
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    dataset = load_chip_cdn()
    queries = list(dict.fromkeys(q.text for q in dataset.queries))
    terms = [c.name for c in load_chip_cdn_vocabulary()]
    term_row = {t: i for i, t in enumerate(terms)}
    golds = [t for t in gold_terms(dataset) if t in term_row]
    gold_rows = np.array([term_row[t] for t in golds])
    by_text: dict[str, set[int]] = {}
    for q in dataset.queries:
        by_text.setdefault(q.text, set()).update(term_row[g] for g in dataset.qrels.relevant(q.id) if g in term_row)
    query_gold = [np.array(sorted(by_text[t]), dtype=np.int64) for t in queries]
    queries_of_term: dict[int, list[int]] = {}
    for qi, g in enumerate(query_gold):
        for t in g:
            queries_of_term.setdefault(int(t), []).append(qi)

    encoder = load_encoder("e5-small", max_length=args.max_length)
    bi = BiEncoder(encoder, train_layers=args.train_layers)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    t0 = time.perf_counter()
    loaded = bi.load_cache(cache_dir)
    load_s = time.perf_counter() - t0
    before = bi.cache_size()
    t0 = time.perf_counter()
    bi.fill_cache(queries, "query", show_progress=True)
    bi.fill_cache(terms, "passage", show_progress=True)
    fill_s = time.perf_counter() - t0
    filled = bi.cache_size() - before
    if filled:
        bi.save_cache(cache_dir)
    print(f"cache: loaded {loaded} texts in {load_s:.1f}s, computed {filled} in {fill_s:.1f}s")

    rng = np.random.default_rng(args.seed)
    miner = HDSamplingMiner(0.05)
    runs = []
    for rep in range(args.repeats):
        t = {}
        t0 = time.perf_counter()
        q_emb = bi.encode(queries, "query", show_progress=False)
        t["encode_queries_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        t_emb = bi.encode(terms, "passage", show_progress=False)
        t["encode_terms_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        cands = mine_candidates(q_emb, t_emb, query_gold, pool=100)
        t["queries_to_terms_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = mine_candidates(
            t_emb[gold_rows], q_emb, [np.array(queries_of_term.get(int(r), []), dtype=np.int64) for r in gold_rows], pool=100
        )
        t["terms_to_queries_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = np.repeat(np.arange(len(queries)), [len(g) for g in query_gold])
        miner.sample(cands, rows, np.zeros(len(rows)), 3, rng)
        miner.sample(back, rng.integers(0, len(gold_rows), len(rows)), np.zeros(len(rows)), 3, rng)
        t["sampling_s"] = time.perf_counter() - t0
        t["total_s"] = sum(t.values())
        runs.append({k: round(v, 2) for k, v in t.items()})
        print(f"repeat {rep}: {runs[-1]}")
    per_epoch = {k: round(float(np.median([r[k] for r in runs])), 2) for k in runs[0]}

    sample = [*queries[: args.sample // 2], *terms[: args.sample // 2]]
    t0 = time.perf_counter()
    encoder.encode(sample, kind="passage", batch_size=128)
    full_sample_s = time.perf_counter() - t0
    full_all_s = full_sample_s / len(sample) * (len(queries) + len(terms))

    payload = {
        "environment": common.environment(args.threads, args.seed, str(data_root())),
        "queries": len(queries),
        "terms": len(terms),
        "gold_terms_mined_for_queries": int(len(gold_rows)),
        "pool": 100,
        "encoder": "e5-small",
        "max_length": args.max_length,
        "train_layers": args.train_layers,
        "cache": {
            "dir": str(cache_dir),
            "texts_loaded": loaded,
            "texts_computed": filled,
            "load_seconds": round(load_s, 1),
            "fill_seconds": round(fill_s, 1),
            "bytes": bi.cache_bytes(),
        },
        "per_epoch_repeats": runs,
        "per_epoch_median": per_epoch,
        "full_model_reference": {
            "sample_texts": len(sample),
            "sample_seconds": round(full_sample_s, 1),
            "extrapolated_seconds_all_texts": round(full_all_s, 1),
        },
    }
    md = [
        "# Hard-negative mining time: CHIP-CDN queries × ICD-10 Beijing vocabulary (CPU)",
        "",
        f"{len(queries):,} distinct query texts (all 6,000 training records) × {len(terms):,} distinct vocabulary "
        f"names (40,474 rows); top-100 incorrect terms per query and top-100 incorrect queries per gold term "
        f"({len(gold_rows):,}), then HD-sampling. e5-small, max length {args.max_length}, top "
        f"{args.train_layers} block trainable (the CPU recipe). Command: `python bench/symptom_mining.py`.",
        "",
        f"| step (per epoch, median of {len(runs)}) | seconds |",
        "|---|---:|",
        *[f"| {k.removesuffix('_s').replace('_', ' ')} | {v:.2f} |" for k, v in per_epoch.items()],
        "",
        "| one-time / reference | seconds |",
        "|---|---:|",
        f"| frozen bottom (embeddings + {12 - args.train_layers} blocks), computed for {filled:,} texts | {fill_s:.1f} |",
        f"| frozen bottom, loaded from disk for {loaded:,} texts | {load_s:.1f} |",
        f"| full 12-block encoder, all texts (extrapolated from {len(sample):,}) | {full_all_s:.1f} |",
        "",
        f"Cache size in memory: {bi.cache_bytes() / 2**20:,.0f} MiB (float32).",
    ]
    common.write("symptom_mining", payload, "\n".join(md))


if __name__ == "__main__":
    main()
