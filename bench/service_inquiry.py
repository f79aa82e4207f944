"""The service's /next-questions and /differential over the inquiry engines, through the app (in process).

Complaints: the first patient turn of each MTS-Dialog validation conversation (English) and the DXY self-reports
of the inquiry engine's validation carve-out (Chinese; seed 13, never used to fit the engine). Each complaint is
one inquiry of ``--answers`` steps: the page's requests after every answer (the first proposed question answered
"yes", then "no", alternately, as the page words them), so a step carries the dialogue so far and the answered findings. Reported per
language: which engine served the first request (the inquiry engine, or the question bank when no finding of its
knowledge base is found in the complaint), and the latency of each endpoint (p50 / p95 over every step; the
findings detected again in the patient's words on every request are part of it).

    python bench/service_inquiry.py [--threads 1] [--n 40] [--answers 4] [--state DIR] [--backend auto]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import common
from service_next_questions import first_patient_turns

from medrank.config import seed_everything, set_threads
from medrank.service.app import create_app
from medrank.service.build import build_services
from medrank.service.settings import ServiceSettings


def dxy_validation_reports(n: int) -> list[str]:
    from medrank.pipelines.history.inquiry.build import load_corpus

    return [p.text for p in load_corpus("zh").valid if p.text.strip()][:n]


def inquiry(client, complaint: str, answers: int, times: dict[str, list[float]]) -> str:
    dialogue = [{"speaker": "patient", "text": complaint}]
    findings: list[dict[str, str]] = []
    served = ""
    for step in range(answers + 1):
        t0 = time.perf_counter()
        r = client.post("/next-questions", json={"dialogue": dialogue, "findings": findings, "k": 5})
        took = time.perf_counter() - t0
        r.raise_for_status()
        body = r.json()
        times["next-questions" if body["engine"] != "question-bank" else "next-questions (question bank)"].append(took)
        served = served or body["engine"]
        if body["engine"] == "question-bank" or not body["results"]:
            break
        t0 = time.perf_counter()
        d = client.post("/differential", json={"dialogue": dialogue, "findings": findings, "language": body["language"], "k": 5})
        times["differential"].append(time.perf_counter() - t0)
        d.raise_for_status()
        q = body["results"][0]
        value = "present" if step % 2 == 0 else "absent"
        findings = [*findings, {"name": q["finding"], "value": value}]
        said = {"en": {"present": "yes", "absent": "no"}, "zh": {"present": "有", "absent": "没有"}}[body["language"]]
        dialogue = [*dialogue, {"speaker": "doctor", "text": q["text"]}, {"speaker": "patient", "text": said[value]}]
    return served


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n", type=int, default=40, help="complaints per language")
    ap.add_argument("--answers", type=int, default=4, help="answers per inquiry")
    ap.add_argument("--state", default=None, help="service state folder (default: a temporary one)")
    ap.add_argument("--backend", default="auto", help="how encoders run (default auto, as medrank serve)")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(0)
    from fastapi.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        settings = ServiceSettings(api_token=None, batch_queries=False, state_dir=args.state or tmp, backend=args.backend)
        t0 = time.perf_counter()
        services = build_services(settings, ("next-questions",), show_progress=False)
        built_s = time.perf_counter() - t0
        client = TestClient(create_app(settings, services))
        complaints = {"en": first_patient_turns(args.n), "zh": dxy_validation_reports(args.n)}
        for lang, texts in complaints.items():  # one warm-up request each (thread pool, first encoder call)
            client.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": texts[0]}], "language": lang})
        rows = {}
        for lang, texts in complaints.items():
            times: dict[str, list[float]] = {"next-questions": [], "next-questions (question bank)": [], "differential": []}
            served = [inquiry(client, text, args.answers, times) for text in texts]
            rows[lang] = {"complaints": len(texts), "served_by_engine": sum(s != "question-bank" for s in served),
                          "engine": next((s for s in served if s != "question-bank"), None),
                          **{f"{ep}": common.percentiles(ts) for ep, ts in times.items() if ts}}
    payload = {"environment": common.environment(args.threads, 0), "backend": args.backend, "answers_per_inquiry": args.answers,
               "services_built_or_loaded_s": round(built_s, 1), "languages": rows}
    lines = ["| language | complaints | served by the engine | /next-questions, engine: p50 / p95 ms (n) | "
             "/differential p50 / p95 ms (n) | /next-questions, question bank: p50 / p95 ms (n) |", "|---|---|---|---|---|---|"]

    def cell(r: dict, key: str) -> str:
        t = r.get(key)
        return f"{t['p50_ms']:.1f} / {t['p95_ms']:.1f} ({t['n']})" if t else "-"

    for lang, r in rows.items():
        lines.append(f"| {lang} ({r['engine']}) | {r['complaints']} | {r['served_by_engine']} | {cell(r, 'next-questions')} | "
                     f"{cell(r, 'differential')} | {cell(r, 'next-questions (question bank)')} |")
    lines.append("")
    lines.append(f"In process through the app (FastAPI TestClient), {args.threads} thread(s), backend {args.backend}; "
                 "each inquiry: the complaint, "
                 f"then up to {args.answers} answers (the first question answered yes / no alternately). English complaints: "
                 "MTS-Dialog validation first patient turns; Chinese: DXY self-reports of the inquiry validation carve-out. "
                 "A complaint in which no finding is found is served by the question bank (its first request is timed, "
                 "then the inquiry ends).")
    common.write("service_inquiry", payload, "\n".join(lines))


if __name__ == "__main__":
    main()
