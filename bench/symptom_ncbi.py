"""English: Bi-HardNCE vs. NCE-forward on NCBI-disease (train → devel) against MEDIC, CPU recipe.

BioSyn's setting (Sung et al., ACL 2020): every MEDIC name and synonym is an entry, a concept
scores its best entry, a prediction is correct if it shares an id with the gold set; Acc@1 and
Acc@5 on the development set. Encoder: all-MiniLM-L6-v2 (offline), top block trained over a
cached frozen bottom; see ``configs/symptom/cpu/ncbi-disease-*.yaml``.

    python bench/symptom_ncbi.py --run     # train what is missing (nice), then tabulate
"""

from __future__ import annotations

import argparse

import common
import symptom_table as table

from medrank.config import data_root
from medrank.registry import read_config

MODELS = ["bi-hardnce", "nce-forward"]
BIOSYN = {"acc@1": 0.911, "acc@5": 0.939}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="store_true")
    args = ap.parse_args()
    paths = {m: table.CONFIGS / f"ncbi-disease-{m}.yaml" for m in MODELS}
    configs = {m: read_config(p) for m, p in paths.items()}
    if args.run:
        for m in MODELS:
            if table.finished(configs[m]) is None:
                table.train(f"ncbi-disease-{m}", configs[m], table.ROOT / "runs" / "symptom" / "cpu" / "logs", paths[m])
    results = {m: r for m in MODELS if (r := table.finished(configs[m])) is not None}
    if not results:
        print("no finished runs yet")
        return
    first = next(iter(results.values()))
    zero = first["history"][0]
    md = [
        "# NCBI-disease devel, MEDIC candidates (BioSyn setting), CPU recipe",
        "",
        f"{first['valid_queries']:,} development mentions; trained on {first['train_queries']:,} distinct training "
        f"mention texts ({first['train_pairs']:,} pairs); {first['mining_terms']:,} MEDIC entries (names + synonyms). "
        "all-MiniLM-L6-v2, max length 32, top block trained, batch 32, lr 2e-4, 3 epochs × 40 steps, best epoch by "
        "devel Acc@1. Rows: `medrank train configs/symptom/cpu/ncbi-disease-<model>.yaml`; table: "
        "`python bench/symptom_ncbi.py --run`.",
        "",
        "| model | Acc@1 | Acc@5 | MRR | best epoch |",
        "|---|---:|---:|---:|---:|",
        f"| zero-shot all-MiniLM-L6-v2 (epoch 0) | {table.pct(zero.get('acc@1'))} | {table.pct(zero.get('acc@5'))} | "
        f"{table.pct(zero.get('mrr'))} | — |",
    ]
    for m, r in results.items():
        g = r["results"]["medic"]["metrics"]
        md.append(f"| {m} | {table.pct(g['acc@1'])} | {table.pct(g['acc@5'])} | {table.pct(g['mrr'])} | {r['best_epoch']} |")
    md += ["", f"Anchor: BioSyn (BioBERT, full fine-tuning, GPU) {100 * BIOSYN['acc@1']:.1f} / {100 * BIOSYN['acc@5']:.1f} (Acc@1 / Acc@5)."]
    payload = {
        "environment": common.environment(2, 13, str(data_root())),
        "results": {m: {"metrics": r["results"]["medic"]["metrics"], "history": r["history"], "best_epoch": r["best_epoch"]} for m, r in results.items()},
        "zero_shot": {k: zero.get(k) for k in ("acc@1", "acc@5", "mrr", "ndcg@5", "recall@5")},
        "biosyn": BIOSYN,
    }
    common.write("symptom_ncbi", payload, "\n".join(md))


if __name__ == "__main__":
    main()
