"""The age and sex a patient states, read from their words for the English differential (DDXPlus engine).

DDXPlus' tables weigh age and sex beside the findings, but a complaint sent as words gave the engine neither: "my 3
year old has a fever" was weighed as anyone's fever. ``EnglishDetector``'s words are now also read for the patient's
age and sex (``medrank.pipelines.history.inquiry.findings.read_age_sex``: "a 45-year-old woman", "my 3 year old",
"I'm 72", "my 8-month-old", "my little girl"; a duration or another number is none).

Measured on the DDXPlus **validation carve-out** (418 patients the engine's tables never saw), each opening written in
words as the simulation writes it ("45-year-old man; a cough yes", ``simulate.opening_text``) in four forms: that
rendering, "I'm 45 and I'm a man. <findings>", "my 45 year old <son|daughter> has <findings>" and "my <son|daughter>
is 45. <findings>" (a carer's words; an adult son or daughter, as a carer writes of a grown child). For each form, the share of patients whose age and sex
are read exactly as the record has them, and the differential's top-1 / top-3 accuracy after the opening when the
findings read from the words are weighed with the age and sex read and without them. Also, hand-written sentences with
a stated age and sex (and some that state none: durations, weeks of pregnancy, other people) against what they say.

    python bench/inquiry_demographics.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np

from medrank.config import seed_everything, set_threads

#: hand-written sentences and the (age, sex) they state
SENTENCES = (
    ("I am a 45-year-old woman with chest pain", (45, "F")),
    ("my 3 year old has a high temperature", (3, None)),
    ("I'm 45 and I have a cough", (45, None)),
    ("I am 72 years old and short of breath", (72, None)),
    ("aged 60, short of breath", (60, None)),
    ("my 8-month-old is coughing", (0, None)),
    ("my 2 year old daughter has a cough", (2, "F")),
    ("45 year old man, chest pain", (45, "M")),
    ("my son has a fever", (None, "M")),
    ("my little girl has a rash", (None, "F")),
    ("I'm a man and my back hurts", (None, "M")),
    ("I've had this cough for 3 years", (None, None)),
    ("it started 3 years ago", (None, None)),
    ("I'm 6 weeks pregnant and being sick", (None, None)),
    ("I'm 100% sure it's the flu", (None, None)),
    ("my wife says I snore", (None, None)),
    ("my temperature was 39 this morning", (None, None)),
    ("I have had 2 episodes of vomiting", (None, None)),
    ("my daughter is 3 and has had a high temperature since last night", (3, "F")),
    ("our baby's 10 weeks and won't feed", (0, None)),
    ("my dad is 80 and he's confused", (None, None)),
    ("my son is 5 foot 2 and has a cough", (None, "M")),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(13)
    from medrank.pipelines.history.inquiry.build import build_engine, load_corpus
    from medrank.pipelines.history.inquiry.findings import read_age_sex
    from medrank.pipelines.history.inquiry.simulate import opening, opening_text

    t0 = time.perf_counter()
    engine = build_engine("en")
    corpus = load_corpus("en")
    patients = corpus.valid

    def findings_words(patient) -> str:
        stated = [f for f in opening(engine, patient) if f.name not in ("age", "sex")]
        return opening_text(engine, patient, stated).split("; ", 1)[-1] if None not in (patient.age, patient.sex) else \
            opening_text(engine, patient, stated)

    forms = {
        "as the simulation writes it": lambda p: opening_text(engine, p, opening(engine, p)),
        "\"I'm <age> and I'm a <man|woman>. …\"": lambda p: (
            f"I'm {p.age} and I'm a {'man' if p.sex == 'M' else 'woman'}. {findings_words(p)}"),
        "\"my <age> year old <son|daughter> has …\"": lambda p: (
            f"my {p.age} year old {'son' if p.sex == 'M' else 'daughter'} has {findings_words(p)}"),
        "\"my <son|daughter> is <age>. …\"": lambda p: (
            f"my {'son' if p.sex == 'M' else 'daughter'} is {p.age}. {findings_words(p)}"),
    }
    rows = {}
    for form, write in forms.items():
        read_right, top1 = [], {"with the age and sex read": [], "without them": []}
        top3 = {k: [] for k in top1}
        for p in patients:
            text = write(p)
            found = engine.detect_findings(text)
            age = next((f.value for f in found if f.name == "age"), None)
            sex = next((f.value for f in found if f.name == "sex"), None)
            read_right.append(age == str(p.age) and sex == p.sex)
            for variant, fs in (("with the age and sex read", found),
                                ("without them", [f for f in found if f.name not in ("age", "sex")])):
                if not fs:
                    top1[variant].append(False)
                    top3[variant].append(False)
                    continue
                ranked = [c.name for c in engine.differential(fs, k=3, dialogue=[text])]
                top1[variant].append(ranked[:1] == [p.condition])
                top3[variant].append(p.condition in ranked)
        rows[form] = {"patients": len(patients), "age_and_sex_read_exactly": round(100 * np.mean(read_right), 2),
                      **{f"top1 {k}": round(100 * np.mean(v), 2) for k, v in top1.items()},
                      **{f"top3 {k}": round(100 * np.mean(v), 2) for k, v in top3.items()}}
    sentences = [{"text": t, "expected": list(e), "read": list(read_age_sex(t)), "right": read_age_sex(t) == e}
                 for t, e in SENTENCES]
    out = {"protocol": "DDXPlus validation carve-out, openings written in words; differential after the opening",
           "forms": rows, "sentences": sentences,
           "sentences_right": f"{sum(s['right'] for s in sentences)} / {len(sentences)}",
           "seconds": round(time.perf_counter() - t0, 1),
           "environment": common.environment(threads=args.threads, seed=13, data="../shared/data")}
    lines = ["### Age and sex read from the patient's words (English differential, DDXPlus validation carve-out)", "",
             f"{len(patients)} validation patients, each opening (the chief complaint, read by the engine's reader) "
             "written in words four ways; top-1 / top-3: the patient's condition first / among the first three after "
             "the opening. Values in %.", "",
             "| written as | age and sex read exactly | top-1 with them / without | top-3 with them / without |",
             "|---|---|---|---|"]
    for form, r in rows.items():
        lines.append(f"| {form} | {r['age_and_sex_read_exactly']} | **{r['top1 with the age and sex read']}** / "
                     f"{r['top1 without them']} | **{r['top3 with the age and sex read']}** / {r['top3 without them']} |")
    lines += ["", f"Hand-written sentences read right: {out['sentences_right']} "
              "(`bench/inquiry_demographics.py` lists them with what each states)."]
    wrong = [s for s in sentences if not s["right"]]
    lines += [f"- read wrong: \"{s['text']}\": {s['read']} (states {s['expected']})" for s in wrong]
    common.write("inquiry_demographics", out, "\n".join(lines))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
