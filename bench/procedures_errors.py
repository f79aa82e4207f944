"""Where the procedure normaliser's exact-set errors on val come from (counts only, no mention text).

Every wrong mention of ``val.tsv`` gets the first category that applies:

* ``recall_miss`` — a gold name is not among the k_c recalled candidates (no ranking can fix it);
* ``set_size`` — every gold name was recalled but the predicted set has the wrong size (the count
  head, or θ for "≥ 3");
* ``ranking_single_seen`` / ``ranking_single_unseen`` — one gold name, one predicted, the wrong one;
  "seen" when the gold name labels some training mention (the training-label prior and the mention
  memory can only help there);
* ``ranking_multi`` — several gold names, the right number predicted, not the right ones.

Both decisions of a fusion run are counted: its learned fusion and the paper's FB (same run,
same candidates, same count head; FB re-decided from the same scores with
``procedures_eval.redecide``, no second scoring pass). Rows are reported by their 0-based index in ``val.tsv`` only
(medical text stays out of the results).

    python bench/procedures_errors.py [--run runs/procedures/fusion] [--threads 2]
"""

from __future__ import annotations

import argparse
from collections import Counter

import common
from procedures_eval import redecide

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.procedures.data import load_mentions
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer

CATEGORIES = ("recall_miss", "set_size", "ranking_single_seen", "ranking_single_unseen", "ranking_multi")


def error_category(gold: list[str], predicted: set[str], candidates: list[str], seen: set[str]) -> str | None:
    """The category of one mention's outcome (``None`` when the predicted set equals the gold set)."""
    gold_set = set(gold)
    if predicted == gold_set:
        return None
    if not gold_set <= set(candidates):
        return "recall_miss"
    if len(predicted) != len(gold_set):
        return "set_size"
    if len(gold_set) > 1:
        return "ranking_multi"
    return "ranking_single_seen" if gold[0] in seen else "ranking_single_unseen"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/procedures/fusion")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    val = load_mentions("val")
    seen = {t for m in load_mentions("train") for t in m.terms}
    norm = ProcedureNormalizer.load(args.run)
    norm.show_progress = False
    preds = norm.predict([m.text for m in val])
    decisions = {norm.fusion: [set(p.terms) for p in preds]}
    if norm.fusion != "fb":
        decisions["fb"] = redecide(preds, "fb", norm.theta)  # the manifest's θ is FB's
    results: dict[str, dict] = {}
    for name, predicted in decisions.items():
        cats = [error_category(list(m.terms), s, p.candidates, seen) for m, s, p in zip(val, predicted, preds, strict=True)]
        counts = Counter(c for c in cats if c is not None)
        results[name] = {
            "errors": sum(counts.values()),
            "accuracy": round(100 * cats.count(None) / len(val), 2),
            "by_category": {c: counts.get(c, 0) for c in CATEGORIES},
            "rows_by_category": {c: [i for i, x in enumerate(cats) if x == c] for c in CATEGORIES},
        }
    n_unseen = sum(1 for m in val if len(m.terms) == 1 and m.terms[0] not in seen)
    payload = {
        "environment": common.environment(threads=args.threads, seed=args.seed, data=str(data_root())),
        "run": args.run,
        "n": len(val),
        "n_single_unseen_gold": n_unseen,
        "results": results,
    }
    md = [
        f"Val exact-set errors of `{args.run}` by category (first that applies; see the script's docstring). "
        f"{len(val)} mentions; {n_unseen} single-term mentions whose gold name labels no training mention.",
        "",
        "| decision | accuracy | errors | " + " | ".join(CATEGORIES) + " |",
        "|---|---:|---:|" + "---:|" * len(CATEGORIES),
    ]
    for name, r in results.items():
        md.append(f"| {name} | {r['accuracy']} | {r['errors']} | " + " | ".join(str(r["by_category"][c]) for c in CATEGORIES) + " |")
    common.write("procedures_errors", payload, "\n".join(md))


if __name__ == "__main__":
    main()
