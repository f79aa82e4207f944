"""Knowledge bases and patient records for symptom inquiry.

* **DDXPlus (English)**: ``release_evidences.json`` (223 evidences: binary ``B``, categorical ``C``
  including the 0-10 scales, multi-choice ``M``; ``code_question`` groups) and
  ``release_conditions.json`` (49 conditions with their symptom / antecedent evidences, the
  support of each condition). Patients come from CSV files like
  ``release_test_patients_mini_version.txt``.
* **DXY (Chinese)**: the 41 normalised symptoms and 5 diseases of the vocabulary files; records
  from the dialogue file (one ``<split>@<Python literal>`` line per split) and its goal file.

Patients are carved into train / validation with a fixed seed (:func:`carve`), whole records only.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: a condition belongs to a DDXPlus reference differential when its probability there is above this
#: (the DDXPlus paper's evaluation threshold, applied to the ground truth and to the prediction alike)
DIFFERENTIAL_MIN_PROBABILITY = 0.01
#: validation carve-out of the visible records (fraction, seed)
VALID_FRACTION = 0.2
SEED = 13


class InquiryInputError(ValueError):
    """Input the inquiry engine cannot use: unknown finding, contradictory findings, bad dialogue or file."""


@dataclass(frozen=True)
class Evidence:
    """One DDXPlus evidence (a question to the patient)."""

    name: str
    question: str
    kind: str  # "B" binary, "C" categorical (one value), "M" multi-choice (a set of values)
    group: str  # the group's main evidence (itself for a main evidence)
    default: str  # value code that means "no / nothing" for C and M evidences ("" for binary)
    values: tuple[str, ...]  # value codes of C and M evidences, default included
    meanings: dict[str, str] = field(default_factory=dict)  # value code -> English text
    antecedent: bool = False


@dataclass(frozen=True)
class Patient:
    """A simulated patient: what is known at the start and the full record the answers come from."""

    id: str
    condition: str
    initial: tuple[str, ...]  # findings stated up front (DDXPlus: the initial evidence; DXY: explicit symptoms)
    record: dict[str, Any]  # finding name -> True / False (binary) or a tuple of value codes (C / M)
    differential: tuple[str, ...] = ()  # DDXPlus: conditions of the reference differential (probability > 0.01)
    age: int | None = None
    sex: str | None = None
    text: str = ""  # DXY: the self-report


def carve(n: int, fraction: float = VALID_FRACTION, seed: int = SEED) -> tuple[list[int], list[int]]:
    """Indices of (train, valid): a seeded permutation, the first ``fraction`` of it is validation."""
    order = np.random.default_rng(seed).permutation(n)
    n_valid = int(round(n * fraction))
    valid = sorted(order[:n_valid].tolist())
    chosen = set(valid)
    return [i for i in range(n) if i not in chosen], valid


# ------------------------------------------------------------------------------------------ DDXPlus


#: how the default of a question of values reads where the collection labels it "NA"
NO_VALUE = "none of these"


def _value_code(v: Any) -> str:
    return str(v)


def load_ddxplus_kb(folder: Path) -> tuple[dict[str, Evidence], dict[str, set[str]], dict[str, str]]:
    """``(evidences, support, condition_labels)`` from the two KB JSON files of ``folder``."""
    folder = Path(folder)
    paths = [folder / "release_evidences.json", folder / "release_conditions.json"]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found (DDXPlus knowledge base)")
    raw_ev = json.loads(paths[0].read_text(encoding="utf-8"))
    raw_cond = json.loads(paths[1].read_text(encoding="utf-8"))
    evidences: dict[str, Evidence] = {}
    for name, ev in raw_ev.items():
        kind = ev.get("data_type", "B")
        if kind not in ("B", "C", "M"):
            raise ValueError(f"{paths[0]}: evidence {name} has unknown data_type {kind!r}")
        values = tuple(_value_code(v) for v in ev.get("possible-values", [])) if kind != "B" else ()
        default = _value_code(ev.get("default_value", "")) if kind != "B" else ""
        if kind != "B" and default not in values:
            values = (default, *values)
        meanings = {str(k): str(m.get("en", k)) for k, m in (ev.get("value_meaning") or {}).items()}
        # the default of a question of values is its "no answer"; DDXPlus labels two of them "NA" (the pain's
        # character, the rash's colour), which a person reads as a value: it is "none of these"
        if kind != "B" and meanings.get(default, "").strip().upper() in ("NA", "N/A"):
            meanings[default] = NO_VALUE
        evidences[name] = Evidence(name=name, question=str(ev.get("question_en", name)), kind=kind,
                                   group=str(ev.get("code_question", name)), default=default, values=values,
                                   meanings=meanings, antecedent=bool(ev.get("is_antecedent", False)))
    support: dict[str, set[str]] = {}
    labels: dict[str, str] = {}
    for name, cond in raw_cond.items():
        support[name] = set(cond.get("symptoms", {})) | set(cond.get("antecedents", {}))
        labels[name] = str(cond.get("cond-name-eng", name))
        unknown = support[name] - set(evidences)
        if unknown:
            raise ValueError(f"{paths[1]}: condition {name} names unknown evidences {sorted(unknown)[:5]}")
    return evidences, support, labels


def _literal(text: str, what: str, where: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InquiryInputError(f"{where}: {what} is not a Python literal") from None


def read_ddxplus_patients(path: Path, evidences: dict[str, Evidence], conditions: Sequence[str]) -> list[Patient]:
    """Patients of a CSV with columns ``age,top5_diagnoses,sex,diagnosis,features,feature_id``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DDXPlus patient file {path} not found")
    known = set(conditions)
    out: list[Patient] = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"age", "sex", "diagnosis", "features", "feature_id", "top5_diagnoses"}
        missing = need - set(reader.fieldnames or [])
        if missing:
            raise InquiryInputError(f"{path}: missing columns {sorted(missing)} (expected {sorted(need)})")
        for n, row in enumerate(reader):
            where = f"{path}: line {reader.line_num}"
            feats = _literal(row["features"], "features", where)
            diff = _literal(row["top5_diagnoses"], "top5_diagnoses", where)
            if not isinstance(feats, list) or not isinstance(diff, list):
                raise InquiryInputError(f"{where}: features and top5_diagnoses must be lists")
            record: dict[str, Any] = {}
            for item in feats:
                name, _, value = str(item).partition("_@_")
                ev = evidences.get(name)
                if ev is None:
                    raise InquiryInputError(f"{where}: unknown evidence {name!r}")
                if ev.kind == "B":
                    record[name] = True
                else:
                    record[name] = (*record.get(name, ()), value)
            condition = row["diagnosis"]
            if condition not in known:
                raise InquiryInputError(f"{where}: unknown condition {condition!r}")
            initial = row["feature_id"].partition("_@_")[0]
            if initial not in record:
                raise InquiryInputError(f"{where}: feature_id {initial!r} is not among the features")
            try:
                age = int(float(row["age"]))
            except ValueError:
                raise InquiryInputError(f"{where}: age {row['age']!r} is not a number") from None
            sex = row["sex"].strip().upper()
            if sex not in ("M", "F"):
                raise InquiryInputError(f"{where}: sex must be M or F, got {row['sex']!r}")
            ref = reference_differential(diff, known, where)
            out.append(Patient(id=f"{path.stem}:{n}", condition=condition, initial=(initial,), record=record,
                               differential=ref, age=age, sex=sex))
    if not out:
        raise InquiryInputError(f"{path}: no patients")
    return out


def reference_differential(pairs: list[Any], known: set[str], where: str = "differential") -> tuple[str, ...]:
    """The conditions of a DDXPlus ``[[condition, probability], ...]`` list whose probability is above
    :data:`DIFFERENTIAL_MIN_PROBABILITY` (a pair without a probability is kept), unknown conditions dropped."""
    out = []
    for d in pairs:
        if not isinstance(d, (list, tuple)) or not d:
            continue
        if len(d) > 1:
            try:
                probability = float(d[1])
            except (TypeError, ValueError):
                raise InquiryInputError(f"{where}: differential probability {d[1]!r} is not a number") from None
            if probability <= DIFFERENTIAL_MIN_PROBABILITY:
                continue
        if str(d[0]) in known:
            out.append(str(d[0]))
    return tuple(out)


# ------------------------------------------------------------------------------------------ DXY


def read_vocabulary(path: Path) -> list[str]:
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} not found")
    return [w.strip() for w in Path(path).read_text(encoding="utf-8").splitlines() if w.strip()]


def _dialogue_file(folder: Path) -> Path:
    files = sorted(p for p in Path(folder).glob("*dialog*.txt") if "goal" not in p.name)
    if not files:
        raise FileNotFoundError(f"{folder}: no dialogue file (*dialog*.txt)")
    return files[0]


def _goal_file(folder: Path) -> Path:
    files = sorted(Path(folder).glob("*_goal_dict_dxy.txt"))
    if not files:
        raise FileNotFoundError(f"{folder}: no goal file (*_goal_dict_dxy.txt)")
    return files[0]


def read_dxy_records(folder: Path) -> list[dict[str, Any]]:
    """Dialogue records of every ``<split>@...`` line of the folder's dialogue file, in order."""
    path = _dialogue_file(folder)
    records: list[dict[str, Any]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        head, sep, payload = line.partition("@")
        if not sep or not head.strip() or " " in head.strip():
            raise InquiryInputError(f"{path}: line {n} does not start with '<split>@'")
        items = _literal(payload, "the dialogue list", f"{path}: line {n}")
        if not isinstance(items, list):
            raise InquiryInputError(f"{path}: line {n}: the payload is not a list")
        records.extend(items)
    return records


def read_dxy_patients(folder: Path, symptoms: Sequence[str], diseases: Sequence[str]) -> list[Patient]:
    """DXY patients: explicit symptoms up front, implicit ones answered; the goal file gives the goals."""
    folder = Path(folder)
    records = read_dxy_records(folder)
    goals = json.loads(_goal_file(folder).read_text(encoding="utf-8"))
    if not isinstance(goals, list) or len(goals) != len(records):
        raise InquiryInputError(f"{folder}: the goal file has {len(goals) if isinstance(goals, list) else '?'} goals "
                                f"for {len(records)} dialogues")
    known_s, known_d = set(symptoms), set(diseases)
    out = []
    for n, (rec, goal) in enumerate(zip(records, goals, strict=True)):
        try:
            explicit = dict(goal["explicit_inform_slots"])
            implicit = dict(goal["implicit_inform_slots"])
            disease = str(goal["disease_tag"])
        except (KeyError, TypeError):
            raise InquiryInputError(f"{folder}: goal {n} lacks explicit/implicit slots or disease_tag") from None
        bad = (set(explicit) | set(implicit)) - known_s
        if bad:
            raise InquiryInputError(f"{folder}: goal {n} names unknown symptoms {sorted(bad)}")
        if disease not in known_d:
            raise InquiryInputError(f"{folder}: goal {n} has unknown disease {disease!r}")
        record = {s: bool(v) for s, v in implicit.items()}
        record.update({s: bool(v) for s, v in explicit.items()})
        text = str(rec.get("self_repo", "")).strip() if isinstance(rec, dict) else ""
        out.append(Patient(id=str(goal.get("consult_id", n)), condition=disease,
                           initial=tuple(s for s, v in explicit.items() if v), record=record, text=text))
    if not out:
        raise InquiryInputError(f"{folder}: no dialogues")
    return out


def dxy_question_template(folder: Path, symptoms: Sequence[str]) -> str:
    """How the DXY doctors ask about a symptom, as a template with ``{}`` for its name: of the dialogues' questions
    about one symptom ("请问孩子最近有咳嗽吗?"), with the symptom's name replaced by ``{}``, the most frequent one that
    asks whether the child *has* it (``有{}吗``: it reads for a thing, 肺部阴影, as for a doing, 揉鼻子, where "孩子现在{}吗"
    does not). The dialogues' 40 templates are about equally frequent; this one keeps one voice on a page."""
    counts: Counter[str] = Counter()
    by_length = sorted(symptoms, key=len, reverse=True)
    for rec in read_dxy_records(folder):
        turns = rec.get("dialog", []) if isinstance(rec, dict) else []
        for turn in turns[1:-1:2]:  # the doctor's questions: after the self-report, before the conclusion
            question = str(turn).strip()
            name = next((s for s in by_length if s in question), None)
            if name is not None and question.endswith(("?", "？")):
                counts[question.replace(name, "{}", 1)] += 1
    asks_has = [t for t in counts if re.search(r"有\{\}吗[?？]$", t)]
    if not asks_has:
        return "{}"
    return max(sorted(asks_has), key=lambda t: counts[t])


#: the words a Chinese text names a child by (the DXY doctors' own: 孩子, 小孩, 宝宝, 宝贝, and the parents')
ZH_CHILD = re.compile("孩子|小孩|宝宝|宝贝|儿子|女儿|孩儿|患儿|娃|男孩|女孩|男宝|女宝|小朋友|婴儿|新生儿|闺女|小儿")
#: words of someone else than the one writing: a child, a third person, "we" and "our family"
_ZH_ANOTHER = re.compile(f"{ZH_CHILD.pattern}|他|她|我们|我家|咱家")


def zh_speaks_of_self(texts: Sequence[str]) -> bool:
    """Whether a patient's Chinese turns speak of the one writing: a first person (我) and no word of a child or of
    anyone else ("我头疼得厉害"; not "我家宝宝发烧", "我给他吃了药"). DXY's consultations are about children, written
    by a parent, and its doctors ask about 孩子; an adult who writes of themself is asked about themself."""
    return any("我" in t for t in texts) and not any(_ZH_ANOTHER.search(t) for t in texts)


def to_the_writer(template: str) -> str | None:
    """A DXY question template addressed to the one writing (您) in place of the child it names ("请问孩子最近有{}吗?":
    "请问您最近有{}吗?"; "您的宝宝是否{}?": "您是否{}?"); None where it names no child."""
    m = re.search(f"(?:您的|您家|您)?(?:{ZH_CHILD.pattern})", template)
    return None if m is None else template[:m.start()] + "您" + template[m.end():]


def dxy_surface_pairs(folder: Path) -> list[tuple[list[str], list[str]]]:
    """(origin words of the self-report, explicit normalised symptoms) per dialogue, for surface forms."""
    pairs = []
    for rec in read_dxy_records(folder):
        goal = rec.get("goal", {}) if isinstance(rec, dict) else {}
        origin = [str(w) for w in goal.get("origin_inform_slots", []) if str(w).strip()]
        explicit = [str(s) for s, v in dict(goal.get("explicit_inform_slots", {})).items() if v]
        pairs.append((origin, explicit))
    return pairs
