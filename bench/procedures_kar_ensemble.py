"""Does a second KAR (the BCE-only run, same MTCG) add signal to the learned fusion?

Refits the fusion's logistic regression on s_c, the listwise KAR's logit, the BCE-only KAR's logit and
the TF-IDF votes, and prints 5-fold CV on the 400 train-valid mentions and val exact-set accuracy beside
the base (one KAR; its CV reproduces the fusion run's). Needs runs/procedures/kar and
runs/procedures/kar-bce (configs/procedures/README.md). Printed only: it backs a measured-and-not-kept
row of configs/procedures/README.md.

    python bench/procedures_kar_ensemble.py
"""

from __future__ import annotations

import argparse

import numpy as np
from procedures_fusion_variants import accuracy, cross_validated, fit_and_tune, logistic

from medrank.config import seed_everything, set_threads
from medrank.pipelines.procedures.data import load_mentions
from medrank.pipelines.procedures.fusion import LearnedFusion
from medrank.pipelines.procedures.memory import MentionMemory
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer
from medrank.pipelines.procedures.training import fusion_training_data


def logit(s_c: np.ndarray, s_r: np.ndarray, votes: np.ndarray) -> np.ndarray:
    """KAR's clipped logit, exactly as the learned fusion computes it."""
    return LearnedFusion.features(s_c, s_r, votes, "logit")[..., 1:2]


def features(s_c: np.ndarray, r1: np.ndarray, r2: np.ndarray, votes: np.ndarray, both: bool) -> np.ndarray:
    cols = [s_c[..., None], logit(s_c, r1, votes)] + ([logit(s_c, r2, votes)] if both else []) + [votes]
    return np.concatenate(cols, axis=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kar", default="runs/procedures/kar")
    ap.add_argument("--second-kar", default="runs/procedures/kar-bce")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    first = ProcedureNormalizer.load(args.kar, fusion="fb", learned=None, memory=None)
    second = ProcedureNormalizer.load(args.second_kar, fusion="fb", learned=None, memory=None)
    valid, preds, s_c, s_r1, votes, labels = fusion_training_data(first, 10)
    _, preds2, _, s_r2, _, _ = fusion_training_data(second, 10)
    if [p.candidates for p in preds] != [p.candidates for p in preds2]:
        raise SystemExit("the two KAR runs recall different candidates: they must share one MTCG")
    train, val = load_mentions("train"), load_mentions("val")
    val_preds = first.predict([m.text for m in val])
    val_preds2 = second.predict([m.text for m in val])
    val_votes = MentionMemory([m.text for m in train], [m.terms for m in train], k=10).votes(
        [m.text for m in val], [p.candidates for p in val_preds])
    val_s_c = np.array([p.recall_score for p in val_preds])
    val_r1 = np.array([p.ranker_score for p in val_preds])
    val_r2 = np.array([p.ranker_score for p in val_preds2])
    gold, val_gold = [m.terms for m in valid], [m.terms for m in val]
    for name, both in (("base (listwise KAR)", False), ("+ BCE-only KAR logit", True)):
        x = features(s_c, s_r1, s_r2, votes, both)
        scorer, theta = fit_and_tune(logistic, x, labels, preds, gold, args.seed)
        cv = cross_validated(logistic, x, labels, preds, gold, args.seed)
        val_acc = 100 * accuracy(scorer(features(val_s_c, val_r1, val_r2, val_votes, both)), val_preds, val_gold, theta)
        print(f"{name}: train-valid CV {cv:.2f}, val {val_acc:.2f} (theta {theta})", flush=True)


if __name__ == "__main__":
    main()
