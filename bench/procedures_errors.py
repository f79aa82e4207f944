"""Where the procedure normaliser's exact-set errors on val come from (counts only, no mention text).

Every wrong mention of ``val.tsv`` gets the first category that applies:

* ``recall_miss`` — a gold name is not among the k_c recalled candidates (no ranking can fix it);
* ``set_size`` — every gold name was recalled but the predicted set has the wrong size (the count
  head, or θ for "≥ 3");
* ``ranking_single_seen`` / ``ranking_single_unseen`` — one gold name, one predicted, the wrong one;
  "seen" when the gold name labels some training mention (the training-label prior and the mention
  memory can only help there);
* ``ranking_multi`` — several gold names, the right number predicted, not the right ones.

The confidence flag (``Prediction.low_confidence``: some chosen term has probability < 0.5; the
learned fusion's output, or KAR's ``s_r`` under FB) is scored the same way: how many mentions it
flags, how accurate the flagged and the unflagged ones are, and how many of a handful of
hand-written strings that are not procedures at all (:data:`NOT_PROCEDURES`) it flags.

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
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer, term_confidence

#: out-of-domain probes for the confidence flag: small talk, a symptom, a drug, noise (no procedure)
NOT_PROCEDURES = ("今天天气很好", "我想买一张去北京的火车票", "你好", "头疼发烧三天", "阿莫西林胶囊",
                  "asdfgh", "12345", "hello world")

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
    ap.add_argument("--name", default="procedures_errors", help="results file stem under bench/results (one per run kept)")
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
    probes = norm.predict(list(NOT_PROCEDURES))
    probe_decisions = {norm.fusion: [set(p.terms) for p in probes]}
    if norm.fusion != "fb":
        probe_decisions["fb"] = redecide(probes, "fb", norm.theta)

    def confidences(name: str, sets: list[set[str]], predictions: list) -> list[float | None]:
        return [term_confidence(name, [p.candidates.index(t) for t in s], p.final, p.ranker_score)
                for s, p in zip(sets, predictions, strict=True)]

    confidence = {
        name: flag_report(confidences(name, predicted, preds), [set(m.terms) == s for m, s in zip(val, predicted, strict=True)],
                          confidences(name, probe_decisions[name], probes))
        for name, predicted in decisions.items()
    }
    n_unseen = sum(1 for m in val if len(m.terms) == 1 and m.terms[0] not in seen)
    payload = {
        "environment": common.environment(threads=args.threads, seed=args.seed, data=str(data_root())),
        "run": args.run,
        "n": len(val),
        "n_single_unseen_gold": n_unseen,
        "results": results,
        "confidence_flag": confidence,
        "not_procedures": list(NOT_PROCEDURES),
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
    md += [
        "",
        "Confidence flag (some chosen term has probability < 0.5): val mentions flagged, accuracy of the flagged and "
        f"the unflagged ones, errors caught, and how many of {len(NOT_PROCEDURES)} hand-written non-procedure strings "
        "(small talk, a symptom, a drug, noise; listed in the script) are flagged.",
        "",
        "| decision | flagged | accuracy flagged | accuracy unflagged | errors flagged | non-procedures flagged |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, c in confidence.items():
        md.append(f"| {name} | {c['flagged']} | {c['accuracy_flagged']} | {c['accuracy_unflagged']} | "
                  f"{c['errors_flagged']} of {c['errors']} | {c['probes_flagged']} of {c['probes']} |")
    common.write(args.name, payload, "\n".join(md))


def flag_report(confidence: list[float | None], correct: list[bool], probe_confidence: list[float | None]) -> dict:
    """What the < 0.5 flag does on val (counts and accuracies in %) and on the out-of-domain probes."""
    from medrank.pipelines.procedures.normalizer import LOW_CONFIDENCE

    flagged = [c is not None and c < LOW_CONFIDENCE for c in confidence]

    def acc(rows: list[int]) -> float | None:
        return round(100 * sum(correct[i] for i in rows) / len(rows), 2) if rows else None

    return {
        "flagged": sum(flagged),
        "accuracy_flagged": acc([i for i, f in enumerate(flagged) if f]),
        "accuracy_unflagged": acc([i for i, f in enumerate(flagged) if not f]),
        "errors": correct.count(False),
        "errors_flagged": sum(1 for f, ok in zip(flagged, correct, strict=True) if f and not ok),
        "probes": len(probe_confidence),
        "probes_flagged": sum(1 for c in probe_confidence if c is not None and c < LOW_CONFIDENCE),
    }


if __name__ == "__main__":
    main()
