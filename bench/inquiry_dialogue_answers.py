"""The patient's answers in the dialogue: does /next-questions take them as answers?

A caller of ``/next-questions`` and ``/differential`` may send the conversation alone: the doctor's questions and the
patient's answers ("Yes", "No", "lower chest, breast(R)") as dialogue turns, without the structured ``findings`` the
page sends. Before, such an answer was read only as free text, which says little ("No" reads no finding), so the
engine asked the same question again. Now a patient turn that opens with an answer ("yes", "no, but …", "not sure";
Chinese 有 / 没有 / 不确定) to a doctor's yes / no question is that question's answer (``InquiryEngine.answer_value``,
``InquiryEngine.asked_findings``: the finding whose question it is word for word, else the findings the detector reads
in the question), and the engine's own question about a categorical or multi-choice finding is answered by the
meanings of its values the turn names (``InquiryEngine.answered_findings``).

Patients: the first ``--n`` of each inquiry engine's validation carve-out (DDXPlus in English, DXY in Chinese; never
used to fit the engine). Each inquiry: the patient's opening (``simulate.opening_text``: DDXPlus' initial evidence in
words, the DXY self-report), then ``--steps`` turns of the engine's first question and the patient's answer from the
record, worded as the simulator words it ("Yes", "No", a categorical answer's value meanings; "是的，有", "没有"). Forms:

* ``answers sent as findings`` (reference, as the page does): the dialogue and the structured answers;
* ``dialogue only``: the dialogue alone (``findings`` empty), the yes / no answers read from it (served);
* ``dialogue only, answers not read`` (as served before): the same with ``answered_findings`` giving nothing.

Reported: of the yes / no answers given, the share established with the answered value (categorical answers are
not counted there); the mean number of questions (of ``--steps``) that ask again about a finding the patient already
answered (yes / no or categorical); top-1 accuracy of ``/differential`` after the last answer (its first condition is the patient's) and the mean probability it gives the patient's condition.

Besides, real doctors' questions: every doctor turn followed by a patient (or family) turn in MTS-Dialog's validation
conversations, how many of those turns open with an answer and which findings they answer now (listed for reading:
the English engine reads a free-worded question only where each word it names is a word of the findings it reads).

    python bench/inquiry_dialogue_answers.py [--threads 1] [--n 200] [--steps 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import common

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.history.inquiry.build import load_corpus
from medrank.pipelines.history.inquiry.simulate import answer, answer_text, opening, opening_text
from medrank.service.build import build_services
from medrank.service.settings import ServiceSettings

FORMS = ("answers sent as findings", "dialogue only", "dialogue only, answers not read")


def inquiry(services: Any, engine: Any, patient: Any, form: str, steps: int) -> dict[str, Any]:
    """One inquiry of ``steps`` answers in ``form``; what it established, asked again and concluded."""
    start = opening(engine, patient)
    dialogue = [{"speaker": "patient", "text": opening_text(engine, patient, start)}]
    findings = [{"name": f.name, "value": f.value, "source": "self-report"} for f in start]
    answered: dict[str, str] = {}  # yes / no finding -> the value the patient gave
    asked: set[str] = set()
    asked_again = 0
    for _ in range(steps):
        sent = findings if form == FORMS[0] else []
        out = services.next_questions.rank(dialogue, [], None, engine.language, 1, sent)
        if out["engine"] == "question-bank" or not out["results"]:
            break
        name = out["results"][0]["finding"]
        asked_again += name in asked
        asked.add(name)
        reply = answer(engine, patient, name)
        if not engine.finding_options(name):
            answered[name] = reply[0].value
        findings += [{"name": f.name, "value": f.value} for f in reply if f.name not in {g["name"] for g in findings}]
        dialogue += [{"speaker": "doctor", "text": out["results"][0]["text"]},
                     {"speaker": "patient", "text": answer_text(engine, name, [f.value for f in reply])}]
    sent = findings if form == FORMS[0] else []
    ddx = services.differential.rank(sent, engine.language, k=len(engine.model.conditions), dialogue=dialogue, symptoms=[])
    established = {(f["name"], f["value"]) for f in ddx["findings"]}
    probability = {c["name"]: c["probability"] for c in ddx["results"]}
    return {"answers": len(answered), "established": sum((n, v) in established for n, v in answered.items()),
            "asked_again": asked_again, "top1": bool(ddx["results"]) and ddx["results"][0]["name"] == patient.condition,
            "p_true": probability.get(patient.condition, 0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=200, help="validation patients per language")
    ap.add_argument("--steps", type=int, default=5, help="questions answered per inquiry")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        settings = ServiceSettings(api_token=None, batch_queries=False, state_dir=tmp)
        services = build_services(settings, ("next-questions", "differential"), show_progress=False)
        rows = run(services, args)
        transcripts = mts_answers(services.differential.inquiry.engine("en"))
    write(rows, transcripts, args)


def mts_answers(engine: Any) -> dict[str, Any]:
    """The doctor → patient turn pairs of MTS-Dialog's validation conversations and what each answers now."""
    import csv

    from medrank.config import dataset_dir

    pairs = []
    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-ValidationSet.csv"
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            turns = [(s.strip().lower(), t.strip()) for s, _, t in
                     (line.partition(":") for line in (row.get("dialogue") or "").splitlines())]
            pairs += [(q, a) for (s1, q), (s2, a) in zip(turns, turns[1:], strict=False)
                      if s1 == "doctor" and s2 in ("patient", "guest_family") and a]
    opening = [(q, a) for q, a in pairs if engine.answer_value(a) is not None]
    read = [{"question": q, "answer": a, "findings": [[engine.finding_description(n), engine.value_label(n, v)]
                                                      for n, v in engine.answered_findings(q, a)]} for q, a in opening]
    return {"pairs": len(pairs), "answers": len(opening), "read": [r for r in read if r["findings"]]}


def run(services: Any, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for language in ("en", "zh"):
        engine = services.differential.inquiry.engine(language)
        patients = load_corpus(language).valid[:args.n]
        for form in FORMS:
            if form == FORMS[2]:
                engine.answered_findings = lambda question, text: []  # as served before: an answer reads nothing
            t0 = time.perf_counter()
            runs = [inquiry(services, engine, p, form, args.steps) for p in patients]
            vars(engine).pop("answered_findings", None)
            answers = sum(r["answers"] for r in runs)
            rows[f"{language}: {form}"] = {
                "language": language, "form": form, "patients": len(runs), "yes_no_answers": answers,
                "answers_established_pct": round(100 * sum(r["established"] for r in runs) / max(answers, 1), 2),
                "asked_again_per_inquiry": round(sum(r["asked_again"] for r in runs) / len(runs), 3),
                "top1_pct": round(100 * sum(r["top1"] for r in runs) / len(runs), 2),
                "mean_p_true": round(sum(r["p_true"] for r in runs) / len(runs), 4),
                "seconds": round(time.perf_counter() - t0, 1)}
            print(rows[f"{language}: {form}"], flush=True)
    return rows


def write(rows: dict[str, dict[str, Any]], transcripts: dict[str, Any], args: argparse.Namespace) -> None:
    env = common.environment(args.threads, args.seed, str(data_root()))
    md = ["| engine | request | patients | yes / no answers | answers established % | questions asked again per "
          "inquiry | differential top-1 % | mean P(patient's condition) |", "|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['language']} | {r['form']} | {r['patients']} | {r['yes_no_answers']} | {r['answers_established_pct']} | "
           f"{r['asked_again_per_inquiry']} | {r['top1_pct']} | {r['mean_p_true']} |" for r in rows.values()]
    md += ["", f"First {args.n} patients of each inquiry engine's validation carve-out (en: DDXPlus, zh: DXY), "
               f"{args.steps} questions each, answers from the record worded by the simulator; in process, "
               f"{env.get('cpu', '')}, {args.threads} thread(s), seed {args.seed}."]
    md += ["", f"MTS-Dialog validation conversations: {transcripts['pairs']} doctor → patient turn pairs, "
               f"{transcripts['answers']} patient turns opening with an answer, {len(transcripts['read'])} of them "
               "answering a finding of the English engine now:", "", "| doctor | patient | findings answered |",
           "|---|---|---|"]
    md += [f"| {r['question']} | {r['answer'][:60]} | " + "; ".join(f"{d}: {v}" for d, v in r["findings"]) + " |"
           for r in transcripts["read"]]
    common.write("inquiry_dialogue_answers", {"environment": env, "steps": args.steps, "rows": rows,
                                              "mts_dialog": transcripts}, "\n".join(md) + "\n")


if __name__ == "__main__":
    main()
