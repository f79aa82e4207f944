"""What else could bring the global re-ranker's step under 100 ms on 1 thread, and what it costs in agreement.

On the same real mid-inquiry DDXPlus states as ``history_inquiry.py`` (40 of them, seeded), the trained
``runs/history/inquiry-ddxplus-global`` on torch, timed interleaved: as trained (dialogue cap 256 tokens,
30 candidates); the dialogue cut to its last 64 tokens; only the first stage's top 15 candidates
re-ranked; bfloat16 autocast (the host's AMX units). Agreement is with the model as trained on the same
states: the same top-1 question, score correlation and the same top-5 order (not defined for 15 candidates).

    python bench/history_inquiry_variants.py [--states 40]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import common
import history_inquiry
import numpy as np
import torch

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.models import GlobalReranker
from medrank.pipelines.history.models.backend_choice import compare, top_order

RUN = Path("runs/history/inquiry-ddxplus-global")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    engine, states = history_inquiry.mid_inquiry_states("en", args.seed)
    inputs = history_inquiry.rerank_inputs(engine, states)
    rng = np.random.default_rng(args.seed)
    picked = [inputs[i] for i in sorted(rng.choice(len(inputs), min(args.states, len(inputs)), replace=False))]
    model = GlobalReranker.load(RUN / "model")
    short = GlobalReranker.load(RUN / "model")
    short.config.max_dialogue_tokens = 64

    def bf16(dialogue: str, questions: list[str]) -> list[float]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model.score(dialogue, questions)

    variants = {
        "as trained (dialogue <= 256 tokens, 30 candidates)": model.score,
        "dialogue cut to 64 tokens": short.score,
        "top 15 candidates only": lambda d, q: model.score(d, q[:15]) + [-1e9] * (len(q) - 15),
        "bfloat16 autocast": bf16,
    }
    for d, q in picked[:3]:  # warm-up
        for score in variants.values():
            score(d, q)
    times: dict[str, list[float]] = {n: [] for n in variants}
    scores: dict[str, list[list[float]]] = {n: [] for n in variants}
    before = history_inquiry.loadavg()
    for d, q in picked:
        for name, score in variants.items():
            t0 = time.perf_counter()
            scores[name].append(score(d, q))
            times[name].append(time.perf_counter() - t0)
    after = history_inquiry.loadavg()
    reference = scores[next(iter(variants))]
    rows = {}
    for name in variants:
        row = {"latency": common.percentiles(times[name]),
               "same_top1": float(np.mean([top_order(a, 1) == top_order(b, 1) for a, b in zip(reference, scores[name], strict=True)]))}
        if not name.startswith("top 15"):
            row["agreement"] = compare(reference, scores[name]).as_dict()
        rows[name] = row
    env["command"] = "python bench/history_inquiry_variants.py"
    payload = {"environment": env, "run": str(RUN), "states": len(picked), "load_average_during": [before, after],
               "variants": rows}
    md = [f"Command: `{env['command']}`; {len(picked)} real mid-inquiry DDXPlus states, {RUN.name} on torch, 1 thread, "
          f"timed interleaved; load average during {before} → {after}.", "",
          "| variant | p50 ms | p95 ms | same top-1 as trained | score correlation min / mean | same top-5 order |",
          "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        a = row.get("agreement")
        md.append(f"| {name} | {row['latency']['p50_ms']:.1f} | {row['latency']['p95_ms']:.1f} | "
                  f"{100 * row['same_top1']:.0f} % | "
                  + (f"{a['min_correlation']:.4f} / {a['mean_correlation']:.4f} | {100 * a['same_top5']:.0f} % |"
                     if a else "– | – |"))
    common.write("history_inquiry_variants", payload, "\n".join(md))


if __name__ == "__main__":
    main()
