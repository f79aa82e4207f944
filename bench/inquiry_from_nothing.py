"""Chinese /next-questions when the patient's words name no symptom ("你好医生"): the question bank or the DXY engine.

The DXY question bank holds only the dialogues' template questions, each about one of the engine's 41 symptoms; a
greeting read no finding, so the bank answered with the templates nearest its words. Now the engine asks from
nothing known (its most informative questions given the prior and the self-report's text prior,
``NextQuestionService.ENGINE_FROM_NOTHING``). Both are compared on the DXY validation carve-out of the inquiry
engine (85 visible patients the engine was not fitted on), as if each had opened with the same greeting:

* the first five questions of each (the same for every patient: nothing about the patient is known yet): the share
  a patient answers yes to (the symptom is in the patient's record as present), and the patients with at least one
  yes among them;
* the engine asking five questions one after the other, each answered from the record (present / absent / not
  sure where the record does not say): the share of yes answers, and whether the differential's top condition is the
  patient's.

A bank question names its symptom by the longest symptom name it contains.

    python bench/inquiry_from_nothing.py [--models runs] [--threads 1]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import common
import numpy as np

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.inference import Finding
from medrank.pipelines.history.inquiry.build import load_corpus
from medrank.service.build import build_services
from medrank.service.settings import ServiceSettings

OPENING = "你好医生"
K = 5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("runs"), help="trained runs, as `medrank serve --models`")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    settings = ServiceSettings(api_token=None, batch_queries=False, models_dir=args.models, backend="auto")
    svc = build_services(settings, ("next-questions",), show_progress=False).next_questions
    engine = svc.inquiry.engines["zh"]
    corpus = load_corpus("zh")
    names = sorted(corpus.symptoms, key=len, reverse=True)
    patients = corpus.valid

    def has(patient, symptom: str | None) -> bool:
        return symptom is not None and patient.record.get(symptom) is True

    bank = [r["text"] for r in svc.ranker.rank([{"speaker": "patient", "text": OPENING}], [], None, "zh", K)["results"]]
    asked = {"question bank (before)": [next((n for n in names if n in q), None) for q in bank],
             "DXY engine, nothing known (served)": [q.finding for q in engine.next_questions([OPENING], [], k=K)]}
    rows = {}
    for name, symptoms in asked.items():
        rows[name] = {"questions": symptoms,
                      "yes share": round(100 * float(np.mean([np.mean([has(p, s) for s in symptoms]) for p in patients])), 1),
                      "patients with a yes": round(100 * float(np.mean([any(has(p, s) for s in symptoms) for p in patients])), 1)}
    yes, right = [], []
    for p in patients:
        found: list[Finding] = []
        turns = [OPENING]
        answers = 0
        for _ in range(K):
            proposed = engine.next_questions(turns, found, k=1)
            if not proposed:
                break
            s = proposed[0].finding
            value = "present" if has(p, s) else "absent" if p.record.get(s) is False else "unsure"
            answers += value == "present"
            found.append(Finding(s, value, source=f"question:{s}"))
            turns += [proposed[0].text, "是" if value == "present" else "否" if value == "absent" else "不确定"]
        yes.append(answers / K)
        top = engine.differential(found, k=1) if any(f.value == "present" for f in found) else []
        right.append(bool(top) and top[0].name == p.condition)
    adaptive = {"yes share": round(100 * float(np.mean(yes)), 1), "top condition right": round(100 * float(np.mean(right)), 1)}
    payload = {"environment": common.environment(args.threads, args.seed, "dxy-dialog"), "opening": OPENING,
               "patients": len(patients), "k": K, "first_questions": rows, "engine_asking_in_turn": adaptive}
    md = [f"# Chinese next questions after \"{OPENING}\" (nothing read): question bank vs DXY engine", "",
          f"{len(patients)} DXY patients of the inquiry validation carve-out; values in %.", "",
          "| first five questions | symptoms asked about | yes share | patients with a yes |", "|---|---|---:|---:|",
          *(f"| {n} | {' / '.join(s or '?' for s in r['questions'])} | {r['yes share']} | {r['patients with a yes']} |"
            for n, r in rows.items()), "",
          f"The engine asking {K} questions in turn, each answered from the record: yes share {adaptive['yes share']}, "
          f"the differential's top condition is the patient's for {adaptive['top condition right']}."]
    common.write("inquiry_from_nothing", payload, "\n".join(md))


if __name__ == "__main__":
    main()
