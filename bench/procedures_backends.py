"""The procedure normaliser with its frozen bottom on torch, ONNX Runtime fp32 and int8: val exact-set accuracy, agreement, latency.

MTCG and KAR share one frozen bottom (the first ``n_frozen`` e5-small blocks); it carries most of
the arithmetic per mention, and is the part an ONNX backend serves
(:meth:`ProcedureNormalizer.set_backend`); the trained top blocks, the count head and KAR's joint
blocks stay torch. Every standard name's states are computed by the backend under test (nothing
read from another backend's cache). For each run and backend:

* exact-set accuracy on the visible val split (single / multi / total, the paper's Table 2) and how
  many mentions got another answer than under torch (gained = now right, lost = now wrong);
* agreement of MTCG's mention vectors with torch's (cosine min / mean) and of the count class;
* p50 of one mention end to end (``normalize_one``) on ``--threads`` threads, backends interleaved
  mention by mention, after every name is indexed.

    nice -n 10 python bench/procedures_backends.py [--run runs/procedures/kar runs/procedures/fusion] [--n 300]
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.procedures.data import load_mentions
from medrank.pipelines.procedures.evaluation import set_accuracy
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer

BACKENDS = ("torch", "onnx", "onnx-int8")
NAME = "procedures_backends"


def score_run(run: str, n_latency: int) -> dict:
    """Accuracy, agreement and latency of one KAR / fusion run under each backend (see the module docstring)."""
    mentions = load_mentions("val")
    texts = [m.text for m in mentions]
    norms = {b: ProcedureNormalizer.load(run, backend=b) for b in BACKENDS}
    rows, answers, vectors = {}, {}, {}
    for backend, norm in norms.items():
        t0 = time.perf_counter()
        norm.warm_up()
        warm = time.perf_counter() - t0
        predictions = norm.predict(texts)
        answers[backend] = [set(p.terms) for p in predictions]
        emb, probs = norm.mtcg.encode_mentions(texts, use_cache=False)
        vectors[backend] = (emb, probs.argmax(1))
        rows[backend] = {"accuracy": set_accuracy(mentions, predictions), "index_warm_up_s": round(warm, 1)}
    gold = [set(m.terms) for m in mentions]
    for backend in BACKENDS:
        base, here = answers["torch"], answers[backend]
        changed = [i for i in range(len(texts)) if base[i] != here[i]]
        cos = np.sum(vectors[backend][0] * vectors["torch"][0], axis=1)
        rows[backend].update({
            "answers_changed": len(changed),
            "gained": sum(here[i] == gold[i] for i in changed),
            "lost": sum(base[i] == gold[i] for i in changed),
            "mention_cosine_min": round(float(cos.min()), 6), "mention_cosine_mean": round(float(cos.mean()), 6),
            "count_class_agreement": round(float(np.mean(vectors[backend][1] == vectors["torch"][1])), 4),
        })
    sample = texts[:n_latency]
    for norm in norms.values():
        for text in sample[:10]:
            norm.normalize_one(text)
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for text in sample:
        for backend, norm in norms.items():
            t = time.perf_counter()
            norm.normalize_one(text)
            times[backend].append(time.perf_counter() - t)
    for backend in BACKENDS:
        rows[backend]["latency"] = common.percentiles(times[backend])
    fusion = norms["torch"].fusion
    return {"run": run, "fusion": fusion, "n": len(mentions), "n_latency": len(sample), "backends": rows}


def markdown(payload: dict) -> str:
    lines = [
        "Frozen bottom (10 of e5-small's 12 blocks, shared by MTCG and KAR) on each backend; top blocks, count head and "
        f"KAR's joint blocks on torch. Visible val split; latency: one mention end to end, {payload['threads']} thread(s).",
        "",
        "| run | fusion | backend | single | multi | total | answers changed (gained / lost) | mention cosine min / mean | "
        "count class agrees | p50 ms | p95 ms |",
        "|---|---|---|---:|---:|---:|---|---|---:|---:|---:|",
    ]
    for r in payload["runs"]:
        for backend, row in r["backends"].items():
            a, lat = row["accuracy"], row["latency"]
            lines.append(
                f"| {r['run']} | {r['fusion']} | {backend} | {a['single']:.2f} | {a['multi']:.2f} | {a['total']:.2f} | "
                f"{row['answers_changed']} ({row['gained']} / {row['lost']}) | "
                f"{row['mention_cosine_min']:.6f} / {row['mention_cosine_mean']:.6f} | {100 * row['count_class_agreement']:.1f} % | "
                f"{lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} |"
            )
    lines += ["", f"Load average before → after: {payload['load_before']} → {payload['load_after']}."]
    return "\n".join(lines)


def main() -> None:
    import os

    ap = argparse.ArgumentParser()
    ap.add_argument("--run", nargs="+", default=["runs/procedures/kar", "runs/procedures/fusion"])
    ap.add_argument("--n", type=int, default=300, help="val mentions timed one at a time")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    before = [round(x, 2) for x in os.getloadavg()]
    runs = [score_run(run, args.n) for run in args.run]
    payload = {
        "environment": common.environment(args.threads, args.seed, str(data_root())),
        "threads": args.threads, "runs": runs, "load_before": before, "load_after": [round(x, 2) for x in os.getloadavg()],
        "bar": "val exact-set accuracy within ±0.5 points of torch with int8 (issue 31)",
    }
    common.write(NAME, payload, markdown(payload))


if __name__ == "__main__":
    main()
