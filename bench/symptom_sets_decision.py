"""English set decision, design choices measured on the run's own validation terms (never the check's).

Table (c) of ``bench/symptom_sets.py`` is the check: its 800 terms must not choose the detector's design. This
bench composes complaints the same way (:func:`medrank.pipelines.symptom.synthetic.compose_complaints`) from the
terms a trained HPO layperson run validates on (its fixed tenth; no training phrase of theirs), over the run's
dense + definitions index with the layperson synonyms of the check terms and of half the validation terms left
out (as the run's own calibration is fitted). The validation terms are cut in two folds (seed 7); each fold's
set decision is fitted on 600 complaints of its terms (phrases the index holds and phrases it lacks) and decides
300 complaints of the other fold's unseen-phrase terms, as the check does; the figures average the two folds.

Variants: the detector before clause joining and the lead feature; with the top hit's lead over the span's next
hit (feature ``span_margin``); with clauses joined at a fixed margin (:meth:`SetDetector._segment`); with the
margin chosen by the fit among :data:`~medrank.pipelines.symptom.sets.JOIN_MARGINS` (what a run's calibration does).

    python bench/symptom_sets_decision.py --run runs/symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def [--threads 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import common
import numpy as np
from symptom_sets import encoder, retriever

from medrank.config import set_threads
from medrank.data.hpo import layperson_split, load_hpo, without_layperson_of
from medrank.pipelines.symptom.config import SymptomConfig
from medrank.pipelines.symptom.sets import BASE_FEATURES, JOIN_MARGINS, HpoHierarchy, SetDetector, set_prf
from medrank.pipelines.symptom.synthetic import compose_complaints
from medrank.pipelines.symptom.task import load_task_data

SEED = 13  # the unseen half of the validation terms, as fit_layperson_sets draws it with the run's seed
FOLD_SEED = 7
N_FIT, N_TEST = 600, 300
WITHOUT_LEAD = tuple(f for f in BASE_FEATURES if f != "span_margin")
N_FIT_MORE = 1800  # the larger calibration: the same 600 complaints and 1,200 more of the same terms
#: name → (features, join margin: a number, None for never, "fit" for the calibration's choice, model, fit complaints)
VARIANTS: dict[str, tuple[tuple[str, ...], Any, str, int]] = {
    "before: clauses never joined, no lead feature": (WITHOUT_LEAD, None, "logistic", N_FIT),
    "+ the top hit's lead over the span's next hit (span_margin)": (BASE_FEATURES, None, "logistic", N_FIT),
    "+ lead, clauses joined at margin 0": (BASE_FEATURES, 0.0, "logistic", N_FIT),
    "+ lead, clauses joined at margin 0.05": (BASE_FEATURES, 0.05, "logistic", N_FIT),
    "+ lead, clauses joined, margin chosen by the fit (as a run's calibration)": (BASE_FEATURES, "fit", "logistic", N_FIT),
    "+ lead, joined at 0, boosted trees": (BASE_FEATURES, 0.0, "boosted", N_FIT),
    f"+ lead, joined at 0, {N_FIT_MORE} fit complaints": (BASE_FEATURES, 0.0, "logistic", N_FIT_MORE),
    f"+ lead, joined at 0, boosted trees, {N_FIT_MORE} fit complaints": (BASE_FEATURES, 0.0, "boosted", N_FIT_MORE),
}


def validation_terms(run_config: dict[str, Any], concepts: list[Any], check_ids: set[str]) -> list[Any]:
    """The run's validation terms with layperson synonyms (its own split, as ``medrank train`` loads it)."""
    valid = load_task_data(SymptomConfig.from_dict(run_config)).valid
    by_id = {c.id: c for c in concepts}
    ids = dict.fromkeys(t for q in valid.queries for t in valid.qrels.relevant(q.id))
    return [by_id[i] for i in ids if i in by_id and i not in check_ids and by_id[i].meta.get("layperson")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, required=True, help="a trained hpo-layperson run with a model/ folder")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variant", action="append", help="measure only this variant (repeatable; default: all); the "
                    "other variants' rows are kept as the results file holds them")
    args = ap.parse_args()
    set_threads(args.threads)
    run_config = json.loads((args.run / "config.json").read_text(encoding="utf-8"))
    if run_config.get("dataset") != "hpo-layperson":
        raise SystemExit(f"{args.run} is not an hpo-layperson run (dataset {run_config.get('dataset')!r})")
    t0 = time.perf_counter()
    concepts = load_hpo()
    hier = HpoHierarchy()
    check = layperson_split(concepts)[0]
    terms = validation_terms(run_config, concepts, {c.id for c in check})
    unseen = random.Random(SEED).sample(terms, len(terms) // 2)
    unseen_ids = {c.id for c in unseen}
    model = str(args.run / "model")
    digest = hashlib.sha256(json.dumps(encoder(model).fingerprint(), sort_keys=True, default=str).encode()).hexdigest()
    index = retriever(f"hpo-decision-dense-{args.run.name}-{digest[:12]}", without_layperson_of(concepts, check + unseen),
                      "dense", model, "en", bool(run_config.get("use_definitions")))
    shuffled = list(terms)
    random.Random(FOLD_SEED).shuffle(shuffled)
    folds = [shuffled[: len(shuffled) // 2], shuffled[len(shuffled) // 2:]]
    data = []
    for n, fold in enumerate(folds):
        rng = random.Random(100 + n)
        fit = compose_complaints(fold, hier, rng, N_FIT)
        test = compose_complaints([c for c in fold if c.id in unseen_ids], hier, rng, N_TEST)
        more = compose_complaints(fold, hier, random.Random(200 + n), N_FIT_MORE - N_FIT)
        data.append((fit, test, (fit[0] + more[0], fit[1] + more[1])))
    previous = Path(__file__).parent / "results" / "symptom_sets_decision.json"
    kept = json.loads(previous.read_text(encoding="utf-8")).get("systems", {}) if args.variant and previous.exists() else {}
    rows: dict[str, Any] = {}
    unknown = [v for v in args.variant or () if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    only = list(args.variant or VARIANTS)
    for name in only:
        features, margin, model_kind, n_fit = VARIANTS[name]
        per_fold = []
        for fit_on, test_on in ((0, 1), (1, 0)):
            kwargs = {} if margin == "fit" else {"join_margin": margin}
            det = SetDetector.from_retriever(index, language="en", hierarchy=hier, name="hpo", **kwargs)
            cal = det.fit(*data[fit_on][0 if n_fit == N_FIT else 2], span_rule=True, features=features, model=model_kind,
                          join_margins=JOIN_MARGINS if margin == "fit" else (None,))
            texts, gold = data[test_on][1]
            preds = [{t.id for t in s.terms} for s in det.detect_many(texts)]
            per_fold.append({**set_prf(preds, gold), "join_margin": cal.join_margin})
        rows[name] = {k: round(100 * float(np.mean([f[k] for f in per_fold])), 2) for k in ("precision", "recall", "f1")}
        rows[name]["f1_per_fold"] = [round(100 * f["f1"], 2) for f in per_fold]
        rows[name]["join_margin_per_fold"] = [f["join_margin"] for f in per_fold]
        print(name, rows[name], flush=True)
    rows = {name: rows.get(name, kept.get(name)) for name in VARIANTS if name in rows or name in kept}
    out = {"run": str(args.run), "validation_terms": len(terms), "unseen_terms": len(unseen), "folds": [len(f) for f in folds],
           "complaints_fit_per_fold": N_FIT, "complaints_test_per_fold": N_TEST, "systems": rows,
           "seconds": round(time.perf_counter() - t0, 1),
           "environment": common.environment(threads=args.threads, seed=SEED, data="../shared/data (HPO)")}
    lines = [f"### English set decision on the run's validation terms ({args.run.name}; {len(terms)} terms, 2 folds by "
             f"term, {N_FIT} complaints fit / {N_TEST} decided per fold, synthetic)", "",
             "| variant | P | R | **F1** | F1 per fold | join margin per fold |", "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['precision']} | {r['recall']} | **{r['f1']}** | {r['f1_per_fold']} | "
                     f"{r['join_margin_per_fold']} |")
    common.write("symptom_sets_decision", out, "\n".join(lines))


if __name__ == "__main__":
    main()
