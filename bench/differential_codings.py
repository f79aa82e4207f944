"""The English differential when the patient's words read as two codings of one complaint.

DDXPlus codes some complaints twice: "Do you have a sore throat?" (E_97) and pain somewhere at the pharynx (E_53 with
the location E_55), and each condition's cases use one of them (its URTI cases the first, its viral pharyngitis cases
the second). The finding detector reads "a sore throat" (and the HPO term Pharyngalgia that ``/symptoms`` decides for
it) as both. Taken as two findings, every condition whose cases use one coding is charged the floor probability of the
other; as served they are one complaint, of which at least one coding holds
(``medrank.pipelines.history.inquiry.posterior.Observation``). The pairs are the detector's ``alternative_codings``.

Patients: the DDXPlus validation carve-out (never used to fit the engine) whose record codes a paired complaint (the
yes / no finding present, or pain at one of its locations). For each, the complaint as the words read it (the yes / no
finding, pain, and every location of the pair, all read from text) is ranked:

* ``one of them at least`` (as served) and ``two findings`` (as before);
* ``the record's own coding`` (reference): only what the patient's record says of the complaint, read from text
  (a record that states both codings: as two findings).

With ``--answered`` the rest of the record is added as answers too (a finished interview). Reported per setting:
top-1 and top-3 accuracy of the patient's condition and its mean probability, over every patient and by the coding
the record uses.

    python bench/differential_codings.py [--threads 1] [--limit N]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

import common

from medrank.config import data_root, seed_everything, set_threads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--limit", type=int, default=0, help="at most this many patients per coding (0: all)")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    from medrank.pipelines.history.inquiry import Finding
    from medrank.pipelines.history.inquiry.build import load_corpus, load_engine
    from medrank.pipelines.history.inquiry.posterior import PRESENT

    t0 = time.perf_counter()
    engine = load_engine("en")
    corpus = load_corpus("en")
    detector = engine.detector
    codings = dict(detector.alternative_codings)
    pain = detector.pain.pain

    def record_coding(patient: Any, name: str, location: str, values: frozenset[str]) -> tuple[str, list[Any]] | None:
        """Which coding the record uses for the complaint (``None``: neither), and the findings it states."""
        yes = patient.record.get(name) is True
        places = sorted(set(patient.record.get(location) or ()) & values)
        if not yes and not places:
            return None
        own = [Finding(name, PRESENT, read=True)] if yes else []
        if places:
            own += [Finding(pain, PRESENT, read=True)] + [Finding(location, v, read=True) for v in places]
        return ("both" if yes and places else "yes / no finding" if yes else "pain location"), own

    def answers(patient: Any, skip: set[str]) -> list[Any]:
        out = []
        for name, value in patient.record.items():
            if name in skip or name not in engine.model.variables:
                continue
            if value is True or value is False:
                out.append(Finding(name, PRESENT if value else "absent", "question:" + name))
            elif isinstance(value, tuple):
                out += [Finding(name, v, "question:" + name) for v in value]
            else:
                out.append(Finding(name, str(value), "question:" + name))
        return out

    def rank(findings: list[Any], paired: bool, condition: str) -> tuple[int, float]:
        detector.alternative_codings = codings if paired else {}
        try:
            ranked = engine.differential(findings, k=len(engine.model.conditions))
        finally:
            detector.alternative_codings = codings
        names = [c.name for c in ranked]
        return names.index(condition) + 1, next(c.probability for c in ranked if c.name == condition)

    settings = ("one of them at least (as served)", "two findings (before)", "the record's own coding (reference)")
    results: dict[str, Any] = {}
    for answered in (False, True):
        scores: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
        counts: dict[str, int] = defaultdict(int)
        for patient in corpus.valid:
            for name, (location, values) in codings.items():
                found = record_coding(patient, name, location, values)
                if found is None:
                    continue
                kind, own = found
                if args.limit and counts[kind] >= args.limit:
                    continue
                counts[kind] += 1
                read = ([Finding(name, PRESENT, read=True), Finding(pain, PRESENT, read=True)]
                        + [Finding(location, v, read=True) for v in sorted(values)])
                rest = answers(patient, {name, pain, location}) if answered else []
                for setting, findings, paired in ((settings[0], read, True), (settings[1], read, False),
                                                  (settings[2], own, False)):
                    r = rank(findings + rest, paired, patient.condition)
                    scores[setting, kind].append(r)
                    scores[setting, "every patient"].append(r)
        table: dict[str, dict[str, Any]] = {}
        order = ("every patient", "yes / no finding", "pain location", "both")
        for (setting, kind), rs in sorted(scores.items(), key=lambda item: (order.index(item[0][1]), item[0][0])):
            table.setdefault(kind, {})[setting] = {
                "patients": len(rs), "top1": round(100 * sum(r == 1 for r, _ in rs) / len(rs), 2),
                "top3": round(100 * sum(r <= 3 for r, _ in rs) / len(rs), 2),
                "mean_probability": round(100 * sum(p for _, p in rs) / len(rs), 2)}
        results["complaint and the rest of the record answered" if answered else "complaint alone"] = table
        print(table, flush=True)
    payload = {"environment": common.environment(threads=args.threads, seed=args.seed, data=str(data_root())),
               "pairs": {n: [loc, sorted(v)] for n, (loc, v) in codings.items()},
               "pair_labels": {n: [engine.finding_description(n),
                                   [engine.value_label(loc, v) for v in sorted(vs)]] for n, (loc, vs) in codings.items()},
               "validation_patients": len(corpus.valid), "limit_per_coding": args.limit, "results": results,
               "seconds": round(time.perf_counter() - t0, 1)}
    md = ["`python bench/differential_codings.py`: the DDXPlus engine (naive Bayes over its training carve-out) on its "
          f"validation carve-out ({len(corpus.valid)} patients), those whose record codes a complaint the detector "
          "reads as two codings: " + "; ".join(f"{d} or pain at {', '.join(places)}"
                                               for d, places in payload["pair_labels"].values()) + ". "
          "Top-1 / top-3 accuracy of the patient's condition and its mean probability, %.", ""]
    for title, table in results.items():
        md += [f"**{title}**", "", "| the record's coding | patients | " + " | ".join(settings) + " |",
               "|---|---|" + "---|" * len(settings)]
        for kind, row in table.items():
            n = next(iter(row.values()))["patients"]
            md.append(f"| {kind} | {n} | " + " | ".join(
                f"{row[s]['top1']} / {row[s]['top3']} / {row[s]['mean_probability']}" for s in settings) + " |")
        md.append("")
    common.write("differential_codings", payload, "\n".join(md))


if __name__ == "__main__":
    main()
