"""The English differential's outside class: how likely the patient's condition is none of DDXPlus's 49.

The naive Bayes normalises over the collection's conditions, so every patient gets a confident top condition, right
or not. The served engine adds an outside class (``medrank.pipelines.history.inquiry.outside``) whose prior, leak and
shrink were fitted on the engine's inner tuning split; beside it, the outside class as first served, the product of
the collection's mean likelihoods (shrink 1) with the prior and leak the same fit gives it. Measured here by leaving conditions out on the **validation
carve-out** (patients the engine's tables and tuning never saw): the 49 conditions are dealt into five folds (seed
15, not the tuning's folds); for each fold, tables fitted on the training carve-out without its conditions read every
validation patient at the states the engine's own inquiries reach after the opening and after 5 and 30 questions.
A patient of a left-out condition stands for a patient whose condition the collection lacks.

Per state:

* telling the two apart (AUROC): P(outside) against the usual baseline, one minus the top condition's probability
  (maximum softmax probability, Hendrycks and Gimpel, ICLR 2017);
* patients of a kept condition: top-1 accuracy and the mean probability of their condition, closed world (as served
  before) against open (the outside class can come first, and takes its share of the probability);
* patients of a left-out condition: the mean probability of the top condition (necessarily wrong) and the share whose
  first row is the outside class.

    python bench/differential_outside.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
from sklearn.metrics import roc_auc_score

from medrank.config import seed_everything, set_threads

FOLD_SEED = 15


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(13)
    from medrank.pipelines.history.inquiry.build import build_engine, fold_engine, load_corpus
    from medrank.pipelines.history.inquiry.outside import (
        STATE_BUDGETS,
        fit_outside,
        leave_conditions_out,
        outside_probability,
    )

    t0 = time.perf_counter()
    corpus = load_corpus("en")
    served = build_engine("en")  # the calibration as served (outside prior and leak fitted on the inner split)
    cal = served.calibration
    cases = leave_conditions_out(list(corpus.support), corpus.train, corpus.valid, fold_engine(corpus), seed=FOLD_SEED)
    before = cal.tuned_on.get("outside", {}).get("best_per_shrink", {}).get("1.0")
    variants = {f"shrink {cal.outside_shrink} (served)": (cal.outside_prior, cal.outside_leak, cal.outside_shrink)}
    if before is not None and cal.outside_shrink != 1.0:
        variants["product of the means (shrink 1, as first served)"] = (before["outside_prior"], before["outside_leak"], 1.0)
    rows = {}
    for (variant, (outside_prior, leak, shrink)), budget in ((v, b) for v in variants.items() for b in STATE_BUDGETS):
        at = [c for c in cases if c.budget == budget]
        p_out, msp, kept, left = [], [], [], []
        for c in at:
            joint = c.model.log_joint(c.observed)
            closed = served.probabilities(joint)  # tempered as served (shift-invariant)
            p = outside_probability(c.log_inside, c.log_outside(leak, shrink), outside_prior)
            opened = closed * (1.0 - p)
            p_out.append(p)
            # 1 - the top probability, ranked in log space: near certainty, 1 - p rounds to 0 for many patients alike
            z = joint / cal.temperature
            msp.append(float(np.logaddexp.reduce(np.delete(z, z.argmax())) - np.logaddexp.reduce(z)))
            if c.outside:
                left.append((float(closed.max()), float(opened.max()), p > opened.max()))
            else:
                i = c.model.conditions.index(c.condition)
                kept.append((int(closed.argmax()) == i, int(opened.argmax()) == i and opened[i] >= p,
                             float(closed[i]), float(opened[i])))
        y = [c.outside for c in at]
        p_arr, y_arr = np.clip(np.array(p_out), 1e-12, 1 - 1e-12), np.array(y)
        state = f"after {budget} questions" if budget else "after the opening"
        rows[f"{variant}, {state}"] = {
            "variant": variant, "state": state, "outside_prior": outside_prior, "leak": leak, "shrink": shrink,
            "log_loss_outside": round(float(-np.where(y_arr, np.log(p_arr), np.log1p(-p_arr)).mean()), 4),
            "patients_kept": len(kept), "patients_left_out": len(left),
            "auroc_outside": round(100 * roc_auc_score(y, p_out), 2),
            "auroc_max_softmax": round(100 * roc_auc_score(y, msp), 2),
            "kept_top1_closed": round(100 * np.mean([k[0] for k in kept]), 2),
            "kept_top1_open": round(100 * np.mean([k[1] for k in kept]), 2),
            "kept_p_true_closed": round(100 * np.mean([k[2] for k in kept]), 2),
            "kept_p_true_open": round(100 * np.mean([k[3] for k in kept]), 2),
            "left_out_p_top_closed": round(100 * np.mean([x[0] for x in left]), 2),
            "left_out_p_top_open": round(100 * np.mean([x[1] for x in left]), 2),
            "left_out_outside_first": round(100 * np.mean([x[2] for x in left]), 2),
            "mean_p_outside_kept": round(100 * np.mean([p for p, t in zip(p_out, y, strict=True) if not t]), 2),
            "mean_p_outside_left_out": round(100 * np.mean([p for p, t in zip(p_out, y, strict=True) if t]), 2),
        }
    # what the fit costs a calibration, on these cases: the grid of shrinks, and the product of the means alone
    fit_seconds = {}
    for label, shrinks in (("shrinks", None), ("shrink 1 alone", (1.0,))):
        t1 = time.perf_counter()
        fit_outside(cases) if shrinks is None else fit_outside(cases, shrinks=shrinks)
        fit_seconds[label] = round(time.perf_counter() - t1, 2)
    out = {"protocol": "leave conditions out on the DDXPlus validation carve-out (5 folds of conditions, seed 15)",
           "validation_patients": len(corpus.valid), "conditions": len(corpus.support),
           "calibration": {"outside_prior": cal.outside_prior, "outside_leak": cal.outside_leak,
                           "outside_shrink": cal.outside_shrink, "temperature": cal.temperature,
                           "fitted_on": cal.tuned_on.get("outside", {})},
           "states": rows, "fit_outside_seconds": fit_seconds, "seconds": round(time.perf_counter() - t0, 1),
           "environment": common.environment(threads=args.threads, seed=FOLD_SEED, data="../shared/data")}
    lines = ["### The English differential's outside class (DDXPlus, conditions left out, validation carve-out)", "",
             f"{len(corpus.valid)} validation patients, each read by tables without one fold of the "
             f"{len(corpus.support)} conditions (five folds): a patient of a left-out condition stands for one whose "
             "condition the collection lacks. Each outside class with the prior, leak and shrink fitted on the inner "
             "tuning split (" + "; ".join(f"{v}: prior {p}, leak {lk}" for v, (p, lk, _) in variants.items())
             + "). Log loss of P(outside) (lower is better); probabilities in %.", "",
             "| outside class | state | log loss P(outside) | AUROC P(outside) | AUROC 1 - top probability | kept: top-1 "
             "closed / open | kept: P(own condition) closed / open | left out: P(top condition) closed / open | left "
             "out: outside first | mean P(outside) kept / left out |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.values():
        lines.append(f"| {r['variant']} | {r['state']} | **{r['log_loss_outside']}** | **{r['auroc_outside']}** | "
                     f"{r['auroc_max_softmax']} | {r['kept_top1_closed']} / "
                     f"{r['kept_top1_open']} | {r['kept_p_true_closed']} / {r['kept_p_true_open']} | "
                     f"{r['left_out_p_top_closed']} / **{r['left_out_p_top_open']}** | {r['left_out_outside_first']} | "
                     f"{r['mean_p_outside_kept']} / {r['mean_p_outside_left_out']} |")
    lines += ["", f"`fit_outside` over these {len(cases)} cases: {fit_seconds['shrinks']} s over the grid of shrinks, "
              f"{fit_seconds['shrink 1 alone']} s over the product of the means alone."]
    common.write("differential_outside", out, "\n".join(lines))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
