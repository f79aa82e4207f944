"""The doctor questions a plain question bank holds (``/next-questions`` where no first stage serves a language):
real doctor questions from dialogue datasets.

* English: the doctor turns of MTS-Dialog (training + validation conversations of the main
  set; CC BY 4.0), split into sentences, keeping the questions;
* Chinese: the doctor questions of the DXY paediatric dialogues (template questions about
  one symptom each; no licence stated).

Distinct questions (case- and space-insensitive) in file order.
"""

from __future__ import annotations

import ast
import csv
import os
import re

from medrank.config import dataset_dir

PathLike = str | os.PathLike[str]

MTS_FILES = ("Main-Dataset/MTS-Dialog-TrainingSet.csv", "Main-Dataset/MTS-Dialog-ValidationSet.csv")
_SPEAKER = re.compile(r"^\s*(doctor|patient|guest_family|guest_clinician)\s*:\s*", re.I)
_SENTENCE = re.compile(r"(?<=[.?!])\s+")


def _add(out: dict[str, str], text: str) -> None:
    key = " ".join(text.lower().split())
    out.setdefault(key, text)


def mts_doctor_questions(root: PathLike | None = None, min_words: int = 3, max_chars: int = 200) -> list[str]:
    """Doctor questions of MTS-Dialog: sentences ending in ``?`` from ``Doctor:`` turns."""
    folder = dataset_dir("mts-dialog", root)
    out: dict[str, str] = {}
    csv.field_size_limit(10_000_000)
    for rel in MTS_FILES:
        path = folder / rel
        if not path.exists():
            raise FileNotFoundError(f"{path} not found (MTS-Dialog)")
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                for line in (row.get("dialogue") or "").splitlines():
                    m = _SPEAKER.match(line)
                    if m is None or m.group(1).lower() != "doctor":
                        continue
                    for sent in _SENTENCE.split(line[m.end():].strip()):
                        sent = sent.strip()
                        if sent.endswith("?") and len(sent.split()) >= min_words and len(sent) <= max_chars:
                            _add(out, sent)
    return list(out.values())


def dxy_doctor_questions(root: PathLike | None = None) -> list[str]:
    """Doctor questions of the DXY dialogues (odd turns after the self-report that end in a question mark)."""
    path = dataset_dir("dxy-dialog", root) / "dxy_dialog_data_dialog_v2.txt"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (DXY dialogues)")
    text = path.read_text(encoding="utf-8")
    _, _, payload = text.partition("@")
    records = ast.literal_eval(payload)  # a Python literal, not JSON (see the dataset README); literal_eval runs no code
    out: dict[str, str] = {}
    for rec in records:
        turns = rec.get("dialog", [])
        for i in range(1, len(turns), 2):
            t = str(turns[i]).strip()
            if t.endswith(("?", "？")):
                _add(out, t)
    return list(out.values())
