"""One table of the procedure-normalisation runs present under ``runs/procedures`` (their own results.json).

Each training run writes ``results.json`` (train-valid and val figures, train_seconds, threads); the
runs themselves are not committed. This collects the headline figures of every run found, so a
re-run's numbers (a fresh sandbox, another host, a deeper KAR) are on record next to the
committed tables of ``bench/procedures_eval.py``:

    python bench/procedures_runs.py [--runs runs/procedures]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common


def _get(d: dict, *keys: str) -> object:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def summarise(run: Path) -> dict:
    r = json.loads((run / "results.json").read_text(encoding="utf-8"))
    cfg = r.get("config") or json.loads((run / "config.json").read_text(encoding="utf-8"))
    row = {"run": run.name, "task": cfg.get("task"), "train_layers": cfg.get("train_layers"),
           "kar_train_layers": cfg.get("kar_train_layers"), "autocast": cfg.get("autocast"),
           "epochs": cfg.get("epochs"), "train_seconds": r.get("train_seconds"), "threads": r.get("threads") or cfg.get("threads")}
    if cfg.get("task") == "procedures-mtcg":
        row |= {"val_recall@10": _get(r, "val", "recall", "recall@10"),
                "val_recall@10_prior": _get(r, "val_with_prior", "recall", "recall@10"),
                "train_valid_recall@10": _get(r, "train_valid", "recall@10"), "best_epoch": r.get("best_epoch")}
    elif cfg.get("task") == "procedures-kar":
        row |= {"val_fb_total": _get(r, "val", "total"), "val_fb_single": _get(r, "val", "single"),
                "val_fb_multi": _get(r, "val", "multi"), "train_valid_fb": r.get("theta_train_valid_acc"),
                "best_epoch": r.get("best_epoch")}
    else:
        row |= {"val_learned_total": _get(r, "val", "total"), "val_learned_single": _get(r, "val", "single"),
                "val_learned_multi": _get(r, "val", "multi"), "val_fb_total": _get(r, "val_fb", "total"),
                "kar": r.get("kar")}
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=Path, default=Path("runs/procedures"))
    args = ap.parse_args()
    runs = sorted(p.parent for p in args.runs.glob("*/results.json"))
    if not runs:
        raise SystemExit(f"no runs with results.json under {args.runs}")
    rows = [summarise(r) for r in runs]
    payload = {"environment": common.environment(), "runs": rows}
    md = ["| run | task | blocks trained | autocast | epochs | train s | threads | headline (val) |",
          "|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        if r["task"] == "procedures-mtcg":
            head = f"R@10 {r['val_recall@10']} ({r['val_recall@10_prior']} with prior); train-valid R@10 {r['train_valid_recall@10']}"
        elif r["task"] == "procedures-kar":
            head = (f"FB {r['val_fb_total']} (single {r['val_fb_single']}, multi {r['val_fb_multi']}); "
                    f"train-valid FB {r['train_valid_fb']}")
        else:
            head = (f"learned {r['val_learned_total']} (single {r['val_learned_single']}, multi {r['val_learned_multi']}); "
                    f"FB {r['val_fb_total']}")
        layers = {"procedures-mtcg": f"MTCG {r['train_layers']} of 12",
                  "procedures-kar": f"KAR {r['kar_train_layers'] or 'as its MTCG'} joint"}.get(r["task"], "–")
        md.append(f"| {r['run']} | {r['task']} | {layers} | {r['autocast'] or '–'} | {r['epochs']} | "
                  f"{r['train_seconds']} | {r['threads']} | {head} |")
    md += ["", "Figures from each run's own results.json (val = the visible val.tsv, 1,000 mentions; train-valid = the "
               "400 training mentions held out of fitting). The runs were made on the host named above unless "
               "configs/procedures/README.md says otherwise."]
    common.write("procedures_runs", payload, "\n".join(md))


if __name__ == "__main__":
    main()
