"""Fit the crisis probes (thoughts of suicide or self-harm in a patient's words) and say how they read unseen text.

A probe (``medrank.pipelines.symptom.crisis``) is a logistic regression on the served query encoder's normalised
embeddings (MiniLM for English, e5-small for Chinese), read over each clause of a complaint and the whole of it. It
is fitted on texts written by people of this project, none by patients or clinicians:

- ``bench/data/urgent_complaints.jsonl``, ``_2``, ``_3`` (a developer's, then two helpers'), labelled crisis or not;
- the everyday complaint sets (``bench/data/everyday_complaints_*.jsonl``: no crisis);
- ``bench/data/crisis_statements.json``: statements of crisis a developer wrote from public guidance;
- patients' turns answering a doctor (no crisis; short, vague, about anything, "not sure really, it comes and
  goes", which a probe fitted without them took for a crisis): ``--turns`` of them (seed 0) from the training split
  of MTS-Dialog (English, ``Patient:`` lines) and from the DXY dialogues (Chinese, the replies after the
  self-report), leaving out any turn the urgent signs' crisis words raise. They shape the fit; the threshold is set on
  the complaints alone (the service reads complaints), and how many replies reach it is reported.

Its threshold is the lowest at which at most ``--false-alarms`` of the non-crisis texts' out-of-fold probabilities
(5-fold, seed 0) reach it. The probes are written to ``src/medrank/pipelines/symptom/crisis_probes/<lang>.json``;
``bench/data/urgent_complaints_4.jsonl`` (a fourth writer's, not fitted on) is read by the probe alone here, and as
``/symptoms`` serves it (words, terms and probe together) by ``bench/urgent_signs.py --data …_4.jsonl``.

    python bench/crisis_probe.py [--threads 1] [--c 4] [--false-alarms 0.01] [--turns 600] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import time
from pathlib import Path
from typing import Any

import common
import numpy as np

from medrank.config import set_threads

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
FITTED_ON = ("urgent_complaints.jsonl", "urgent_complaints_2.jsonl", "urgent_complaints_3.jsonl")
EVERYDAY = {"en": ("everyday_complaints_en.jsonl", "everyday_complaints_en_2.jsonl"),
            "zh": ("everyday_complaints_zh.jsonl", "everyday_complaints_zh_2.jsonl")}
UNSEEN = "urgent_complaints_4.jsonl"
ENCODERS = {"en": "minilm", "zh": "e5-small"}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def dialogue_turns(language: str, root: Path, n: int, seed: int = 0) -> list[str]:
    """``n`` patients' replies to a doctor from the visible dialogues of ``language`` (see the module docstring)."""
    from medrank.pipelines.symptom.inference import UrgentSigns

    if language == "en":
        path = root / "mts-dialog" / "Main-Dataset" / "MTS-Dialog-TrainingSet.csv"
        with path.open(encoding="utf-8", newline="") as f:
            turns = [line.split(":", 1)[1].strip() for row in csv.DictReader(f) for line in row["dialogue"].splitlines()
                     if line.startswith("Patient:")]
    else:
        import ast

        text = (root / "dxy-dialog" / "dxy_dialog_data_dialog_v2.txt").read_text(encoding="utf-8")
        records = ast.literal_eval(text.split("@", 1)[1].strip())  # a Python literal, not JSON; literal_eval runs no code
        turns = [t.strip() for r in records for t in r.get("dialog", [])[2::2] if isinstance(t, str)]
    crisis_words = [s for s in UrgentSigns.load().signs if s.kind == "crisis"]
    turns = sorted({t for t in turns if t and not any(p.search(t) for s in crisis_words for ps in s.words.values() for p in ps)})
    return random.Random(seed).sample(turns, min(n, len(turns)))


def training_texts(language: str, root: Path, turns: int) -> tuple[list[str], list[bool], list[bool], dict[str, int]]:
    """Texts, crisis labels, whether each is a complaint (the threshold's texts), and the count from each source."""
    texts, crisis, counts = [], [], {}
    for name in FITTED_ON:
        rows = [r for r in read_jsonl(DATA / name) if r["language"] == language]
        texts += [r["text"] for r in rows]
        crisis += [r["expect"] == "crisis" for r in rows]
        counts[name] = len(rows)
    for name in EVERYDAY[language]:
        rows = read_jsonl(DATA / name)
        texts += [r["text"] for r in rows]
        crisis += [False] * len(rows)
        counts[name] = len(rows)
    statements = json.loads((DATA / "crisis_statements.json").read_text(encoding="utf-8"))[language]
    texts += statements
    crisis += [True] * len(statements)
    counts["crisis_statements.json"] = len(statements)
    complaint = [True] * len(texts)
    replies = dialogue_turns(language, root, turns) if turns else []
    texts += replies
    crisis += [False] * len(replies)
    complaint += [False] * len(replies)
    counts["mts-dialog patient turns" if language == "en" else "dxy-dialog patient turns"] = len(replies)
    return texts, crisis, complaint, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--c", type=float, default=4.0, help="inverse L2 strength of the logistic regression")
    ap.add_argument("--false-alarms", type=float, default=0.01,
                    help="most share of out-of-fold non-crisis texts at or above the threshold")
    ap.add_argument("--turns", type=int, default=600, help="patients' replies to a doctor per language (no crisis)")
    ap.add_argument("--data", type=Path, default=None, help="dataset root (default $MEDRANK_DATA or ../shared/data)")
    args = ap.parse_args()
    set_threads(args.threads)
    from medrank.config import data_root
    from medrank.encoders import load_encoder
    from medrank.pipelines.symptom.crisis import PROBES, fit

    root = args.data or data_root()
    out: dict[str, Any] = {"languages": {}}
    for language, name in ENCODERS.items():
        encoder = load_encoder(name)

        def encode(texts: Any, encoder: Any = encoder) -> np.ndarray:
            return encoder.encode(list(texts), kind="query", show_progress=False)

        texts, crisis, complaint, counts = training_texts(language, root, args.turns)
        t0 = time.perf_counter()
        probe = fit(texts, crisis, encode, encoder=name, language=language, c=args.c,
                    false_alarms=args.false_alarms, calibrate_on=complaint)
        seconds = round(time.perf_counter() - t0, 1)
        probe.fitted["data"] = counts
        probe.save(PROBES / f"{language}.json")
        unseen = [r for r in read_jsonl(DATA / UNSEEN) if r["language"] == language]
        read = [probe.read(r["text"], encode) for r in unseen]
        wanted = [span is not None for (_, span), r in zip(read, unseen, strict=True) if r["expect"] == "crisis"]
        calm = [span is not None for (_, span), r in zip(read, unseen, strict=True) if r["expect"] != "crisis"]
        out["languages"][language] = {
            "encoder": name, "threshold": round(probe.threshold, 4), "fitted": probe.fitted, "seconds": seconds,
            "unseen": {"crisis": len(wanted), "raised": sum(wanted), "other": len(calm), "false_alarms": sum(calm)}}
    out["environment"] = common.environment(threads=args.threads, seed=0, data="bench/data")
    common.write("crisis_probe", out, markdown(out))


def markdown(out: dict[str, Any]) -> str:
    lines = ["# Crisis probes (`bench/crisis_probe.py`)", "",
             "A logistic regression on the query encoder's embeddings, read over each clause of a complaint; fitted on "
             "texts written by people of this project (the first three written urgent sets, the everyday sets, "
             "statements written from public guidance) and patients' replies to doctors in the visible dialogues "
             "(MTS-Dialog, DXY), threshold at the out-of-fold false-alarm share asked for among the complaints (the "
             "replies shape the fit only; how many reach the threshold is shown). "
             f"The fourth written set (`{UNSEEN}`, not fitted on) read by the probe alone.", "",
             "| language | encoder | texts (crisis) | threshold | out-of-fold crisis raised | out-of-fold false alarms "
             "(complaints) | out-of-fold replies reaching it | unseen crisis raised | unseen false alarms (any other "
             "complaint) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for lang, e in out["languages"].items():
        f, u = e["fitted"], e["unseen"]
        lines.append(f"| {lang} | {e['encoder']} | {f['texts']} ({f['crisis']}) | {e['threshold']} | "
                     f"{f['out_of_fold']['crisis_raised']} of {f['crisis']} | {f['out_of_fold']['false_alarms']} of "
                     f"{f['out_of_fold']['calibrated_on']} | {f['out_of_fold']['others_reaching_it']} of "
                     f"{f['out_of_fold']['others']} | {u['raised']} of {u['crisis']} | {u['false_alarms']} of {u['other']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
