"""The English differential (DDXPlus engine) for short complaints, with the body locations read from the words taken
as "one of these at least" (as served) and, beside it, as answers (how they were taken before).

DDXPlus asks pain as one finding with the body locations as values of another, and splits a body part into several
locations ("head": forehead, top of the head, back of the head). The reader gives every location the word names;
read as answers, the naive Bayes counted the one word once per location and took every other location as denied.
As served, those values weigh P(at least one of them | condition) (``medrank.pipelines.history.inquiry.posterior
.AnyOf``). For each complaint: the findings read, and the top three conditions either way. Also, over the first
patient turns of the MTS-Dialog validation conversations: how many have a body location read, and how many of those
get another top condition. No reference differential exists for these complaints: this shows what changes, it
does not score it.

    python bench/differential_examples.py
"""

from __future__ import annotations

import argparse

import common
from service_next_questions import first_patient_turns

from medrank.config import data_root, seed_everything, set_threads

COMPLAINTS = (
    "I have a headache",
    "I have a headache and fever since yesterday",
    "I have a headache and a cough",
    "I have a fever and a sore throat",
    "my knee is swollen and hurts when I walk",
    "I have chest pain when I climb stairs",
    "my stomach hurts and I feel sick",
    "my back hurts",
)


def top(engine, findings, text: str, k: int = 3) -> list[tuple[str, float]]:
    return [(engine.condition_label(c.name), round(100 * c.probability, 1))
            for c in engine.differential(findings, k=k, dialogue=[text])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    from medrank.pipelines.history.inquiry import Finding
    from medrank.pipelines.history.inquiry.build import load_engine

    engine = load_engine("en")
    multi = {n for n, v in engine.model.variables.items() if v.kind == "M"}

    def both(text: str) -> tuple[list, list, list]:
        read = engine.detect_findings(text)
        answered = [Finding(f.name, f.value, f.source) for f in read]  # read=False: taken as answers
        return read, top(engine, read, text) if read else [], top(engine, answered, text) if read else []

    rows = []
    for text in COMPLAINTS:
        read, served, before = both(text)
        outside = engine.outside_probability(read) if read else None
        rows.append({"complaint": text, "findings": [f"{engine.finding_description(f.name)}: "
                                                     f"{engine.value_label(f.name, f.value)}" for f in read],
                     "served": served, "as_answers": before,
                     "outside": None if outside is None else round(100 * outside, 1)})
        print(rows[-1], flush=True)
    openings = [t for t in first_patient_turns(10_000) if t.strip()]
    with_location = changed = 0
    for text in openings:
        read, served, before = both(text)
        if any(f.name in multi for f in read):
            with_location += 1
            changed += bool(served) and served[0][0] != before[0][0]
    corpus = {"complaints": len(openings), "with_a_value_read": with_location, "top_condition_changed": changed}
    print(corpus, flush=True)
    payload = {"environment": common.environment(threads=args.threads, seed=args.seed, data=str(data_root())),
               "rows": rows, "mts_dialog_validation_openings": corpus}
    md = ["`python bench/differential_examples.py`: DDXPlus engine (naive Bayes over its training carve-out), each "
          "complaint as the opening of a conversation; top three conditions, %; none of the 49: the outside class "
          "(`bench/differential_outside.py`), whose share the conditions of each column leave (each column its own).", "",
          "| complaint | findings read | as served (locations: one of them at least) | as answers (before) | none of the 49, as served |",
          "|---|---|---|---|---|"]
    md += [f"| {r['complaint']} | {'; '.join(r['findings'])} | "
           f"{', '.join(f'{n} {p}' for n, p in r['served'])} | {', '.join(f'{n} {p}' for n, p in r['as_answers'])} | "
           f"{'-' if r['outside'] is None else r['outside']} |" for r in rows]
    md += ["", f"MTS-Dialog validation first patient turns: {corpus['complaints']}; with a multi-choice value read "
               f"(a body location): {corpus['with_a_value_read']}; of those, another top condition: "
               f"{corpus['top_condition_changed']}."]
    common.write("differential_examples", payload, "\n".join(md))


if __name__ == "__main__":
    main()
