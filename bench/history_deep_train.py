"""Diagnostic: more MTS-Dialog + ACI-Bench training samples by looking deeper into the first stage.

Only 669 of the 3,168 training questioning turns are kept, because the first stage puts the
doctor's actual question in its top 30 for ~21 % of them. This script re-runs the saved first
stage on every training turn, keeps the turns whose asked question is in the top ``--depth``
(not only the top 30), and swaps that positive in for the lowest-ranked of the 30 candidates
(candidates stay in first-stage order, with their real first-stage scores). It writes
``train-d<depth>.jsonl`` next to ``train.jsonl`` in the built folder, for a run with
``train_split: train-d<depth>`` (``configs/history/cpu/ablations/neural_ndcg-deep-train.yaml``).

Result (2026-11-23, depth 200: 1,429 samples): the NeuralNDCG global re-ranker trained on them
scores 30.80 nDCG on the validation subset, against 37.52 with the 480 kept samples and 30.88 for
a random order — more samples whose positive the first stage ranks low do not teach the model
the task (see ``configs/history/README.md``).

    python bench/history_deep_train.py [--depth 200] [--data-dir ~/.cache/medrank/history/mts-aci]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    from medrank.pipelines.history.builders import default_out_dir, load_first_stage, raw_split_samples
    from medrank.pipelines.history.builders.mts_aci import questions_in
    from medrank.pipelines.history.data import Sample, write_jsonl

    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, nargs="+", default=[200])
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--split", default="train")
    args = ap.parse_args()
    if min(args.depth) < 30:
        raise SystemExit("--depth must be >= 30 (the candidate list size)")
    folder = args.data_dir or default_out_dir("mts-aci")
    stage, known, meta = load_first_stage(folder)
    k = meta["first_stage"]["k"]
    items = raw_split_samples(meta)[args.split]
    exclude = [{known[q] for t in s.context if t.speaker == "doctor" for q in questions_in(t.text) if q in known}
               for s in items]
    retrieved = stage.retrieve([s.context for s in items], exclude, k=max(args.depth),
                               dialogue_ids=[s.dialogue_id for s in items], show_progress=True)
    positives = [list(dict.fromkeys(known[q] for q in s.asked if q in known)) for s in items]
    for depth in args.depth:
        rows = []
        for s, pos, (cands, scores) in zip(items, positives, retrieved, strict=True):
            rank = {c: i for i, c in enumerate(cands[:depth])}
            found = [rank[p] for p in pos if p in rank]
            if not found:
                continue
            deep = [r for r in found if r >= k]
            keep = sorted([i for i in range(min(k, len(cands))) if i not in deep][: k - len(deep)] + deep)
            rows.append(Sample(s.id, s.dialogue_id, s.source, list(s.context), list(s.asked), pos,
                               [cands[i] for i in keep], [scores[i] for i in keep]).to_json())
        write_jsonl(folder / f"{args.split}-d{depth}.jsonl", rows)
        print(f"depth {depth}: {len(rows)} of {len(items)} {args.split} turns -> {folder / f'{args.split}-d{depth}.jsonl'}")
    best = np.array([min((cands.index(p) for p in pos if p in cands), default=np.inf)
                     for pos, (cands, _) in zip(positives, retrieved, strict=True)])
    for cut in sorted({k, *args.depth}):
        print(f"asked question in the first stage's top {cut}: {100 * np.mean(best < cut):.1f} %")


if __name__ == "__main__":
    main()
