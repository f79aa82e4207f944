"""History re-rankers scored on the *whole* validation split, not the 60-sample CPU-recipe subset.

The Table-2 runs evaluate on a seeded subset of 60 samples to keep each run short; at that size
a run's nDCG moves by a few points with nothing but float noise (see the no-shuffling ablation in
``history_ablations.md``). This re-scores saved runs on every validation sample of their dataset
with the same code (`medrank evaluate`), next to the first stage on the same samples, and states
the issue's bars (global > cross-encoder; every re-ranker >= +20 % over the first stage) on them.

    python bench/history_full_valid.py runs/history/global-neural_ndcg runs/history/e5-global-neural_ndcg ...
    python bench/history_full_valid.py runs/history/ddxplus-* --out history_full_valid_ddxplus
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common
from history_table import bars_line, issue_bars, random_order_metrics

from medrank.metrics import to_markdown_table


def main() -> None:
    from medrank.pipelines.history.data import read_samples
    from medrank.pipelines.history.evaluation import evaluate_history

    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="history_full_valid", help="result file stem under bench/results")
    ap.add_argument("--shuffles", type=int, default=1,
                    help="candidate shuffles for the global re-ranker (restarted positions: order-free, 1 suffices)")
    args = ap.parse_args()
    by_dataset: dict[str, dict] = {}
    for run in args.runs:
        rep = json.loads((run / "eval_valid.json").read_text(encoding="utf-8"))
        cfg = rep["config"]
        res = evaluate_history(None, cfg["valid_split"], run, {
            "data_dir": rep["data_dir"], "max_samples": None, "seed": cfg["seed"], "threads": args.threads,
            "shuffles": args.shuffles})
        dataset = cfg.get("dataset", "mts-aci")
        if dataset not in by_dataset:  # first stage and random order: once per dataset, on the same samples
            by_dataset[dataset] = {"samples": res["samples"], "data_dir": rep["data_dir"], "seed": cfg["seed"], "rows": {
                "first stage": res["systems"]["first stage"],
                "random order (mean of 20)": random_order_metrics(read_samples(Path(res["file"])))}}
        by_dataset[dataset]["rows"][rep["system"]] = {
            **res["details"]["metrics"], f"ndcg on the {rep['valid_samples']}-sample subset": rep["valid"]["metrics"]["ndcg"]}
    md = []
    for dataset, entry in by_dataset.items():
        first = entry["rows"]["first stage"]["ndcg"]
        for row in entry["rows"].values():
            row["rel. nDCG vs first stage"] = row["ndcg"] / first - 1.0
        cols = ["ndcg", "map", "mrr", "ndcg@5", "rel. nDCG vs first stage"]
        cols += sorted({k for r in entry["rows"].values() for k in r if k.startswith("ndcg on the")})
        entry["bars"] = issue_bars(entry["rows"], first)
        md += [f"# History re-rankers on the whole {dataset} validation split ({entry['samples']} samples)", "",
               to_markdown_table(entry["rows"], cols), "",
               "(values and relative change in %; nDCG / MAP without cut-off; the last column is the run's own "
               "evaluation on the CPU recipe's seeded subset)", "", bars_line(entry["bars"]), ""]
    first_entry = next(iter(by_dataset.values()))
    common.write(args.out, {"environment": common.environment(args.threads, first_entry["seed"],
                                                                          first_entry["data_dir"]),
                                        "datasets": by_dataset}, "\n".join(md))


if __name__ == "__main__":
    main()
