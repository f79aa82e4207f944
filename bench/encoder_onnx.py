"""ONNX Runtime backends against torch: encoder throughput, agreement, dense query latency, task figures.

* Throughput (sentences/s, best of ``--repeats`` interleaved rounds after a warm-up) at 1 and 2
  threads, batch 1 and batch 32, for sentence-transformers' torch path on the same local weights,
  medrank's torch encoder, ``onnx`` (fp32), ``onnx-int8`` and ``torch-bf16`` (bf16 autocast; native on
  AMX CPUs, emulated and slow elsewhere): MiniLM on English MTS-Dialog
  dialogue turns, e5-small on Chinese CHIP-CDN mentions (train file).
* Agreement: cosine of each backend's vectors to medrank's fp32 torch vectors, min and mean over
  1,000 sentences per language (sentence-transformers' own for reference).
* Dense concept query over the 37,645 CHIP-CDN names (e5-small, exact inner product), one query at a
  time on 1 thread: p50/p95 of encode + search per backend (one set of entry vectors, by default
  int8's, the quickest to build; queries encoded live by each backend, backends interleaved query
  by query).
* Task figures, torch vs int8 (and fp32): zero-shot CHIP-CDN valid NDCG@5 etc. with gold and vocab
  candidates (e5-small, dense) and NCBI-disease devel Acc@1 (MiniLM, dense), as in
  ``bench/concept_zero_shot.py``; ``torch-bf16/onnx-int8`` is the service's split on AMX CPUs (entries
  encoded by torch-bf16, queries by the int8 export).

Each part records the load average before and after it (the machine is shared).

    nice -n 10 python bench/encoder_onnx.py [--parts throughput,agreement,latency,tasks] [--repeats 3]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import time
from collections.abc import Callable

import common
import numpy as np

from medrank.config import cache_dir, data_root, seed_everything, set_threads

BACKENDS = ("torch", "onnx", "onnx-int8", "torch-bf16")
MODELS = {"en": ("minilm", None), "zh": ("e5-small", "passage")}
NAME = "encoder_onnx"


def english_sentences(seed: int) -> list[str]:
    """Dialogue turns (speaker tag removed, >= 3 words) of MTS-Dialog's training file, shuffled."""
    folder = data_root() / "mts-dialog" / "Main-Dataset"
    path = next(p for p in sorted(folder.iterdir()) if "train" in p.name.lower() and p.suffix == ".csv")
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for line in row["dialogue"].splitlines():
                text = line.split(":", 1)[-1].strip()
                if len(text.split()) >= 3:
                    out.append(text)
    out = sorted(set(out))
    random.Random(seed).shuffle(out)
    return out


def chinese_sentences(seed: int) -> list[str]:
    """CHIP-CDN mentions of the visible train file, shuffled."""
    with open(data_root() / "chip-cdn" / "train.jsonl", encoding="utf-8") as fh:
        out = sorted({json.loads(line)["text"] for line in fh})
    random.Random(seed).shuffle(out)
    return out


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def encoders_for(name: str) -> dict[str, object]:
    from medrank.encoders import load_encoder
    from medrank.encoders.onnx import with_backend

    torch_enc = load_encoder(name)
    return {b: with_backend(torch_enc, b) for b in BACKENDS}


def sentence_transformer(name: str):
    from sentence_transformers import SentenceTransformer

    from medrank.encoders.registry import resolve_model_path

    return SentenceTransformer(resolve_model_path(name), device="cpu", local_files_only=True)


def best_rates(fns: dict[str, Callable[[list[str]], object]], texts: list[str], repeats: int) -> dict[str, float]:
    """Sentences/s of each function on ``texts``: best of ``repeats`` rounds, functions interleaved per round."""
    for fn in fns.values():
        fn(texts[:8])  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn(texts)
            best[key] = min(best[key], time.perf_counter() - start)
    return {k: round(len(texts) / v, 1) for k, v in best.items()}


def throughput(args: argparse.Namespace, texts: dict[str, list[str]]) -> dict:
    rows = []
    before = load_average()
    for lang, (name, kind) in MODELS.items():
        encs = encoders_for(name)
        st = sentence_transformer(name)
        st_kw = {"prompt_name": kind} if kind else {}
        for threads in (1, 2):
            set_threads(threads)
            for batch in (1, 32):
                sample = texts[lang][: args.n_batch1 if batch == 1 else args.n_batch32]
                fns: dict[str, Callable[[list[str]], object]] = {
                    "sentence-transformers": lambda t, b=batch, m=st, kw=st_kw: m.encode(
                        t, batch_size=b, normalize_embeddings=True, show_progress_bar=False, **kw
                    ),
                }
                for backend, enc in encs.items():
                    fns[f"medrank {backend}"] = lambda t, e=enc, b=batch, k=kind: e.encode(t, kind=k, batch_size=b, show_progress=False)
                rates = best_rates(fns, sample, args.repeats)
                base = rates["sentence-transformers"]
                row = {
                    "language": lang, "encoder": name, "threads": threads, "batch_size": batch, "n_texts": len(sample),
                    "sentences_per_s": rates, "ratio_to_sentence_transformers": {k: round(v / base, 2) for k, v in rates.items()},
                    "load_average": load_average(),
                }
                rows.append(row)
                print(row, flush=True)
    return {"rows": rows, "load_average_before": before, "load_average_after": load_average()}


def agreement(args: argparse.Namespace, texts: dict[str, list[str]]) -> dict:
    from medrank.encoders.backend_choice import agreement as cosines

    set_threads(args.task_threads)
    out = {"load_average_before": load_average(), "rows": []}
    for lang, (name, kind) in MODELS.items():
        sample = texts[lang][: args.n_agreement]
        encs = encoders_for(name)
        reference = encs["torch"].encode(sample, kind=kind, batch_size=32)
        st = sentence_transformer(name)
        st_vecs = st.encode(sample, batch_size=32, normalize_embeddings=True, show_progress_bar=False,
                            **({"prompt_name": kind} if kind else {}))
        row = {"language": lang, "encoder": name, "n_sentences": len(sample),
               "sentence-transformers": dict(zip(("min", "mean"), map(lambda x: round(x, 6), cosines(reference, st_vecs)), strict=True))}
        for backend in ("onnx", "onnx-int8", "torch-bf16"):
            low, mean = cosines(reference, encs[backend].encode(sample, kind=kind, batch_size=32))
            row[backend] = {"min": round(low, 6), "mean": round(mean, 6)}
        out["rows"].append(row)
        print(row, flush=True)
    out["load_average_after"] = load_average()
    return out


def latency(args: argparse.Namespace) -> dict:
    from medrank.encoders import CachedEncoder
    from medrank.retrieval.concept import ConceptRetriever
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    set_threads(2)  # index built with both cores; queries are timed on 1
    encs = encoders_for("e5-small")
    concepts = load_candidates("chip-cdn", "vocab")
    # the names' vectors only set the index's size and width (an exact search's time): any backend may
    # write them, or, with --latency-index-backend random, seeded random unit vectors of the same shape
    if args.latency_index_backend == "random":
        from medrank.index import DenseIndex
        from medrank.retrieval.concept import concept_entries

        ids, names, items = concept_entries(concepts)
        index = DenseIndex(encs["torch"])
        index.entry_ids, index.entry_texts, index.entry_items = ids, names, items
        vectors = np.random.default_rng(args.seed).standard_normal((len(ids), encs["torch"].dim)).astype(np.float32)
        index.build_from_vectors(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
        retriever = ConceptRetriever(index, concepts)
    else:
        index_encoder = CachedEncoder(encs[args.latency_index_backend], cache_dir() / "embeddings")
        retriever = ConceptRetriever.build(concepts, method="dense", encoder=index_encoder, language="zh")
    queries = [q.text for q in load_eval_set("chip-cdn", "valid").queries[: args.queries]]
    set_threads(1)
    before = load_average()
    samples: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for enc in encs.values():  # warm-up
        retriever.index.encoder = enc
        for q in queries[:10]:
            retriever.search(q, k=5)
    for q in queries:
        for backend, enc in encs.items():
            retriever.index.encoder = enc
            start = time.perf_counter()
            retriever.search(q, k=5)
            samples[backend].append(time.perf_counter() - start)
    result = {"n_names": len(retriever.index), "n_queries": len(queries), "threads": 1,
              "index_vectors_from": args.latency_index_backend,
              "backends": {b: common.percentiles(s) for b, s in samples.items()},
              "load_average_before": before, "load_average_after": load_average()}
    print(result, flush=True)
    return result


def tasks(args: argparse.Namespace, save: Callable[[dict], None]) -> dict:
    from medrank.encoders import CachedEncoder
    from medrank.retrieval.concept import DEFAULT_METRICS, ConceptRetriever, evaluate_retriever
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    set_threads(args.task_threads)
    out = {"load_average_before": load_average(), "rows": [], "threads": args.task_threads}
    settings = {
        "chip-gold": ("chip-cdn", "valid", "gold", "zh", "e5-small"),
        "ncbi": ("ncbi-disease", "devel", "medic", "en", "minilm"),
        "chip-vocab": ("chip-cdn", "valid", "vocab", "zh", "e5-small"),
    }
    for key in args.task_sets.split(","):
        dataset, split, cand, lang, name = settings[key]
        synonyms = not (dataset == "ncbi-disease" and args.ncbi_names_only)
        eval_set = load_eval_set(dataset, split)
        concepts = load_candidates(dataset, "gold" if cand == "medic" else cand, eval_set=eval_set)
        encs = encoders_for(name)
        for backend in args.task_backends.split(","):
            # "ENTRIES/QUERIES": entries encoded by one backend, queries by another (the service's torch-bf16/onnx-int8)
            entries, _, queries = backend.partition("/")
            start = time.perf_counter()
            retriever = ConceptRetriever.build(
                concepts, method="dense", encoder=CachedEncoder(encs[entries], cache_dir() / "embeddings"), language=lang,
                use_synonyms=synonyms,
            )
            if queries:
                retriever.index.encoder = encs[queries]
            res = evaluate_retriever(retriever, eval_set, DEFAULT_METRICS)
            row = {"dataset": dataset, "split": split, "candidates": cand if synonyms else f"{cand} (names only)",
                   "encoder": name, "backend": backend,
                   "metrics": {k: round(100 * v, 2) for k, v in res["metrics"].items()},
                   "n_queries": res["n_queries"], "n_entries": res["n_entries"],
                   "seconds": round(time.perf_counter() - start, 1), "load_average": load_average()}
            out["rows"].append(row)
            print(row, flush=True)
            save({**out, "load_average_after": load_average()})  # an interrupted run keeps its finished rows
    out["load_average_after"] = load_average()
    return out


def markdown(payload: dict) -> str:
    parts = []
    if "throughput" in payload:
        t = payload["throughput"]
        lines = [
            f"### Throughput (sentences/s; × = ratio to sentence-transformers; load average {t['load_average_before']} → {t['load_average_after']})",
            "",
            "| language | encoder | threads | batch | sentence-transformers | medrank torch | onnx fp32 | onnx int8 | torch bf16 |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in t["rows"]:
            s, x = r["sentences_per_s"], r["ratio_to_sentence_transformers"]
            cells = [f"{s[k]} ({x[k]}×)" if k in s else "–"
                     for k in ("medrank torch", "medrank onnx", "medrank onnx-int8", "medrank torch-bf16")]
            lines.append(f"| {r['language']} | {r['encoder']} | {r['threads']} | {r['batch_size']} | {s['sentence-transformers']} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    if "agreement" in payload:
        a = payload["agreement"]
        lines = ["### Agreement: cosine to medrank's fp32 torch vectors (min / mean)", "",
                 "| language | encoder | sentences | sentence-transformers | onnx fp32 | onnx int8 | torch bf16 |",
                 "|---|---|---:|---|---|---|---|"]
        for r in a["rows"]:
            cells = [f"{r[k]['min']:.6f} / {r[k]['mean']:.6f}" if k in r else "–"
                     for k in ("sentence-transformers", "onnx", "onnx-int8", "torch-bf16")]
            lines.append(f"| {r['language']} | {r['encoder']} | {r['n_sentences']} | " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    if "latency" in payload:
        lat = payload["latency"]
        lines = [f"### Dense concept query, e5-small over {lat['n_names']:,} CHIP-CDN names, 1 thread, {lat['n_queries']} queries "
                 f"(load average {lat['load_average_before']} → {lat['load_average_after']})", "",
                 "| backend | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|"]
        for b, p in lat["backends"].items():
            lines.append(f"| {b} | {p['p50_ms']:.1f} | {p['p95_ms']:.1f} | {p['mean_ms']:.1f} |")
        parts.append("\n".join(lines))
    if "tasks" in payload:
        tk = payload["tasks"]
        lines = [f"### Task figures, dense retrieval (load average {tk['load_average_before']} → {tk['load_average_after']})", "",
                 "| dataset | candidates | encoder | backend | ndcg@5 | recall@5 | acc@1 | acc@5 | mrr |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in tk["rows"]:
            m = r["metrics"]
            lines.append(f"| {r['dataset']} {r['split']} | {r['candidates']} | {r['encoder']} | {r['backend']} | "
                         f"{m['ndcg@5']:.2f} | {m['recall@5']:.2f} | {m['acc@1']:.2f} | {m['acc@5']:.2f} | {m['mrr']:.2f} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="throughput,agreement,latency,tasks")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-batch1", type=int, default=48)
    ap.add_argument("--n-batch32", type=int, default=256)
    ap.add_argument("--n-agreement", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--task-backends", default="torch,onnx-int8,onnx,torch-bf16/onnx-int8",
                    help="comma-separated; ENTRIES/QUERIES encodes the entries with one backend, the queries with another")
    ap.add_argument("--task-threads", type=int, default=1, help="threads for the agreement and task parts")
    ap.add_argument("--latency-index-backend", default="onnx-int8", choices=(*BACKENDS, "random"))
    ap.add_argument("--task-sets", default="chip-gold,ncbi,chip-vocab")
    ap.add_argument("--ncbi-names-only", action="store_true", help="index MEDIC's 11,915 names without their synonyms")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    seed_everything(args.seed)
    path = common.RESULTS / f"{NAME}.json"
    texts = {"en": english_sentences(args.seed), "zh": chinese_sentences(args.seed)}
    from medrank.encoders.onnx import ort_version

    def save(part: str, result: dict) -> None:
        # parts run separately (even at once) accumulate in one result file: re-read it before each write;
        # task rows of other settings or backends are kept
        payload = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if part == "tasks" and "tasks" in payload:
            mine = {(r["dataset"], r["candidates"], r["backend"]) for r in result["rows"]}
            kept = [r for r in payload["tasks"]["rows"] if (r["dataset"], r["candidates"], r["backend"]) not in mine]
            result = {**result, "rows": kept + result["rows"]}
        payload[part] = {**result, "args": vars(args), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        payload["environment"] = {**common.environment("1 and 2 (see rows)", args.seed, str(data_root())),
                                  "onnxruntime": ort_version(), "data": {"en": "mts-dialog Main-Dataset train dialogue turns",
                                                                          "zh": "chip-cdn train.jsonl mentions"}}
        common.write(NAME, payload, markdown(payload))

    for part in args.parts.split(","):
        fn = {"throughput": lambda: throughput(args, texts), "agreement": lambda: agreement(args, texts),
              "latency": lambda: latency(args), "tasks": lambda: tasks(args, lambda r: save("tasks", r))}[part]
        save(part, fn())


if __name__ == "__main__":
    main()
