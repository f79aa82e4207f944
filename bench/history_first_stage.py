"""History-taking first stage ("expert system"): dataset sizes, recall and its own nDCG / MAP.

Reads the built MTS-Dialog + ACI-Bench folder (``medrank history build``; default
``$MEDRANK_CACHE/history/mts-aci``) and re-runs the first stage on every questioning doctor turn of
the validation split with each component alone and fused, reporting

* recall@30 (asked questions whose canonical form is among the 30 candidates / asked questions),
  the share of turns kept (>= 1 positive among the candidates; all table values are in %), nDCG@30 and MAP@30 over the turns
  with >= 1 in-bank question (qrels = all in-bank asked questions);
* nDCG / MAP (no cut-off) of the fused first stage's order on the kept samples — the baseline row
  of ``bench/history_table.py``.

    python bench/history_first_stage.py [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common

from medrank.config import seed_everything, set_threads
from medrank.metrics import evaluate, to_markdown_table
from medrank.pipelines.history.builders import default_out_dir, load_first_stage, raw_split_samples
from medrank.pipelines.history.builders.mts_aci import questions_in
from medrank.pipelines.history.builders.question_bank import map_to_bank
from medrank.pipelines.history.data import read_samples
from medrank.pipelines.history.evaluation import first_stage_metrics, subsample
from medrank.records import Qrels, Ranking

VARIANTS = {
    "prior only": {"prior": 1.0},
    "BM25 only": {"bm25": 1.0},
    "dense only": {"dense": 1.0},
    "kNN contexts only": {"knn": 1.0},
    "fused (default)": None,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--split", default="valid")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--eval-samples", type=int, default=60, help="size of the CPU recipes' seeded eval subset")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    folder = args.data_dir or default_out_dir()
    t0 = time.perf_counter()
    stage, known, meta = load_first_stage(folder)
    k = meta["first_stage"]["k"]
    items = raw_split_samples(meta)[args.split]
    asked = sorted({q for s in items for q in s.asked})
    mapped = dict(zip(asked, map_to_bank(asked, stage.bank, stage.vectors, stage.encoder, known,
                                         meta["bank"]["threshold"]), strict=True))
    qrels = Qrels()
    for s in items:
        for q in s.asked:
            if mapped[q]:
                qrels.add(s.id, mapped[q], 1)
    excludes = []
    for s in items:
        earlier = {q for t in s.context if t.speaker == "doctor" for q in questions_in(t.text)}
        excludes.append({m for q in earlier if (m := mapped.get(q) or known.get(q))})
    rows = {}
    for name, weights in VARIANTS.items():
        got = stage.retrieve([s.context for s in items], excludes, k=k, dialogue_ids=[s.dialogue_id for s in items],
                             weights=weights)
        run = {s.id: Ranking(s.id, tuple(c), tuple(sc)) for s, (c, sc) in zip(items, got, strict=True)}
        recall = sum(sum(mapped[q] in set(c) for q in s.asked if mapped[q]) / len(s.asked)
                     for s, (c, _) in zip(items, got, strict=True)) / len(items)
        kept = sum(any(mapped[q] in set(c) for q in s.asked if mapped[q]) for s, (c, _) in zip(items, got, strict=True))
        rows[name] = {f"recall@{k}": recall, "kept share": kept / len(items),
                      **evaluate(qrels, run, [f"ndcg@{k}", f"map@{k}"])}
    kept_samples = read_samples(folder / f"{args.split}.jsonl")
    eval_subset = subsample(kept_samples, args.eval_samples, args.seed + 1)  # the subset the CPU recipes evaluate on
    baseline = {
        f"all kept samples (n={len(kept_samples)})": first_stage_metrics(kept_samples),
        f"CPU-recipe eval subset (n={len(eval_subset)}, seed {args.seed + 1})": first_stage_metrics(eval_subset),
    }
    sizes = {n: {"dialogues": v["dialogues"], "questioning turns": v["questioning_turns"],
                 "kept samples": v["kept_samples"], "asked in bank": v["asked_in_bank"],
                 f"recall@{k}": v[f"first_stage_recall@{k}"]} for n, v in meta["splits"].items()}
    payload = {
        "environment": common.environment(args.threads, args.seed, str(folder)),
        "bank": meta["bank"],
        "first_stage_config": meta["first_stage"],
        "carved_from_train": meta.get("carved_from_train"),
        "splits": sizes,
        "components_on_valid_turns": rows,
        "first_stage_on_kept_samples": baseline,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    md = [
        "# History taking: dataset and first stage (MTS-Dialog + ACI-Bench)",
        "",
        f"Question bank: {meta['bank']['size']} canonical questions from {meta['bank']['questions']} asked "
        f"questions ({meta['bank']['distinct_phrasings']} distinct phrasings), {meta['bank']['clustering']} "
        f"{meta['bank']['threshold']}. Validation = official validation files + "
        f"{meta['carved_from_train']['dialogues']} training dialogues carved with seed {meta['carved_from_train']['seed']}.",
        "",
        "| split | dialogues | questioning turns | kept samples | asked questions in bank (%) | "
        f"first-stage recall@{k} (%) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(f"| {n} | {v['dialogues']} | {v['questioning turns']} | {v['kept samples']} | "
          f"{100 * v['asked in bank']:.2f} | {100 * v[f'recall@{k}']:.2f} |" for n, v in sizes.items()),
        "",
        f"## First-stage components on every questioning turn of `{args.split}` ({len(items)} turns; "
        f"nDCG/MAP over the {len(qrels)} turns with an in-bank question)",
        "",
        to_markdown_table(rows, [f"recall@{k}", "kept share", f"ndcg@{k}", f"map@{k}"]) + "\n\n(values in %)",
        "",
        "## Fused first stage on the kept samples (the Table-2 baseline; relevance = positives among the 30)",
        "",
        to_markdown_table(baseline, ["ndcg", "map", "mrr", "ndcg@5"]) + "\n\n(values in %)",
    ]
    ddx = default_out_dir("ddxplus")
    if (ddx / "meta.json").exists():
        dmeta = json.loads((ddx / "meta.json").read_text(encoding="utf-8"))
        dvalid = read_samples(ddx / "valid.jsonl")
        dsub = subsample(dvalid, args.eval_samples, args.seed + 1)
        drows = {f"all valid samples (n={len(dvalid)})": first_stage_metrics(dvalid),
                 f"CPU-recipe eval subset (n={len(dsub)}, seed {args.seed + 1})": first_stage_metrics(dsub)}
        payload["ddxplus"] = {"meta": dmeta, "first_stage_on_valid": drows}
        md += [
            "",
            "# DDXPlus: knowledge-base first stage",
            "",
            f"{dmeta['bank']['size']} evidence questions; patients split {dmeta['splits']['train']['patients']} train / "
            f"{dmeta['splits']['valid']['patients']} valid (seed {dmeta['carved_from_train']['seed']}); samples after "
            f"{dmeta['first_stage']['steps']} revealed evidences: {dmeta['splits']['train']['kept_samples']} train / "
            f"{dmeta['splits']['valid']['kept_samples']} valid, mean "
            f"{dmeta['splits']['valid']['mean_positives_in_candidates']} positives among the 30 candidates.",
            "",
            to_markdown_table(drows, ["ndcg", "map", "mrr", "ndcg@5"]) + "\n\n(values in %)",
        ]
    common.write("history_first_stage", payload, "\n".join(md))


if __name__ == "__main__":
    main()
