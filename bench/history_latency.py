"""Latency on 1 CPU thread: the global re-ranker scores one sample's 30 candidates in one pass; the
cross-encoder needs 30 (dialogue, question) pairs. Bar: global >= 5x faster at p50.

Uses the trained models of ``runs/history/global-listnet`` and ``runs/history/cross-encoder``
when present (latency does not depend on the weights; otherwise the MiniLM base with fresh heads),
on real validation samples with 30 candidates (dialogue truncated to 256 tokens from its start), in
two settings: any validation sample (many MTS contexts are only a few turns long, where the
cross-encoder's 30 copies of the dialogue cost little) and samples whose dialogue fills the 256
tokens (the setting of the paper's long dialogues). 3 warm-up samples, then ``--samples`` timed.

    python bench/history_latency.py [--samples 30]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import common
import numpy as np

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.builders import default_out_dir
from medrank.pipelines.history.data import bank_texts, read_bank, read_samples, render_dialogue
from medrank.pipelines.history.evaluation import subsample


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--runs", type=Path, default=Path("runs/history"))
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    from medrank.pipelines.history.models import GlobalReranker, HistoryCrossEncoder

    folder = args.data_dir or default_out_dir()
    texts = bank_texts(read_bank(folder / "bank.jsonl"))
    valid = [s for s in read_samples(folder / "valid.jsonl") if len(s.candidates) == 30]
    g_dir, c_dir = args.runs / "global-listnet" / "model", args.runs / "cross-encoder" / "model"
    models = {
        "global re-ranker (1 pass, 30 pooling tokens)": GlobalReranker.load(g_dir) if g_dir.is_dir()
        else GlobalReranker.from_pretrained("minilm"),
        "cross-encoder (30 pairs, batch 30)": HistoryCrossEncoder.load(c_dir) if c_dir.is_dir()
        else HistoryCrossEncoder.from_pretrained("minilm"),
    }
    g_model, c_model = models.values()
    full = [s for s in valid if len(g_model.encode(render_dialogue(s.context), ["x"]).input_ids) >= 256 + 2 + 3]
    settings = {
        "all validation samples (dialogues of any length, truncated at 256 tokens)":
            subsample(valid, args.samples + 3, args.seed),
        "validation samples with a full 256-token dialogue": subsample(full, args.samples + 3, args.seed),
    }
    results: dict[str, dict[str, dict]] = {}
    for setting, samples in settings.items():
        results[setting] = {}
        for name, model in models.items():
            model.eval()
            times, tokens = [], []
            for i, s in enumerate(samples):
                dialogue, qs = render_dialogue(s.context), [texts[c] for c in s.candidates]
                t0 = time.perf_counter()
                model.score(dialogue, qs)  # includes tokenisation, as a service would
                if i >= 3:
                    times.append(time.perf_counter() - t0)
                if model is g_model:
                    tokens.append(len(model.encode(dialogue, qs).input_ids))
                else:
                    d = model.dialogue_ids(dialogue)
                    tokens.append(int(model.features([d] * len(qs), qs)["attention_mask"].sum()))
            results[setting][name] = {**common.percentiles(times), "mean_input_tokens": float(np.mean(tokens))}
    speedups = {st: r[list(models)[1]]["p50_ms"] / r[list(models)[0]]["p50_ms"] for st, r in results.items()}
    payload = {
        "environment": common.environment(1, args.seed, str(folder)),
        "weights": {"global": str(g_dir) if g_dir.is_dir() else "minilm base",
                    "cross-encoder": str(c_dir) if c_dir.is_dir() else "minilm base"},
        "latency": results, "speedup_p50": speedups,
        "bar": {"target": 5.0, "met": {st: v >= 5.0 for st, v in speedups.items()}},
    }
    md = ["# History taking: scoring latency, 1 CPU thread (one sample, 30 candidates, dialogue <= 256 tokens)", ""]
    for st, rows in results.items():
        md += [f"## {st}", "", "| model | p50 ms | p95 ms | mean ms | mean input tokens (all pairs) | samples |",
               "|---|---:|---:|---:|---:|---:|"]
        md += [f"| {n} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['mean_ms']:.1f} | {r['mean_input_tokens']:.0f} | "
               f"{r['n']} |" for n, r in rows.items()]
        md += ["", f"Speed-up at p50: **{speedups[st]:.1f}x** (bar >= 5x: {'met' if speedups[st] >= 5 else 'NOT met'})", ""]
    md.append("Measured with 1 torch thread on 2 CPU cores shared with other engineers' jobs (see load average).")
    md = "\n".join(md)
    common.write("history_latency", payload, md)


if __name__ == "__main__":
    main()
