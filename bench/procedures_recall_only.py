"""Exact-set accuracy of MTCG alone on val: its 10 candidates ranked by s_c, the count head and θ = 0.8.

The "w/o KAR" ablation of Table 3 for any MTCG run (no KAR run needed), with and without the
training-label prior, so MTCG runs of different depths can be compared on the task's own measure:

    python bench/procedures_recall_only.py runs/procedures/mtcg runs/procedures/mtcg-deep [--threads 2]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.procedures.data import load_mentions, load_term_base
from medrank.pipelines.procedures.evaluation import set_accuracy
from medrank.pipelines.procedures.mtcg import MTCG
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer, TermPrior


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path, help="MTCG run folders (from medrank train configs/procedures/mtcg*.yaml)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    terms, val = load_term_base(), load_mentions("val")
    rows = []
    for run in args.runs:
        cfg = json.loads((run / "config.json").read_text(encoding="utf-8"))
        mtcg = MTCG.load(run / "model")
        for prior in (TermPrior.load(run / "model"), None):
            norm = ProcedureNormalizer(mtcg, None, terms, fusion="recall", prior=prior)
            acc = set_accuracy(val, norm.predict([m.text for m in val]))
            rows.append({"run": str(run), "train_layers": cfg["train_layers"], "epochs": cfg["epochs"],
                         "prior": prior is not None, **acc})
    payload = {"environment": common.environment(args.threads, args.seed, str(data_root())), "results": rows}
    md = ["| MTCG run | blocks trained | epochs | training-label prior | single | multi | total |",
          "|---|---:|---:|---|---:|---:|---:|"]
    md += [f"| {r['run']} | {r['train_layers']} | {r['epochs']} | {'yes' if r['prior'] else 'no'} | {r['single']:.2f} | "
           f"{r['multi']:.2f} | {r['total']:.2f} |" for r in rows]
    md += ["", f"Val exact-set accuracy (%) of MTCG's own ranking (s_c), {len(val)} mentions; count head and θ = 0.8 as in "
               "the full system (Table 3's \"w/o KAR\" row for each run)."]
    common.write("procedures_recall_only", payload, "\n".join(md))


if __name__ == "__main__":
    main()
