"""Pair generation from unlabelled questions (the STMT paper's second data method), and what it is worth.

1. The questions of the CHIP-STS training side and of KUAKE-QQR (labels
   ignored, CHIP-STS validation questions removed) go through
   ``generate_pairs``: BM25 top-20 per question, score = mean of the
   self-normalised BM25 score and the word2vec cosine, positives in
   [0.9, 1), negatives in [0, 0.6], 3 negatives per positive.
2. Where a generated pair is also a labelled pair (CHIP-STS train side or
   KUAKE-QQR, label 1 = same intent), the generated label is checked against it.
3. A matcher (``--model``, default the Siamese BiLSTM recipe: cheap) is trained on
   the labelled pairs, on the generated pairs only, and on both, and scored on
   the CHIP-STS validation side.

    nice -n 10 python bench/similar_pairs.py --threads 1 [--model bilstm]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common
import yaml

from medrank.config import data_root, set_threads
from medrank.data.questions import unique_questions, write_pairs_jsonl
from medrank.metrics import to_markdown_table
from medrank.pipelines.similar.config import resolve_config
from medrank.pipelines.similar.evaluation import PAIR_METRICS
from medrank.pipelines.similar.experiment import prepare_data, run_experiment
from medrank.pipelines.similar.pairs import PairGenerationConfig, generate_pairs

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="bilstm")
    ap.add_argument("--runs", default=str(ROOT / "runs" / "similar" / "generated"))
    args = ap.parse_args()
    set_threads(args.threads)
    runs = Path(args.runs)
    base = yaml.safe_load((ROOT / "configs" / "similar" / "chip-sts" / f"{args.model}.yaml").read_text(encoding="utf-8"))
    base.pop("task", None)
    data = prepare_data(resolve_config(base))
    questions = unique_questions(data["train"]) + unique_questions(data["extra"]["kuake-qqr"])
    questions = list(dict.fromkeys(questions))
    pairs, stats = generate_pairs(questions, "zh", PairGenerationConfig(), show_progress=False)
    path = runs / "chip-sts-train+kuake-qqr.jsonl"
    write_pairs_jsonl(pairs, path)
    labelled = {frozenset((p.text1, p.text2)): p.label for p in data["train"] + data["extra"]["kuake-qqr"]}
    agree = {"positive": [0, 0], "negative": [0, 0]}  # [agreeing, overlapping]
    for p in pairs:
        key = frozenset((p.text1, p.text2))
        if key in labelled:
            side = "positive" if p.label else "negative"
            agree[side][1] += 1
            agree[side][0] += int(labelled[key] == p.label)
    stats["overlap_with_labelled"] = {k: {"pairs": v[1], "label_agrees": v[0]} for k, v in agree.items()}
    print(json.dumps(stats), flush=True)
    rows, summaries = {}, {}
    variants = {
        "labelled pairs": {},
        "generated pairs only": {"extra_train_pairs": str(path), "use_labelled_train": False},
        "labelled + generated": {"extra_train_pairs": str(path)},
    }
    for name, over in variants.items():
        cfg = {**base, **over}
        summary = run_experiment(cfg, runs / f"{args.model}-{name.replace(' ', '_').replace('+', 'plus')}", resume=True, show_progress=False)
        summaries[name] = {k: v for k, v in summary.items() if k != "history"}
        rows[f"{args.model}, {name} ({summary['n_train_pairs']:,})"] = summary["valid"]
        print(name, {k: round(summary["valid"][k], 4) for k in PAIR_METRICS}, flush=True)
    md = (
        f"{stats['questions']:,} unlabelled questions (CHIP-STS train side + KUAKE-QQR), {stats['queries']:,} queries, "
        f"BM25 top-{stats['top_k']}: {stats['positives']:,} positives (score in [0.9, 1)), "
        f"{stats['negatives']:,} negatives sampled from {stats['negative_candidates']:,} (score in [0, 0.6]).\n\n"
        f"Generated pairs that are also labelled pairs: positives {agree['positive'][1]:,} "
        f"(label agrees on {agree['positive'][0]:,}), negatives {agree['negative'][1]:,} "
        f"(label agrees on {agree['negative'][0]:,}).\n\n"
        "CHIP-STS validation, training data varied (number of training pairs in brackets):\n\n"
        + to_markdown_table(rows, list(PAIR_METRICS), name_header="training pairs")
    )
    common.write("similar_pairs", {"environment": common.environment(args.threads, 13, str(data_root())),
                                   "generation": stats, "runs": summaries}, md)


if __name__ == "__main__":
    main()
