"""History re-rankers interpolated with their first stage (not in the paper; a diagnostic).

On the CPU recipe every re-ranker scores *below* its first stage (``bench/results/history_table.md``).
This asks whether the trained models still hold signal the first stage lacks: per sample, both
score lists are z-normalised over the candidates and mixed,
``final = (1 - α) · z(re-ranker) + α · z(first-stage score)``; ``α`` (grid 0, 0.1, …, 1) is chosen
on *training* samples the model never trained on (the ones its seeded ``max_train_samples``
subset left out), then the validation samples of the run are scored once with that ``α``.
``α = 0`` is the re-ranker alone, ``α = 1`` the first stage alone. Global re-rankers score the
candidates in the built order (1 shuffle) here, so their α = 0 row can differ slightly from the
shuffle-averaged figure in ``history_table.md``.

    nice -n 10 python bench/history_interpolation.py [--runs runs/history] [--tune 120] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common
import numpy as np
import torch

from medrank.config import data_root, seed_everything, set_threads
from medrank.metrics import evaluate
from medrank.pipelines.history.config import resolve_config
from medrank.pipelines.history.data import (
    bank_texts,
    candidate_qrels,
    read_bank,
    read_samples,
    render_dialogue,
    run_from_scores,
)
from medrank.pipelines.history.evaluation import load_reranker, subsample
from medrank.pipelines.history.training import data_dir

ALPHAS = [round(a, 1) for a in np.arange(0.0, 1.0001, 0.1)]
RUNS = [
    "bi-encoder", "cross-encoder", "global-lambdaloss", "global-listmle", "global-listnet", "global-neural_ndcg",
    "ddxplus-bi-encoder", "ddxplus-cross-encoder", "ddxplus-global-listnet",
]


def zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def ndcg(samples: list, model: list[np.ndarray], first: list[np.ndarray], alpha: float) -> float:
    scores = {s.id: ((1 - alpha) * zscore(m) + alpha * zscore(f)).tolist() for s, m, f in zip(samples, model, first, strict=True)}
    return float(evaluate(candidate_qrels(samples), run_from_scores(samples, scores), ["ndcg"])["ndcg"])


def reranker_scores(model, texts: dict[str, str], samples: list) -> list[np.ndarray]:
    with torch.inference_mode():
        return [np.asarray(model.score(render_dialogue(s.context), [texts[c] for c in s.candidates]), dtype=np.float64) for s in samples]


def first_stage_scores(sample) -> np.ndarray:
    if len(sample.first_stage_scores) == len(sample.candidates):
        return np.asarray(sample.first_stage_scores, dtype=np.float64)
    return -np.arange(len(sample.candidates), dtype=np.float64)  # the built order


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=Path, default=Path("runs/history"))
    ap.add_argument("--names", nargs="*", default=RUNS)
    ap.add_argument("--tune", type=int, default=120, help="held-out training samples that choose α")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    rows = {}
    for name in args.names:
        run = args.runs / name
        if not (run / "config.json").exists():
            print(f"skip {name}: no run at {run}")
            continue
        cfg = resolve_config(json.loads((run / "config.json").read_text()))
        folder = data_dir(cfg)
        texts = bank_texts(read_bank(folder / "bank.jsonl"))
        train = read_samples(folder / f"{cfg['train_split']}.jsonl")
        used = {s.id for s in subsample(train, cfg["max_train_samples"], cfg["seed"])}
        tune = subsample([s for s in train if s.id not in used], args.tune, args.seed + 2)
        valid = subsample(read_samples(folder / f"{cfg['valid_split']}.jsonl"), cfg["max_eval_samples"], cfg["seed"] + 1)
        _, model = load_reranker(run)

        tune_m, valid_m = reranker_scores(model, texts, tune), reranker_scores(model, texts, valid)
        tune_f, valid_f = [first_stage_scores(s) for s in tune], [first_stage_scores(s) for s in valid]
        by_alpha = {a: round(100 * ndcg(tune, tune_m, tune_f, a), 2) for a in ALPHAS}
        best = max(ALPHAS, key=lambda a: (by_alpha[a], -a))
        rows[name] = {
            "dataset": cfg["dataset"], "tune_samples": len(tune), "valid_samples": len(valid), "alpha": best,
            "tune_ndcg_by_alpha": by_alpha,
            "valid_ndcg": {k: round(100 * ndcg(valid, valid_m, valid_f, a), 2) for k, a in (("reranker", 0.0), ("first_stage", 1.0), ("interpolated", best))},
        }
        print(name, rows[name]["alpha"], rows[name]["valid_ndcg"])
    payload = {"environment": common.environment(args.threads, args.seed, str(data_root())), "alphas": ALPHAS, "runs": rows}
    md = [
        "| run | dataset | α (chosen on held-out train) | re-ranker nDCG | first stage nDCG | interpolated nDCG | rel. vs first stage |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        v = r["valid_ndcg"]
        rel = 100 * (v["interpolated"] - v["first_stage"]) / v["first_stage"]
        md.append(f"| {name} | {r['dataset']} | {r['alpha']} | {v['reranker']} | {v['first_stage']} | {v['interpolated']} | {rel:+.1f} % |")
    md += [
        "",
        "Validation samples as in `history_table.md` (the runs' seeded subsets); nDCG without cut-off. "
        "α mixes per-sample z-scores of the re-ranker and of the first-stage score, chosen on held-out "
        "training samples (not in the paper; a diagnostic of whether the CPU-recipe models add signal).",
    ]
    common.write("history_interpolation", payload, "\n".join(md))


if __name__ == "__main__":
    main()
