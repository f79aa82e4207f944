"""Table-2-like comparison of history-question re-rankers on the validation split.

Collects the evaluation each ``medrank train configs/history/cpu/*.yaml`` run wrote
(``runs/history/<name>/eval_valid.json``: the trained model scored on the seeded validation
subset, the global re-ranker averaged over candidate shuffles) next to the first stage's order on
the same samples, and checks the issue's bars:

* the global re-ranker (best loss) beats the cross-encoder on nDCG;
* every re-ranker is >= 20 % relative nDCG above the first stage.

With ``--reevaluate`` each saved model is re-scored here instead (same protocol, slower).
``--only`` restricts the table to some run folders (comma-separated, shell patterns) and ``--out`` names the result files (e.g. the
MiniLM vs e5-small backbone comparison, ``history_backbones``).

    python bench/history_table.py [--runs runs/history] [--reevaluate]
    python bench/history_table.py --only global-neural_ndcg,e5-global-neural_ndcg,ddxplus-global-listnet,e5-ddxplus-global-listnet --out history_backbones
"""

from __future__ import annotations

import argparse
import json
from fnmatch import fnmatch
from pathlib import Path

import common

from medrank.metrics import to_markdown_table

ORDER = ["bi-encoder", "cross-encoder"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=Path, default=Path("runs/history"))
    ap.add_argument("--reevaluate", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated run folder names (default: every run)")
    ap.add_argument("--out", default="history_table", help="result file stem under bench/results")
    ap.add_argument("--caption", default="", help="a sentence under each heading (what this subset shows)")
    args = ap.parse_args()
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    all_reports = {}
    for path in sorted(args.runs.glob("*/eval_valid.json")):
        if path.parent.name.startswith("gpu-") or (only and not any(fnmatch(path.parent.name, p) for p in only)):
            continue
        all_reports[path.parent.name] = json.loads(path.read_text(encoding="utf-8"))
    missing = [p for p in only if not any(fnmatch(n, p) for n in all_reports)]
    if missing:
        raise SystemExit(f"no eval_valid.json for runs {missing} under {args.runs}")
    if not all_reports:
        raise SystemExit(f"no runs with eval_valid.json under {args.runs}; train configs/history/cpu/*.yaml first")
    payload_all, md_all = {}, []
    for dataset in sorted({r["config"].get("dataset", "mts-aci") for r in all_reports.values()}):
        reports = {n: r for n, r in all_reports.items() if r["config"].get("dataset", "mts-aci") == dataset}
        payload, md = table(dataset, reports, args)
        payload_all[dataset] = payload
        md_all.extend(md)
    env = next(iter(payload_all.values()))["environment"]
    common.write(args.out, {"environment": env, "datasets": payload_all}, "\n".join(md_all))


def random_order(reports: dict) -> dict[str, float]:
    """Metrics of random candidate orders on the runs' evaluation samples (mean over 20 seeds)."""
    from medrank.pipelines.history.data import read_samples
    from medrank.pipelines.history.evaluation import subsample

    rep = next(iter(reports.values()))
    cfg = rep["config"]
    return random_order_metrics(subsample(read_samples(Path(rep["data_dir"]) / f"{cfg['valid_split']}.jsonl"),
                                          cfg["max_eval_samples"], cfg["seed"] + 1))


def random_order_metrics(samples: list) -> dict[str, float]:
    """Mean metrics of 20 seeded random candidate orders of ``samples``."""
    import numpy as np

    from medrank.metrics import evaluate
    from medrank.pipelines.history.data import candidate_qrels, run_from_scores
    from medrank.pipelines.history.evaluation import METRICS

    qrels = candidate_qrels(samples)
    out = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        out.append(evaluate(qrels, run_from_scores(samples, {s.id: rng.random(len(s.candidates)) for s in samples}),
                            METRICS))
    return {m: float(np.mean([o[m] for o in out])) for m in METRICS}


def issue_bars(rows: dict[str, dict[str, float]], first_ndcg: float) -> dict:
    """The issue's two quality bars over a table's rows (first-stage and random-order rows are not re-rankers)."""
    globals_ = {s: r for s, r in rows.items() if s.startswith("global re-ranker")}
    ce = rows.get("cross-encoder")
    rerankers = {s: r for s, r in rows.items() if not s.startswith(("first stage", "random order"))}
    return {
        "global > cross-encoder nDCG": None if not globals_ or ce is None else {
            "best global": max(globals_, key=lambda s: globals_[s]["ndcg"]),
            "best global ndcg": max(r["ndcg"] for r in globals_.values()), "cross-encoder ndcg": ce["ndcg"],
            "met": max(r["ndcg"] for r in globals_.values()) > ce["ndcg"]},
        "every re-ranker >= +20% rel. nDCG over first stage": {
            "per system": {s: r["ndcg"] / first_ndcg - 1.0 for s, r in rerankers.items()},
            # nDCG cannot exceed 1: above a first stage of 0.833 a +20 % gain is impossible by construction
            "largest attainable relative gain": 1.0 / first_ndcg - 1.0,
            "met": all(r["ndcg"] / first_ndcg - 1.0 >= 0.20 for r in rerankers.values())},
    }


def bars_line(bars: dict) -> str:
    """One Markdown line stating each bar as met / NOT met / n/a."""
    gain = bars["every re-ranker >= +20% rel. nDCG over first stage"]["largest attainable relative gain"]
    return ("Bars: " + "; ".join(f"{k}: {'n/a (no such run in this table)' if v is None else 'met' if v['met'] else 'NOT met'}"
                                 for k, v in bars.items())
            + f" (largest relative nDCG gain attainable over this first stage, at a perfect nDCG of 100: {100 * gain:+.1f} %)")


def table(dataset: str, reports: dict, args) -> tuple[dict, list[str]]:
    """Table 2 (systems) and Table 3 (ablation runs, named ``ablation-*``) of one dataset."""
    if args.reevaluate:
        from medrank.pipelines.history.evaluation import evaluate_history

        for name, rep in reports.items():
            cfg = rep["config"]
            res = evaluate_history(None, cfg["valid_split"], args.runs / name, {
                "data_dir": rep["data_dir"], "max_samples": cfg["max_eval_samples"], "seed": cfg["seed"],
                "threads": args.threads, "shuffles": cfg["eval_shuffles"] if cfg["model"] == "global" else 1})
            rep["valid"] = res["details"]
    protocols = {(r["valid_samples"], r["config"]["seed"], r["data_dir"]) for r in reports.values()}
    if len(protocols) != 1:
        raise SystemExit(f"runs were evaluated on different samples: {protocols}")
    first = next(iter(reports.values()))["first_stage"]
    stage_name = "first stage (knowledge base)" if dataset == "ddxplus" else "first stage (kNN + dense + BM25 + prior)"
    rows: dict[str, dict[str, float]] = {stage_name: first, "random order (reference)": random_order(reports)}
    rows["random order (reference)"]["rel. nDCG vs first stage"] = rows["random order (reference)"]["ndcg"] / first["ndcg"] - 1
    info = {}

    def key(item):
        name, rep = item
        return (rep["config"]["model"] == "global", ORDER.index(rep["config"]["model"]) if rep["config"]["model"] in ORDER
                else 0, name)

    ablations: dict[str, dict[str, float]] = {}
    ablation_losses = {r["config"]["loss"] for n, r in reports.items() if n.startswith("ablation-")}
    references: dict[str, dict[str, float]] = {}
    for name, rep in sorted(reports.items(), key=key):
        m = dict(rep["valid"]["metrics"])
        m["rel. nDCG vs first stage"] = m["ndcg"] / first["ndcg"] - 1.0
        (ablations if name.startswith("ablation-") else rows)[rep["system"]] = m
        if (not name.startswith("ablation-") and rep["config"]["model"] == "global"
                and rep["config"]["loss"] in ablation_losses and rep["config"].get("base", "minilm") == "minilm"):
            references[rep["system"]] = m  # the full model each ablation changes one thing of
        info[rep["system"]] = {"run": name, "train_samples": rep["train_samples"], "steps": rep["steps"],
                               "train_seconds": rep["train_seconds"], "eval_shuffles": rep["valid"]["shuffles"],
                               "ndcg_std_over_shuffles": rep["valid"]["std_over_shuffles"]["ndcg"],
                               "eval_seconds_per_sample": rep["valid"]["seconds_per_sample"]}
    bars = issue_bars(rows, first["ndcg"])
    n, seed, data = protocols.pop()
    threads = sorted({r["config"].get("threads", 1) for r in reports.values()})
    payload = {"environment": common.environment(threads[0] if len(threads) == 1 else "/".join(map(str, threads))
                                                 + " (per run config)", seed, data), "valid_samples": n, "rows": rows,
               "ablations": ablations, "runs": info, "bars": bars, "reevaluated": args.reevaluate}
    metrics = ["ndcg", "map", "mrr", "ndcg@5", "rel. nDCG vs first stage"]
    title = {"mts-aci": "MTS-Dialog + ACI-Bench", "ddxplus": "DDXPlus"}.get(dataset, dataset)
    md = [
        f"# History taking: re-rankers on {title} validation (Table 2 analogue)",
        "",
        *([args.caption, ""] if args.caption else []),
        f"{n} validation samples (seeded subset, seed {seed + 1}) of 30 candidates each; nDCG / MAP without cut-off "
        "(`medrank.metrics`, linear gain), relevance = the doctor's actual next questions among the candidates. "
        "Global re-ranker scores are means over candidate shuffles. CPU recipe: MiniLM (unless the row names "
        "another backbone), 1 epoch on a seeded subset "
        "of the training samples, 1 or 2 torch threads (the run's config) on 2 CPU cores shared with other jobs "
        "(timings are under contention).",
        "",
        to_markdown_table(rows, metrics),
        "",
        "(metric values and relative change in %; the random-order row is the mean over 20 seeded permutations)",
        "",
        to_markdown_table({s: {k: v for k, v in i.items() if isinstance(v, (int, float)) and k != "run"}
                           for s, i in info.items()},
                          ["train_samples", "steps", "train_seconds", "eval_shuffles", "ndcg_std_over_shuffles",
                           "eval_seconds_per_sample"], scale=1, digits=2),
        "",
        bars_line(bars),
        "",
    ]
    if ablations:
        md += [f"## Ablations on {title} (Table 3 analogue; same protocol)", "",
               to_markdown_table({next(iter(rows)): first, **references, **ablations}, metrics), ""]
    return payload, md


if __name__ == "__main__":
    main()
