"""Urgent notices: does ``/symptoms`` raise the crisis / emergency notice a complaint calls for, and only then?

``bench/data/urgent_complaints.jsonl`` holds 83 short complaints written by a developer of this project (not by
patients or clinicians): 40 English and 20 Chinese that call for a notice (``expect``: ``crisis`` for thoughts of
suicide or self-harm, ``emergency`` for chest pain, stroke signs, difficulty breathing or blue lips, collapse, a
fit, bleeding, a swelling throat), 15 English and 8 Chinese everyday complaints that call for none. They were
written after the urgent signs and while a handful of such complaints were being tried against the service, so
they are a check of what a user meets, not unseen data; nothing is fitted on them.

Each complaint is read as ``/symptoms`` reads it on a fresh checkout (``kb: auto``, no trained run), by the
service's own code (``medrank.service.build``), and the notices of its response are compared with ``expect``:
recall per kind (the expected notice raised), false alarms (a notice on a complaint that calls for none, or of the
other kind). The everyday complaint sets of ``bench/everyday_complaints.py`` (240 complaints, English and Chinese,
none written about emergencies) are read the same way, and every notice they raise is listed: some name a sign
(a chest pain, a faint), so a notice there is not by itself wrong.

``bench/data/urgent_complaints_2.jsonl`` (``--data``, results in ``urgent_signs_2``) holds 90 more, written by a
second writer (a helper session) who saw neither the signs file, nor the detectors, nor their output. It was unseen
text at its first reading (2026-12-02 06:14 UTC); its misses were then read and the signs' words widened from them,
so it is seen since. ``bench/data/urgent_complaints_3.jsonl`` (115, results in ``urgent_signs_3``) was written the
same way by a third writer and read before and after that widening (the widening's check on text it was not
fitted on); its misses were read then, and ``urgent_complaints_4.jsonl`` (114, by a fourth writer) plays its part
for the widening from them.

    python bench/urgent_signs.py [--state DIR] [--threads 1]
    python bench/urgent_signs.py --data bench/data/urgent_complaints_2.jsonl   # and ..._3.jsonl
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import common

from medrank.config import set_threads

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "urgent_complaints.jsonl"
EVERYDAY = ("everyday_complaints_en.jsonl", "everyday_complaints_en_2.jsonl", "everyday_complaints_zh.jsonl",
            "everyday_complaints_zh_2.jsonl")


#: who wrote each set, and what the signs were fitted on
WRITTEN_BY = {
    "urgent_complaints.jsonl": "written by a developer of this project while the signs were tried, not unseen data; "
                               "and the everyday complaint sets",
    "urgent_complaints_2.jsonl": "written by a second writer who saw neither the signs nor any output; unseen at its "
                                 "first reading, the signs' words were widened from its misses since: seen",
    "urgent_complaints_3.jsonl": "written by a third writer who saw neither the signs nor any output, read once "
                                 "before the words were widened from the second set's misses and once after; the "
                                 "words were then widened from its misses too: seen",
    "urgent_complaints_4.jsonl": "written by a fourth writer who saw neither the signs nor any output, read before "
                                 "and after the words were widened from the third set's misses: unseen (a dozen of "
                                 "its complaints that call for no crisis notice were printed by a trial of sentence "
                                 "similarity; nothing was fitted on them)",
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def kinds_raised(symptoms: Any, text: str) -> tuple[list[str], list[str], list[str]]:
    """The kinds of notice ``/symptoms`` raises for ``text``, the signs they name, and the terms it decided."""
    out = symptoms.detect(text, "auto", "auto", k=5)
    notices = out.get("urgent") or []
    return ([n["kind"] for n in notices], [s for n in notices for s in n["signs"]],
            [t["name"] for t in out.get("terms") or []])


def score(rows: list[dict[str, Any]], read: list[tuple[list[str], list[str], list[str]]]) -> dict[str, Any]:
    by_lang: dict[str, Any] = {}
    for lang in sorted({r["language"] for r in rows}):
        pairs = [(r, got) for r, got in zip(rows, read, strict=True) if r["language"] == lang]
        entry: dict[str, Any] = {}
        for kind in ("crisis", "emergency"):
            wanted = [got for r, got in pairs if r["expect"] == kind]
            hit = sum(kind in got[0] for got in wanted)
            entry[kind] = {"complaints": len(wanted), "raised": hit,
                           "recall": round(100 * hit / len(wanted), 2) if wanted else None}
        calm = [got for r, got in pairs if r["expect"] is None]
        entry["none"] = {"complaints": len(calm), "false_alarms": sum(bool(got[0]) for got in calm)}
        entry["wrong_kind"] = sum(bool(got[0]) and r["expect"] not in got[0] for r, got in pairs if r["expect"])
        entry["misses"] = [{"text": r["text"], "expect": r["expect"], "raised": got[0], "terms": got[2]}
                           for r, got in pairs if r["expect"] and r["expect"] not in got[0]]
        entry["false_alarm_examples"] = [{"text": r["text"], "raised": got[0], "terms": got[2]}
                                         for r, got in pairs if r["expect"] is None and got[0]]
        by_lang[lang] = entry
    return by_lang


def markdown(out: dict[str, Any]) -> str:
    env = out["environment"]
    lines = ["# Urgent notices on written complaints (`bench/urgent_signs.py`)", "",
             f"{env.get('threads')} thread(s); data: `bench/data/{out['data']}` ({out['complaints']} complaints; "
             + WRITTEN_BY.get(out["data"], "written by someone else")
             + "); read as `/symptoms` reads them on a fresh checkout (kb auto, no trained run). The shipped "
             "urgent-signs file is not reviewed by a clinician.", "",
             "| language | crisis raised | emergency raised | notice on a complaint that calls for none | wrong kind |",
             "|---|---|---|---|---|"]
    for lang, e in out["written"].items():
        c, m, n = e["crisis"], e["emergency"], e["none"]
        lines.append(f"| {lang} | {c['raised']} of {c['complaints']} ({c['recall']} %) | {m['raised']} of "
                     f"{m['complaints']} ({m['recall']} %) | {n['false_alarms']} of {n['complaints']} | {e['wrong_kind']} |")
    lines += ["", "Missed (expected notice not raised; the terms decided):", ""]
    for lang, e in out["written"].items():
        lines += [f"- ({lang}) “{x['text']}” — expected {x['expect']}, raised {x['raised'] or 'none'}; terms: "
                  f"{', '.join(x['terms']) or 'none'}" for x in e["misses"]]
    lines += ["", "False alarms among the written complaints:", ""]
    for lang, e in out["written"].items():
        lines += [f"- ({lang}) “{x['text']}” — raised {x['raised']}; terms: {', '.join(x['terms'])}"
                  for x in e["false_alarm_examples"]]
    if not out["everyday"]:
        return "\n".join([*lines, "", f"Seconds for all complaints: {out['seconds']}."]) + "\n"
    lines += ["", "Everyday complaint sets (none written about emergencies): every notice raised", "",
              "| set | complaints | with a notice |", "|---|---|---|"]
    for name, e in out["everyday"].items():
        lines.append(f"| {name} | {e['complaints']} | {len(e['raised'])} |")
    lines.append("")
    for name, e in out["everyday"].items():
        lines += [f"- ({name}) “{x['text']}” — {', '.join(x['signs'])}" for x in e["raised"]]
    lines += ["", f"Seconds for all complaints (one at a time, as /symptoms reads them): {out['seconds']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state", type=Path, default=None,
                    help="where the service's knowledge bases are built (default: the service's own, $MEDRANK_CACHE/service)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", type=Path, default=DATA, help="the written complaints (JSON lines: text, language, expect)")
    args = ap.parse_args()
    set_threads(args.threads)
    from medrank.service.build import build_services
    from medrank.service.settings import ServiceSettings

    with tempfile.TemporaryDirectory() as empty:
        # a fresh checkout: no trained run (an empty models folder); HPO for English, CHIP-CDN + dxy for Chinese
        settings = ServiceSettings(api_token=None, batch_queries=False, backend="auto", models_dir=Path(empty),
                                   kbs=("hpo", "chip-cdn", "dxy"))
        if args.state is not None:
            settings.state_dir = args.state
        symptoms = build_services(settings, ("symptoms",), show_progress=False).symptoms
    rows = read_jsonl(args.data)
    t0 = time.perf_counter()
    read = [kinds_raised(symptoms, r["text"]) for r in rows]
    everyday = {}
    for name in EVERYDAY if args.data == DATA else ():  # the everyday sets once, with the first written set
        texts = [r["text"] for r in read_jsonl(HERE / "data" / name)]
        got = [kinds_raised(symptoms, t) for t in texts]
        everyday[name.removesuffix(".jsonl")] = {
            "complaints": len(texts),
            "raised": [{"text": t, "kinds": g[0], "signs": g[1]} for t, g in zip(texts, got, strict=True) if g[0]]}
    seconds = round(time.perf_counter() - t0, 1)
    out = {"complaints": len(rows), "data": args.data.name, "written": score(rows, read), "everyday": everyday,
           "seconds": seconds, "environment": common.environment(threads=args.threads, seed=None, data=args.data.name)}
    # urgent_complaints.jsonl -> urgent_signs, urgent_complaints_2.jsonl -> urgent_signs_2, and so on
    common.write("urgent_signs" + args.data.stem.removeprefix("urgent_complaints"), out, markdown(out))


if __name__ == "__main__":
    main()
