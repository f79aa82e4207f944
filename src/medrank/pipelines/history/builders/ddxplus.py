"""DDXPlus builder: simulated history taking over structured synthetic patients, with a real
knowledge-base first stage.

* **Question bank**: the DDXPlus evidences (``release_evidences.json``), id = evidence name, text =
  ``question_en``. A follow-up evidence (``code_question`` names another evidence) is only a
  candidate once its main evidence has been revealed present.
* **Dialogue**: a patient's evidences are revealed one per doctor/patient exchange, starting with
  the initial evidence, then in a seeded random order (follow-ups after their main evidence). The
  patient answers "yes" to binary evidences and the English value meaning (or the number) to
  categorical / multi-choice ones. Samples are taken after ``steps`` revealed evidences (default
  1, 3 and 6).
* **First stage (the knowledge base)**: the conditions consistent with what was revealed
  (``release_conditions.json``: every revealed evidence is among the condition's symptoms or
  antecedents; if none is, those with the largest overlap); a candidate question scores the number
  of consistent conditions listing it (+ its overall frequency across conditions / 1000 to break
  ties). Already revealed evidences are excluded; the top ``k`` (30) are the candidates.
* **Positives**: the candidates the patient actually has.

Patients are split (whole patients, seeded) into ``train`` / ``valid``; any patient file in the
same format builds an independent split (``splits={"test": [file]}``, ``valid_fraction=0``).
"""

from __future__ import annotations

import ast
import csv
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.pipelines.history.data import Sample, Turn, write_jsonl

STEPS = (1, 3, 6)


def _base(feature: str) -> tuple[str, str | None]:
    name, _, value = feature.partition("_@_")
    return name, (value or None)


def load_kb(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = Path(folder)
    for f in ("release_evidences.json", "release_conditions.json"):
        if not (folder / f).exists():
            raise FileNotFoundError(f"{folder / f} not found (DDXPlus knowledge base)")
    evidences = json.loads((folder / "release_evidences.json").read_text(encoding="utf-8"))
    conditions = json.loads((folder / "release_conditions.json").read_text(encoding="utf-8"))
    return evidences, conditions


def read_patients(path: Path) -> list[dict[str, Any]]:
    """Rows of ``age,top5_diagnoses,sex,diagnosis,features,feature_id`` (features as a Python list literal)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"DDXPlus patient file {path} not found")
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"features", "feature_id"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for n, row in enumerate(reader):
            try:
                feats = ast.literal_eval(row["features"])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ValueError(f"{path}: line {reader.line_num}: features is not a Python list literal of evidence names "
                                 "(such as ['E_91', 'E_53_@_V_44'])") from None
            if not isinstance(feats, list):
                raise ValueError(f"{path}: line {reader.line_num}: features is not a list")
            out.append({"id": f"{path.stem}:{n}", "features": [str(f) for f in feats], "initial": row["feature_id"]})
    return out


def _answer(evidence: dict[str, Any], values: list[str | None]) -> str:
    if evidence["data_type"] == "B":
        return "yes"
    words = []
    for v in values:
        meaning = evidence.get("value_meaning", {}).get(v or "", {})
        words.append(meaning.get("en") or str(v))
    return ", ".join(words)


class DDXPlusKnowledgeBase:
    def __init__(self, evidences: dict[str, Any], conditions: dict[str, Any]) -> None:
        self.evidences = evidences
        self.condition_sets = {c: set(v.get("symptoms", {})) | set(v.get("antecedents", {})) for c, v in conditions.items()}
        freq = Counter(e for s in self.condition_sets.values() for e in s)
        self.ids = sorted(evidences, key=lambda e: (int(e.split("_")[1]) if e.split("_")[1].isdigit() else 0, e))
        self.prior = {e: freq.get(e, 0) / 1000.0 for e in self.ids}
        self.leader = {e: evidences[e].get("code_question", e) for e in self.ids}

    def candidates(self, revealed: Sequence[str], k: int) -> tuple[list[str], list[float]]:
        rev = set(revealed)
        consistent = [s for s in self.condition_sets.values() if rev <= s]
        if not consistent:
            best = max(len(rev & s) for s in self.condition_sets.values())
            consistent = [s for s in self.condition_sets.values() if len(rev & s) == best]
        scores = {}
        for e in self.ids:
            if e in rev or (self.leader[e] != e and self.leader[e] not in rev):
                continue
            scores[e] = sum(e in s for s in consistent) + self.prior[e]
        ranked = sorted(scores, key=lambda e: (-scores[e], self.ids.index(e)))[:k]
        return ranked, [round(scores[e], 4) for e in ranked]


def patient_samples(patient: dict[str, Any], kb: DDXPlusKnowledgeBase, rng: np.random.Generator, k: int,
                    steps: Sequence[int] = STEPS) -> list[Sample]:
    values: dict[str, list[str | None]] = {}
    for f in patient["features"]:
        name, value = _base(f)
        if name in kb.evidences:
            values.setdefault(name, []).append(value)
    first = _base(patient["initial"])[0]
    rest = [e for e in values if e != first]
    rest = [rest[i] for i in rng.permutation(len(rest))]
    order = [first] if first in values else []
    pending = list(rest)
    while pending:  # follow-ups only after their main evidence
        for e in list(pending):
            if kb.leader[e] == e or kb.leader[e] in order or kb.leader[e] not in values:
                order.append(e)
                pending.remove(e)
                break
        else:
            order.extend(pending)
            break
    out = []
    for t in steps:
        if t >= len(order):
            break
        revealed = order[:t]
        turns = []
        for e in revealed:
            turns.append(Turn("doctor", kb.evidences[e]["question_en"]))
            turns.append(Turn("patient", _answer(kb.evidences[e], values[e])))
        cands, scores = kb.candidates(revealed, k)
        positives = [e for e in cands if e in values and e not in revealed]
        if positives:
            out.append(Sample(f"{patient['id']}:s{t}", patient["id"], "ddxplus", turns,
                              [kb.evidences[e]["question_en"] for e in values if e not in revealed], positives,
                              cands, scores))
    return out


def default_patient_file(root: str | Path | None = None) -> Path:
    from medrank.config import dataset_dir

    return dataset_dir("ddxplus", root) / "release_test_patients_mini_version.txt"


def build_ddxplus(
    out_dir: Path, splits: Mapping[str, Sequence[Path]] | None = None, *, kb_dir: Path | None = None,
    valid_fraction: float = 0.2, seed: int = 13, k: int = 30, data_root: str | None = None,
) -> dict[str, Any]:
    """Build ``bank.jsonl`` + ``<split>.jsonl`` + ``meta.json`` from DDXPlus patient files, all at once
    (the folder is written aside and swapped in when complete; a failed build leaves the old one)."""
    from medrank.utils.io import atomic_dir, atomic_write_json

    with atomic_dir(out_dir) as out_dir:  # every file below lands in the temporary folder, swapped in at the end
        t0 = time.perf_counter()
        if splits is None:
            splits = {"train": [default_patient_file(data_root)]}
        else:
            valid_fraction = 0.0 if "train" not in splits else valid_fraction
        first_file = Path(next(iter(splits.values()))[0])
        evidences, conditions = load_kb(kb_dir or first_file.parent)
        kb = DDXPlusKnowledgeBase(evidences, conditions)
        patients = {n: [p for f in fs for p in read_patients(Path(f))] for n, fs in splits.items()}
        if valid_fraction and "train" in patients:
            order = np.random.default_rng(seed).permutation(len(patients["train"]))
            n_valid = int(round(len(order) * valid_fraction))
            carved = set(order[:n_valid].tolist())
            patients["valid"] = patients.get("valid", []) + [p for i, p in enumerate(patients["train"]) if i in carved]
            patients["train"] = [p for i, p in enumerate(patients["train"]) if i not in carved]
        write_jsonl(out_dir / "bank.jsonl", [{"id": e, "text": evidences[e]["question_en"], "count": 1, "members": []}
                                             for e in kb.ids])
        meta: dict[str, Any] = {"source": "ddxplus", "files": {n: [str(f) for f in fs] for n, fs in splits.items()},
                                "carved_from_train": {"fraction": valid_fraction, "seed": seed},
                                "bank": {"size": len(kb.ids), "threshold": None, "encoder": None,
                                         "built_from": "release_evidences.json"},
                                "first_stage": {"k": k, "kind": "knowledge base (release_conditions.json)",
                                                "steps": list(STEPS)},
                                "splits": {}}
        for name, pats in patients.items():
            rng = np.random.default_rng(seed + 1)
            samples = [s for p in pats for s in patient_samples(p, kb, rng, k)]
            write_jsonl(out_dir / f"{name}.jsonl", [s.to_json() for s in samples])
            meta["splits"][name] = {
                "patients": len(pats), "kept_samples": len(samples),
                "mean_candidates": round(float(np.mean([len(s.candidates) for s in samples])), 2) if samples else None,
                "mean_positives_in_candidates": round(float(np.mean([len(s.positives) for s in samples])), 3)
                if samples else None,
            }
        meta["seconds"] = round(time.perf_counter() - t0, 1)
        atomic_write_json(out_dir / "meta.json", meta)
        return meta
