"""What /next-questions reads from a complaint sent alone, in everyday English words.

A caller that sends only the dialogue (no ``symptoms``) used to get the findings the English inquiry engine's own
detector reads (DDXPlus evidence questions matched by MiniLM: "a fever", not "a high temperature" or "the runs");
when it read none, the question bank answered and could ask again what the patient had just said. Now, where the
request sends no ``symptoms``, the first patient turn is also read by ``/symptoms``' set detector and its decided
terms count as confirmed (``Inquiry.reader``), as the page's ticked terms do.

Complaints: the 120 of ``bench/data/everyday_complaints_en.jsonl`` and ``…_en_2.jsonl`` (developer-written, labelled
with HPO terms, one slot per symptom). The findings a complaint states ("gold") are those the engine's detector reads
from the labelled terms' names (each slot's first term) read as a term's name (``detect_findings(name, term=True)``):
the same mapping the page's ticked terms go through; a slot whose name maps to no DDXPlus evidence adds nothing.
Forms, one ``NextQuestionService.rank`` call each (k = 5):

* ``words only``: ``symptoms=[]`` (the request confirms none: the engine's detector on the words, as before);
* ``words + symptoms read``: ``symptoms`` not sent (the service reads them: the terms decided at or above the
  calibrated threshold), the question bank's yes / no questions about a confirmed symptom dropped
  (``NextQuestionService.drop_repeats``, as served); ``…, bank repeats kept``: the same without dropping them;
  ``words + every decided term read``: every decided term read, those the minimum count or a wording rule adds below
  the threshold too (bank repeats kept);
* ``after a greeting: …``: as ``words + symptoms read``, the complaint stated in answer to "What brings you here
  today?" after "Hello doctor" (the first patient turns are read until one names a symptom);
* ``labelled terms (reference)``: ``symptoms`` = the labelled terms' names, as if the patient ticked exactly those.
* ablations of ``words + symptoms read``: ``…, words read besides the names``: the words a decided term covers are
  read as well as its name (no ``Inquiry.double_readings`` nor ``Inquiry.unsure_names``); ``…, names read as words,
  …``: besides, a confirmed
  symptom's name is read as the patient's words are (no ``detect_findings(term=True)``), as served before both.

Chinese (not read so as served: this is why): the DXY self-reports of the inquiry engine's validation carve-out, words
alone vs with the symptoms read by the ``dxy`` knowledge base (its self-report model refitted without those
reports), findings against each report's explicit symptoms.

Reported: the share of complaints the engine answers (not the question bank), micro P / R / F1 of the established
findings against the gold ones (a multi-choice finding counts by value; the patient's age and sex, read from the words
since 2026-11-30, are no symptom's and are left out), the mean number of the five questions that
ask again what the complaint said, the share of complaints with at least one such question, where the engine answers
how many symptoms were confirmed or read and how many of them it reads no finding from (``symptoms_not_weighed``:
its conditions are weighed without them), and one call's latency; and, over 12 openings that name no symptom ("Hello doctor", "Thank you", "I need a
sick note for work"), how many have a term read and how many a finding established
(the ``rank`` call in process, no HTTP). An engine question asks again when its finding is a gold finding; a question
of the bank names no finding, so it asks again when ``/symptoms``' detector, reading the question, decides a term of
one of the complaint's slots ("Has he been throwing up today?" → Vomiting).

    python bench/inquiry_from_words.py [--models runs] [--backend auto] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import common

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.history.question_bank import asks_for_the_complaint
from medrank.service.build import build_services, symptom_reader
from medrank.service.settings import ServiceSettings

DATA = [Path(__file__).resolve().parent / "data" / name
        for name in ("everyday_complaints_en.jsonl", "everyday_complaints_en_2.jsonl")]
FORMS = ("words only", "words + every decided term read", "words + symptoms read, bank repeats kept",
         "words + symptoms read", "after a greeting: words + symptoms read", "labelled terms (reference)")
#: ablations of "words + symptoms read": a confirmed symptom's name read as the patient's words are (no
#: ``detect_findings(term=True)``), and its words read besides its name (no ``Inquiry.double_readings`` nor
#: ``Inquiry.unsure_names``)
ABLATIONS = ("words + symptoms read, names read as words, words read besides them",
             "words + symptoms read, words read besides the names")
#: the dialogue of the "after a greeting" form, the complaint then answering the opening question
GREETING = [{"speaker": "patient", "text": "Hello doctor"}, {"speaker": "doctor", "text": "What brings you here today?"}]
#: openings that name no symptom (written for this check): nothing should be read from them
NO_SYMPTOM = ("Hello doctor", "Hi", "Good morning", "ok", "Thank you", "I'm fine, thanks", "My name is John",
              "I need a sick note for work", "I'm here for my yearly check-up", "Can I get a repeat prescription?",
              "I'd like to talk about my test results", "My GP sent me")


def load() -> list[tuple[str, list[list[str]]]]:
    """(complaint, its slots: the HPO term names that may stand for each symptom it names)."""
    out = []
    for path in DATA:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.append((row["text"], row["symptoms"]))
    return out


def prf(pred: list[set[str]], gold: list[set[str]]) -> dict[str, float]:
    tp = sum(len(p & g) for p, g in zip(pred, gold, strict=True))
    n_pred, n_gold = sum(map(len, pred)), sum(map(len, gold))
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return {"p": round(100 * p, 2), "r": round(100 * r, 2), "f1": round(100 * (2 * p * r / (p + r) if p + r else 0.0), 2)}


def ablate(engine: Any, inquiry: Any, form: str) -> None:
    """Set up ``form``'s ablation (:data:`ABLATIONS`), or undo one for any other form."""
    for name in ("detect_findings", "NAME_OVER_WORDS", "unsure_names"):
        vars(engine).pop(name, None)
        vars(inquiry).pop(name, None)
    if form in ABLATIONS:
        inquiry.NAME_OVER_WORDS = float("inf")  # no decided term reads its words instead of them
        inquiry.unsure_names = lambda read, text, terms: set()  # nor do a term's words stand for its name
    if form == ABLATIONS[0]:
        words = type(engine).detect_findings
        engine.detect_findings = lambda text, term=False, spoken=None: words(engine, text)


def chinese_part(services: Any) -> dict[str, Any]:
    """The DXY engine on the self-reports of its validation carve-out (never used to fit it), words alone vs with the
    symptoms read by the ``dxy`` knowledge base. The served self-report model is fitted on every visible report,
    these too: here it is refitted without them, so that the reading is scored on reports it never saw."""
    from medrank.config import dataset_dir
    from medrank.pipelines.history.inquiry.build import load_corpus
    from medrank.pipelines.symptom.lexicon import read_dxy_folder
    from medrank.pipelines.symptom.self_report import SelfReportModel

    svc = services.next_questions
    patients = [p for p in load_corpus("zh").valid if p.text.strip()]
    held = {p.text for p in patients}
    records = [r for r in read_dxy_folder(dataset_dir("dxy-dialog")) if r.report not in held]
    served = services.symptoms.set_detectors["dxy"]
    services.symptoms.set_detectors = {**services.symptoms.set_detectors,
                                       "dxy": SelfReportModel.fit(records, served.names)}
    svc.inquiry.reader = symptom_reader(services)
    svc.inquiry.READ_SYMPTOMS_IN = ("en", "zh")  # as if Chinese were read (it is not served so)
    forms: dict[str, Any] = {}
    for form, symptoms in (("words only", []), ("words + symptoms read", None)):
        established, seconds = [], []
        for p in patients:
            t1 = time.perf_counter()
            out = svc.rank([{"speaker": "patient", "text": p.text}], symptoms, k=5)
            seconds.append(time.perf_counter() - t1)
            established.append({f["name"] for f in out["findings"] if f["value"] == "present"})
        forms[form] = {"findings": prf(established, [set(p.initial) for p in patients]), **common.percentiles(seconds)}
        print("zh", form, forms[form], flush=True)
    services.symptoms.set_detectors = {**services.symptoms.set_detectors, "dxy": served}
    del svc.inquiry.READ_SYMPTOMS_IN  # back to the class's
    return {"reports": len(patients), "model_records": len(records), "forms": forms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("runs"), help="trained runs, as `medrank serve --models`")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="inquiry_from_words",
                    help="results file name under bench/results (e.g. inquiry_from_words_zero_shot with --models EMPTY_DIR)")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    settings = ServiceSettings(api_token=None, batch_queries=False, models_dir=args.models, backend=args.backend,
                               kbs=("hpo", "dxy"))
    t0 = time.perf_counter()
    services = build_services(settings, ("symptoms", "next-questions"), show_progress=False)
    build_s = time.perf_counter() - t0
    svc = services.next_questions
    engine = svc.inquiry.engine("en")
    complaints = load()

    def key(name: str, value: str) -> str:
        return name if value == "present" else f"{name}={value}"

    gold = [{key(f.name, f.value) for slot in slots for f in engine.detect_findings(slot[0], term=True)
             if f.value != "absent"} for _, slots in complaints]
    question_terms: dict[str, set[str]] = {}  # a bank question → the terms /symptoms decides in it

    def asks_again(result: dict[str, Any], gold_names: set[str], slots: list[list[str]]) -> bool:
        if result["finding"]:
            return result["finding"] in gold_names
        if result["text"] not in question_terms:
            found = services.symptoms.detect(result["text"], language="en", kb="hpo", k=1)
            question_terms[result["text"]] = {t["name"] for t in found.get("terms", [])}
        return bool(question_terms[result["text"]] & {n for slot in slots for n in slot})
    gold_names = [{k.split("=")[0] for k in g} for g in gold]
    rows: dict[str, Any] = {}
    examples: list[dict[str, Any]] = []
    for form in (*FORMS, *ABLATIONS):
        established, engine_used, repeats, seconds, read, why_here = [], [], [], [], [], []
        confirmed, unweighed = [], []  # per complaint: symptoms confirmed or read, those the engine reads nothing from
        svc.drop_repeats = form in ("words + symptoms read", "after a greeting: words + symptoms read",
                                    "labelled terms (reference)", *ABLATIONS)
        ablate(engine, svc.inquiry, form)
        svc.inquiry.reader = symptom_reader(services, confident=form != "words + every decided term read")
        for (text, slots), g in zip(complaints, gold_names, strict=True):
            names = [slot[0] for slot in slots]
            symptoms = names if form.startswith("labelled") else [] if form == "words only" else None
            t1 = time.perf_counter()
            opening = GREETING if form.startswith("after a greeting") else []
            out = svc.rank([*opening, {"speaker": "patient", "text": text}], symptoms, k=5)
            seconds.append(time.perf_counter() - t1)
            engine_used.append(out["engine"] == "ddxplus-kb")
            # the age and sex read from the words are no symptom's findings: the labelled terms give none
            established.append({key(f["name"], f["value"]) for f in out["findings"]
                                if f["value"] != "absent" and f["name"] not in ("age", "sex")})
            repeats.append(sum(asks_again(r, g, slots) for r in out["results"]))
            why_here.append(any(asks_for_the_complaint(r["text"]) for r in out["results"]))
            read.append(out.get("symptoms_read"))
            if out["engine"] == "ddxplus-kb":
                confirmed.append(len(symptoms if symptoms is not None else out.get("symptoms_read") or []))
                unweighed.append(len(out.get("symptoms_not_weighed") or []))
        opening_symptoms = None if "read" in form else []
        no_symptom = [svc.rank([{"speaker": "patient", "text": t}], opening_symptoms, k=5) for t in NO_SYMPTOM]
        rows[form] = {"no_symptom_openings_with_a_term_read": sum(bool(o["symptoms_read"]) for o in no_symptom),
                      "no_symptom_openings_with_a_finding": sum(bool(o["findings"]) for o in no_symptom),
                      "engine_answers_pct": round(100 * sum(engine_used) / len(complaints), 2),
                      "findings": prf(established, gold),
                      "repeated_questions_per_list": round(sum(repeats) / len(complaints), 3),
                      "lists_with_a_repeat_pct": round(100 * sum(r > 0 for r in repeats) / len(complaints), 2),
                      "lists_asking_why_here_pct": round(100 * sum(why_here) / len(complaints), 2),
                      "symptoms_confirmed_or_read": sum(confirmed), "symptoms_not_weighed": sum(unweighed),
                      **common.percentiles(seconds)}
        if form == "words + symptoms read":  # (the bank's questions it tags are read once per process)
            examples = [{"complaint": c[0], "symptoms_read": r} for c, r in zip(complaints[:6], read[:6], strict=True)]
        print(form, rows[form], flush=True)
    ablate(engine, svc.inquiry, "")
    chinese = chinese_part(services)
    payload = {"environment": common.environment(args.threads, args.seed, str(data_root())), "complaints": len(complaints),
               "complaints_with_gold_findings": sum(bool(g) for g in gold), "gold_findings": sum(map(len, gold)),
               "models": str(args.models), "backend": args.backend, "build_seconds": round(build_s, 1), "forms": rows,
               "examples": examples, "chinese": chinese}
    md = ["| request | engine answers % | findings P | R | **F1** | repeated questions per top-5 | lists with a repeat % "
          f"| lists asking why the patient came % | symptoms (confirmed or read) / not weighed | p50 ms "
          f"| of {len(NO_SYMPTOM)} openings naming no symptom: a term read | a finding |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for form, r in rows.items():
        f = r["findings"]
        md.append(f"| {form} | {r['engine_answers_pct']} | {f['p']} | {f['r']} | **{f['f1']}** | "
                  f"{r['repeated_questions_per_list']} | {r['lists_with_a_repeat_pct']} | "
                  f"{r.get('lists_asking_why_here_pct', '')} | {r['symptoms_confirmed_or_read']} / "
                  f"{r['symptoms_not_weighed']} | {r['p50_ms']} | "
                  f"{r['no_symptom_openings_with_a_term_read']} | {r['no_symptom_openings_with_a_finding']} |")
    env = payload["environment"]
    md += ["", f"Chinese: the {chinese['reports']} DXY self-reports of the inquiry engine's validation carve-out, "
               "findings established (present) against each report's explicit symptoms; the dxy knowledge base's "
               f"self-report model refitted on the {chinese['model_records']} other visible reports:", "",
           "| request | findings P | R | **F1** | p50 ms |", "|---|---|---|---|---|"]
    md += [f"| {form} | {r['findings']['p']} | {r['findings']['r']} | **{r['findings']['f1']}** | {r['p50_ms']} |"
           for form, r in chinese["forms"].items()]
    md.append("")
    md.append(f"{len(complaints)} everyday complaints ({payload['complaints_with_gold_findings']} with a gold finding, "
              f"{payload['gold_findings']} gold findings); models {args.models}, backend {args.backend}; "
              f"{env.get('cpu', '')}, {args.threads} thread(s), seed {args.seed}.")
    common.write(args.name, payload, "\n".join(md) + "\n")


if __name__ == "__main__":
    main()
