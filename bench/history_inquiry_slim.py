"""Which slim inquiry global re-ranker to serve: every trained size of a language, side by side.

For each language, the full global re-ranker (``runs/history/inquiry-<data>-global``) and every slim
candidate (``runs/history/inquiry-<data>-global-<N>-layers``, trained by
``configs/history/cpu/ablations/inquiry-<data>-global-<N>-layers.yaml``, and the chosen
``inquiry-<data>-global-slim``), with the same three measures as ``history_inquiry.py``:

* the next-question table (nDCG / MAP / MRR / nDCG@5) on the same seeded 100 validation sequences;
* the interactive protocol with the re-ranker on the first 20 validation patients, on the backend the
  service would choose (``backend="auto"``), beside the first stage alone on the same patients;
* one next-question step on 1 thread over the same real mid-inquiry states: every run's re-rank on torch /
  ONNX fp32 / int8 and every run's whole step with its ``auto`` backend, all timed interleaved in one process.

A run qualifies when the sum of the first stage's p50 and its served re-rank p50 is at most 100 ms; the
bench marks the qualifying run with the best nDCG (then MAP) per language.

    python bench/history_inquiry_slim.py [--table-samples 100] [--patients 20] [--states 40] [--steps 200]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import common
import history_inquiry as hi

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.inquiry.evaluation import evaluate_inquiry

BAR_MS = 100.0
DATA = {"en": "ddxplus", "zh": "dxy"}


def candidate_runs(language: str) -> dict[str, Path]:
    """The full run first, then the slim candidates by their number of layers, then the chosen slim run."""
    root = hi.RUN_ROOT
    runs = {"full": root / f"inquiry-{DATA[language]}-global"}
    sized = []
    for path in root.glob(f"inquiry-{DATA[language]}-global-*-layers"):
        m = re.fullmatch(rf"inquiry-{DATA[language]}-global-(\d+)-layers", path.name)
        if m:
            sized.append((int(m.group(1)), path))
    runs.update({p.name: p for _, p in sorted(sized)})
    runs["slim"] = root / f"inquiry-{DATA[language]}-global-slim"
    return {k: v for k, v in runs.items() if (v / "model").is_dir()}


def table_rows(language: str, runs: dict[str, Path], samples_limit: int, seed: int) -> dict:
    from medrank.pipelines.history.builders import default_out_dir
    from medrank.pipelines.history.data import bank_texts, read_bank, read_samples
    from medrank.pipelines.history.evaluation import (
        evaluate_scorer,
        first_stage_metrics,
        load_reranker,
        subsample,
    )

    folder = default_out_dir(f"inquiry-{DATA[language]}")
    samples = subsample(read_samples(folder / "valid.jsonl"), samples_limit, seed)
    texts = bank_texts(read_bank(folder / "bank.jsonl"))
    rows = {"first stage": first_stage_metrics(samples)}
    for name, run in runs.items():
        rows[name] = evaluate_scorer(load_reranker(run)[1].score, samples, texts)["metrics"]
    return {"samples": len(samples), "rows": rows}


def interactive_rows(language: str, runs: dict[str, Path], patients: int) -> dict:
    out: dict = {"systems": {}, "backends": {}}
    for name, run in runs.items():
        report = evaluate_inquiry(language, model=run, max_patients=patients, backend="auto")
        out["patients"] = report["patients"]
        for system, metrics in report["systems"].items():
            if system.startswith("kb@"):
                out["systems"].setdefault(system, metrics)
            else:
                out["systems"][f"{name} {system}"] = metrics
        out["backends"][name] = (report.get("reranker") or {}).get("backend")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--table-samples", type=int, default=100)
    ap.add_argument("--patients", type=int, default=20)
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    env["command"] = "python bench/history_inquiry_slim.py " + " ".join(sys.argv[1:])
    languages = {}
    for lang in ("en", "zh"):
        runs = candidate_runs(lang)
        if not runs:
            continue
        table = table_rows(lang, runs, args.table_samples, args.seed)
        interactive = interactive_rows(lang, runs, args.patients)
        engine, states = hi.mid_inquiry_states(lang, args.seed)
        first = hi.step_latency(engine, states, args.steps)
        latency = hi.rerank_backends(lang, engine, states, args.states, args.seed, runs=runs)
        for rr in latency.values():
            rr["sum of p50 (ms)"] = round(first["p50_ms"] + rr["latency"][rr["service_choice"]["backend"]]["p50_ms"], 3)
        qualifying = [n for n in runs if latency[n]["sum of p50 (ms)"] <= BAR_MS]
        pick = max(qualifying, key=lambda n: (table["rows"][n]["ndcg"], table["rows"][n]["map"]), default=None)
        languages[lang] = {"runs": {n: str(p) for n, p in runs.items()}, "table": table, "interactive": interactive,
                           "first stage + differential": first, "latency": latency, "pick": pick}
    env["load_average_at_end"] = hi.loadavg()
    payload = {"environment": env, "bar_ms": BAR_MS, "languages": languages}
    common.write("history_inquiry_slim", payload, render(payload))


def render(payload: dict) -> str:
    env = payload["environment"]
    md = [f"Command: `{env['command'].strip()}`; load average at the start {env['load_average_1_5_15']}, at the end "
          f"{env['load_average_at_end']} (2 cores shared with other sessions). A run qualifies when the first "
          f"stage's p50 + its served re-rank p50 is at most {payload['bar_ms']:.0f} ms; **pick** = the qualifying "
          "run with the best nDCG, then MAP."]
    for lang, res in payload["languages"].items():
        names = hi.METRICS_MD[lang]
        md += ["", f"## {'DDXPlus' if lang == 'en' else 'DXY'}", "",
               f"Next question on {res['table']['samples']} validation sequences; step on 1 thread over "
               f"{next(iter(res['latency'].values()))['states']} real mid-inquiry states (first stage + differential "
               f"p50 {res['first stage + differential']['p50_ms']:.2f} ms).", "",
               "| run | layers | nDCG | MAP | MRR | nDCG@5 | tokens p50 | re-rank torch p50 | onnx p50 | onnx-int8 p50 | "
               "service backend | sum of p50 | whole step p50 / p95 | |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        m = res["table"]["rows"]["first stage"]
        md.append(f"| first stage | | {100 * m['ndcg']:.1f} | {100 * m['map']:.1f} | {100 * m['mrr']:.1f} | "
                  f"{100 * m['ndcg@5']:.1f} | | | | | | | | |")
        for name, rr in res["latency"].items():
            m, r, whole = res["table"]["rows"][name], rr["latency"], rr["whole_step_with_reranker"]
            md.append(f"| {rr['model']} | {rr['layers']} | {100 * m['ndcg']:.1f} | {100 * m['map']:.1f} | "
                      f"{100 * m['mrr']:.1f} | {100 * m['ndcg@5']:.1f} | {rr['tokens']['p50']:.0f} | "
                      f"{r['torch']['p50_ms']:.1f} | {r['onnx']['p50_ms']:.1f} | {r['onnx-int8']['p50_ms']:.1f} | "
                      f"{rr['service_choice']['backend']} | {rr['sum of p50 (ms)']:.1f} | {whole['p50_ms']:.1f} / "
                      f"{whole['p95_ms']:.1f} | {'**pick**' if name == res['pick'] else ''} |")
        rr = next(iter(res["latency"].values()))
        md += ["", f"Load average while the re-ranks were timed: {rr['load_average_during']['before']} → "
               f"{rr['load_average_during']['after']}; while the whole steps were: "
               f"{rr['whole_step_load_average']['before']} → {rr['whole_step_load_average']['after']}.", "",
               f"Interactive protocol, first {res['interactive']['patients']} validation patients:", "",
               "| system | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for system, metrics in res["interactive"]["systems"].items():
            md.append(f"| {system} | " + " | ".join(f"{metrics[k]:.3f}" for k in names) + " |")
        md += ["", "| run | backend | score correlation with torch (min / mean) | same top-5 order |", "|---|---|---|---|"]
        for rr in res["latency"].values():
            for b, a in rr["agreement_with_torch"].items():
                md.append(f"| {rr['model']} | {b} | {a['min_correlation']:.4f} / {a['mean_correlation']:.4f} | "
                          f"{100 * a['same_top5']:.0f} % |")
    return "\n".join(md)


if __name__ == "__main__":
    main()
