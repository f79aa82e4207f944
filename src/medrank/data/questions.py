"""Question-pair datasets for similar medical question retrieval, as :class:`QuestionPair` records.

Datasets (``<data root>/<name>``, see each folder's README):

* ``chip-sts`` — ``CHIP-STS_train.json``: a JSON array of ``{id, text1, text2,
  label "0"|"1", category}`` (Chinese, 16,000 pairs).
* ``kuake-qqr`` — ``KUAKE-QQR_train.json``: a JSON array of ``{id, query1,
  query2, label "0"|"1"|"2"}`` (Chinese, 15,000 pairs). ``2`` = same meaning,
  ``1`` = query2 narrower than query1, ``0`` = broader or unrelated.
* ``medical-question-pairs`` — ``mqp.csv``: no header, columns ``dr_id,
  question_1, question_2, label`` (English, 2,488 pairs).
* ``rqe`` — ``RQE_Train_8588_AMIA2016.xml``: ``<pair pid type value="true|false">
  <chq/> <faq/></pair>`` (English, 8,588 pairs).

Conventions
-----------
* ``QuestionPair.label`` is binary: 1 = the two questions ask the same thing.
  For KUAKE-QQR only label ``2`` (equivalent) is positive; the original 0/1/2
  is kept in ``grade``, which graded metrics (NDCG) use. For the other
  datasets ``grade == label``.
* Texts are stripped and internal whitespace runs collapsed to one space (the
  RQE XML wraps every question in newlines and indentation); nothing else is
  changed. The one RQE pair whose ``<faq>`` is empty (pid 5860) is skipped
  with a warning; every other malformed record raises :class:`DataFormatError`
  with the file and the record.
* Pair ids are ``f"{dataset}:{source id}"`` (``chip-sts:17``, ``rqe:3``); MQP has
  no id column, so its ids are ``mqp:<line number>``.
* Every loader accepts either a data root (``None`` = ``$MEDRANK_DATA`` or
  ``../shared/data``) or the path of a file in the dataset's visible format,
  so ``medrank evaluate --test FILE`` reads an independent split unchanged.
  A generic JSON-lines format (``{"text1", "text2", "label"}`` per line, as
  written by ``medrank make-pairs``) loads with :func:`load_pairs_jsonl`.

:func:`split_pairs` carves a validation split with a fixed seed such that no
question text sits on both sides: pairs are grouped into the connected
components of the graph whose nodes are question texts and whose edges are
pairs, and whole components are assigned to one side.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from medrank.config import DataNotFoundError, dataset_dir
from medrank.data.errors import DataFormatError

PathLike = str | os.PathLike[str]
log = logging.getLogger(__name__)

_SPACE = re.compile(r"\s+")


def clean_question(text: str) -> str:
    """Strip a question and collapse internal whitespace runs to one space."""
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True, slots=True)
class QuestionPair:
    """Two questions and whether they ask the same thing.

    Attributes:
        id: unique pair id (``"chip-sts:17"``).
        text1, text2: the questions (``text1`` is the "query" side when pairs are
            grouped for ranking metrics).
        label: 1 same intent / similar, 0 otherwise.
        grade: graded relevance of ``text2`` for ``text1`` (KUAKE-QQR 0/1/2;
            otherwise equal to ``label``).
        meta: dataset-specific fields (``category``, ``dr_id``, ``type`` …).
    """

    id: str
    text1: str
    text2: str
    label: int
    grade: int = -1
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"QuestionPair.id must be a non-empty string, got {self.id!r}")
        for name in ("text1", "text2"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"QuestionPair {self.id!r}: {name} must be a non-empty string")
        if self.label not in (0, 1) or isinstance(self.label, bool):
            raise ValueError(f"QuestionPair {self.id!r}: label must be 0 or 1, got {self.label!r}")
        if self.grade == -1:
            object.__setattr__(self, "grade", int(self.label))
        if not isinstance(self.grade, int) or self.grade < 0:
            raise ValueError(f"QuestionPair {self.id!r}: grade must be a non-negative int, got {self.grade!r}")


@dataclass(frozen=True)
class PairDatasetInfo:
    """What the pipeline needs to know about a pair dataset."""

    name: str
    language: str  # "zh" or "en"
    filename: str
    loader: Callable[[Path, str], list[QuestionPair]]


# -- file readers ----------------------------------------------------------------------------------


def _read_json_array(path: Path) -> list[Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, f"invalid JSON ({exc.msg})") from exc
    if not isinstance(data, list):
        raise DataFormatError(path, None, f"expected a JSON array of objects, got {type(data).__name__}")
    return data


def _field(path: Path, i: int, rec: Any, key: str) -> str:
    if not isinstance(rec, dict):
        raise DataFormatError(path, None, f"record #{i + 1}: expected an object, got {type(rec).__name__}")
    if key not in rec:
        raise DataFormatError(path, None, f"record #{i + 1} (id={rec.get('id')!r}): field {key!r} missing")
    value = rec[key]
    if not isinstance(value, str):
        raise DataFormatError(path, None, f"record #{i + 1} (id={rec.get('id')!r}): field {key!r} is not a string")
    return value


def _texts(path: Path, where: str, a: str, b: str) -> tuple[str, str]:
    t1, t2 = clean_question(a), clean_question(b)
    if not t1 or not t2:
        raise DataFormatError(path, None, f"{where}: empty question text")
    return t1, t2


def _read_chip_sts(path: Path, prefix: str) -> list[QuestionPair]:
    out = []
    for i, rec in enumerate(_read_json_array(path)):
        rid = _field(path, i, rec, "id")
        t1, t2 = _texts(path, f"record #{i + 1} (id={rid!r})", _field(path, i, rec, "text1"), _field(path, i, rec, "text2"))
        label = _field(path, i, rec, "label")
        if label not in ("0", "1"):
            raise DataFormatError(path, None, f"record #{i + 1} (id={rid!r}): label must be '0' or '1', got {label!r}")
        meta = {"category": rec.get("category"), "source_id": rid}
        out.append(QuestionPair(f"{prefix}:{rid}", t1, t2, int(label), meta=meta))
    return out


def _read_kuake_qqr(path: Path, prefix: str) -> list[QuestionPair]:
    out = []
    for i, rec in enumerate(_read_json_array(path)):
        rid = _field(path, i, rec, "id")
        t1, t2 = _texts(path, f"record #{i + 1} (id={rid!r})", _field(path, i, rec, "query1"), _field(path, i, rec, "query2"))
        label = _field(path, i, rec, "label")
        if label not in ("0", "1", "2"):
            raise DataFormatError(path, None, f"record #{i + 1} (id={rid!r}): label must be '0', '1' or '2', got {label!r}")
        grade = int(label)
        out.append(QuestionPair(f"{prefix}:{rid}", t1, t2, int(grade == 2), grade=grade, meta={"source_id": rid}))
    return out


def _read_mqp(path: Path, prefix: str) -> list[QuestionPair]:
    out = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        start = 1
        for row in reader:
            line = start  # the physical line the record starts on (quoted fields may span lines)
            start = reader.line_num + 1
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 4:
                raise DataFormatError(path, line, f"expected 4 columns (dr_id, question_1, question_2, label), got {len(row)}")
            dr_id, q1, q2, label = row
            if label.strip() not in ("0", "1"):
                raise DataFormatError(path, line, f"label must be 0 or 1, got {label!r}")
            t1, t2 = clean_question(q1), clean_question(q2)
            if not t1 or not t2:
                raise DataFormatError(path, line, "empty question text")
            out.append(QuestionPair(f"{prefix}:{line}", t1, t2, int(label), meta={"dr_id": dr_id.strip()}))
    return out


def _read_rqe(path: Path, prefix: str) -> list[QuestionPair]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise DataFormatError(path, exc.position[0], f"invalid XML ({exc})") from exc
    out: list[QuestionPair] = []
    skipped: list[str] = []
    for i, pair in enumerate(root.iter("pair")):
        pid = pair.get("pid") or str(i + 1)
        value = (pair.get("value") or "").strip().lower()
        if value not in ("true", "false"):
            raise DataFormatError(path, None, f"pair pid={pid}: value must be 'true' or 'false', got {value!r}")
        chq, faq = pair.find("chq"), pair.find("faq")
        if chq is None or faq is None:
            raise DataFormatError(path, None, f"pair pid={pid}: <chq> or <faq> missing")
        t1, t2 = clean_question("".join(chq.itertext())), clean_question("".join(faq.itertext()))
        if not t1 or not t2:
            skipped.append(pid)  # pid 5860 of the AMIA 2016 file has an empty <faq>
            continue
        out.append(QuestionPair(f"{prefix}:{pid}", t1, t2, int(value == "true"), meta={"type": pair.get("type")}))
    if not out:
        raise DataFormatError(path, None, "no <pair> elements found")
    if skipped:
        log.warning("%s: skipped %d pair(s) with an empty question (pid %s)", path, len(skipped), ", ".join(skipped[:5]))
    return out


PAIR_DATASETS: dict[str, PairDatasetInfo] = {
    "chip-sts": PairDatasetInfo("chip-sts", "zh", "CHIP-STS_train.json", _read_chip_sts),
    "kuake-qqr": PairDatasetInfo("kuake-qqr", "zh", "KUAKE-QQR_train.json", _read_kuake_qqr),
    "medical-question-pairs": PairDatasetInfo("medical-question-pairs", "en", "mqp.csv", _read_mqp),
    "rqe": PairDatasetInfo("rqe", "en", "RQE_Train_8588_AMIA2016.xml", _read_rqe),
}


def dataset_language(name: str) -> str:
    """``"zh"`` or ``"en"`` for a pair dataset name."""
    return _info(name).language


def _info(name: str) -> PairDatasetInfo:
    try:
        return PAIR_DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown question-pair dataset {name!r}; known: {sorted(PAIR_DATASETS)}") from None


def _resolve(info: PairDatasetInfo, path_or_root: PathLike | None) -> Path:
    if path_or_root is not None:
        p = Path(path_or_root)
        if p.is_file():
            return p
        if p.is_dir() and (p / info.filename).is_file():
            return p / info.filename
        if p.is_dir() and (p / info.name / info.filename).is_file():
            return p / info.name / info.filename
        if p.suffix and not p.exists():
            raise DataNotFoundError(f"{info.name} file {p} not found")
    path = dataset_dir(info.name, path_or_root) / info.filename
    if not path.is_file():
        raise DataNotFoundError(f"{info.name}: {path} not found")
    return path


def load_question_pairs(name: str, path_or_root: PathLike | None = None) -> list[QuestionPair]:
    """All visible pairs of dataset ``name``, or of a file in its visible format.

    ``path_or_root`` may be the data root, the dataset folder, or a file; ``None``
    uses ``$MEDRANK_DATA`` / ``../shared/data``. A ``.jsonl`` file is read with
    :func:`load_pairs_jsonl` whatever the dataset.
    """
    info = _info(name)
    if path_or_root is not None and Path(path_or_root).suffix == ".jsonl":
        return load_pairs_jsonl(path_or_root)
    path = _resolve(info, path_or_root)
    prefix = info.name if path.name == info.filename else f"{info.name}/{path.stem}"
    return info.loader(path, prefix)


def load_chip_sts(path_or_root: PathLike | None = None) -> list[QuestionPair]:
    """The labelled pairs of CHIP-STS (Chinese question pairs, label 1 = same intent); see :func:`load_question_pairs`."""
    return load_question_pairs("chip-sts", path_or_root)


def load_kuake_qqr(path_or_root: PathLike | None = None) -> list[QuestionPair]:
    """The labelled pairs of KUAKE-QQR (Chinese query pairs, graded 0–2, mapped to 0/1); see :func:`load_question_pairs`."""
    return load_question_pairs("kuake-qqr", path_or_root)


def load_medical_question_pairs(path_or_root: PathLike | None = None) -> list[QuestionPair]:
    """The labelled pairs of medical-question-pairs (English, doctor-written similar / dissimilar rewrites); see :func:`load_question_pairs`."""
    return load_question_pairs("medical-question-pairs", path_or_root)


def load_rqe(path_or_root: PathLike | None = None) -> list[QuestionPair]:
    """The labelled pairs of RQE (English recognising question entailment pairs); see :func:`load_question_pairs`."""
    return load_question_pairs("rqe", path_or_root)


def load_pairs_jsonl(path: PathLike) -> list[QuestionPair]:
    """Pairs from JSON lines ``{"text1", "text2", "label" (0/1), "id"?, "grade"?, ...}``."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"pair file {path} not found")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(path, n, f"invalid JSON ({exc.msg})") from exc
            if not isinstance(rec, dict):
                raise DataFormatError(path, n, "expected a JSON object")
            for key in ("text1", "text2", "label"):
                if key not in rec:
                    raise DataFormatError(path, n, f"field {key!r} missing")
            label = rec["label"]
            if str(label) not in ("0", "1"):
                raise DataFormatError(path, n, f"label must be 0 or 1, got {label!r}")
            if not isinstance(rec["text1"], str) or not isinstance(rec["text2"], str):
                raise DataFormatError(path, n, "text1 and text2 must be strings")
            t1, t2 = clean_question(rec["text1"]), clean_question(rec["text2"])
            if not t1 or not t2:
                raise DataFormatError(path, n, "empty question text")
            grade = int(rec.get("grade", label))
            meta = {k: v for k, v in rec.items() if k not in ("id", "text1", "text2", "label", "grade")}
            out.append(QuestionPair(str(rec.get("id") or f"{path.stem}:{n}"), t1, t2, int(label), grade, meta))
    return out


def write_pairs_jsonl(pairs: Iterable[QuestionPair], path: PathLike) -> int:
    """Write pairs as JSON lines (atomically); returns how many were written."""
    from medrank.utils.io import atomic_write_text

    lines = []
    for p in pairs:
        rec = {"id": p.id, "text1": p.text1, "text2": p.text2, "label": p.label, "grade": p.grade, **dict(p.meta)}
        lines.append(json.dumps(rec, ensure_ascii=False))
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return len(lines)


# -- splits and groups -----------------------------------------------------------------------------


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # deterministic: the lexicographically smaller root wins
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


def connected_components(edges: Iterable[tuple[str, str]], nodes: Iterable[str] = ()) -> list[list[str]]:
    """Connected components of an undirected graph given as edges (and optional isolated nodes).

    Components are lists of node names, each sorted, and the list is sorted by
    each component's first node, so the result does not depend on input order.
    """
    uf = _UnionFind()
    for n in nodes:
        uf.find(n)
    for a, b in edges:
        uf.union(a, b)
    groups: dict[str, list[str]] = {}
    for n in uf.parent:
        groups.setdefault(uf.find(n), []).append(n)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


class PairSplit(NamedTuple):
    """A train/validation split of pairs; ``dropped`` pairs straddled the two sides."""

    train: list[QuestionPair]
    valid: list[QuestionPair]
    dropped: list[QuestionPair]


def split_pairs(
    pairs: Sequence[QuestionPair], valid_fraction: float = 0.2, seed: int = 13, max_component: float = 0.05
) -> PairSplit:
    """Split pairs into train and validation so that no question text is on both sides.

    Pairs are grouped by the connected components of the question graph
    (question texts are nodes, pairs edges). A component holding more than
    ``max_component`` of all pairs (RQE, whose negatives pair a question with
    a random FAQ, is one giant component) is broken into the components of its
    *positive* pairs. Components are ordered by their smallest text, permuted
    with ``numpy.random.default_rng(seed)``, and whole components go to the
    validation side until it holds ``round(valid_fraction * len(pairs))`` pairs
    (it may overshoot by less than one component). A pair whose two texts end
    up on different sides (possible only inside a broken giant component) is
    put in ``dropped`` rather than leak a text across the split. Each side keeps
    the input order.
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    if not pairs:
        raise ValueError("no pairs to split")
    components = connected_components((p.text1, p.text2) for p in pairs)
    comp_of = {text: i for i, comp in enumerate(components) for text in comp}
    sizes = np.zeros(len(components), dtype=np.int64)
    for p in pairs:
        sizes[comp_of[p.text1]] += 1
    giant = {i for i in range(len(components)) if sizes[i] > max_component * len(pairs)}
    if giant:
        nodes = [t for i in sorted(giant) for t in components[i]]
        edges = [(p.text1, p.text2) for p in pairs if p.label == 1 and comp_of[p.text1] in giant]
        kept = [c for i, c in enumerate(components) if i not in giant]
        components = sorted(kept + connected_components(edges, nodes), key=lambda g: g[0])
        comp_of = {text: i for i, comp in enumerate(components) for text in comp}
    weight = np.zeros(len(components), dtype=np.int64)
    for p in pairs:
        weight[comp_of[p.text1]] += 1
    order = np.random.default_rng(seed).permutation(len(components))
    target = round(valid_fraction * len(pairs))
    valid_comps: set[int] = set()
    taken = 0
    for c in order:
        if taken >= target:
            break
        valid_comps.add(int(c))
        taken += int(weight[c])
    train, valid, dropped = [], [], []
    for p in pairs:
        side1, side2 = comp_of[p.text1] in valid_comps, comp_of[p.text2] in valid_comps
        if side1 != side2:
            dropped.append(p)
        elif side1:
            valid.append(p)
        else:
            train.append(p)
    return PairSplit(train, valid, dropped)


def question_groups(pairs: Iterable[QuestionPair], positive_grade: int | None = None) -> list[list[str]]:
    """Groups of same-intent questions: connected components of the positive pairs.

    A pair is positive when ``label == 1`` (or, with ``positive_grade``, when
    ``grade >= positive_grade``). Questions seen only in negative pairs form no
    group. Components have at least two distinct texts.
    """
    edges = []
    for p in pairs:
        positive = p.grade >= positive_grade if positive_grade is not None else p.label == 1
        if positive and p.text1 != p.text2:
            edges.append((p.text1, p.text2))
    return [c for c in connected_components(edges) if len(c) >= 2]


def unique_questions(pairs: Iterable[QuestionPair]) -> list[str]:
    """Distinct question texts in first-seen order."""
    seen: dict[str, None] = {}
    for p in pairs:
        seen.setdefault(p.text1, None)
        seen.setdefault(p.text2, None)
    return list(seen)


__all__ = [
    "PAIR_DATASETS",
    "PairDatasetInfo",
    "PairSplit",
    "QuestionPair",
    "clean_question",
    "connected_components",
    "dataset_language",
    "load_chip_sts",
    "load_kuake_qqr",
    "load_medical_question_pairs",
    "load_pairs_jsonl",
    "load_question_pairs",
    "load_rqe",
    "question_groups",
    "split_pairs",
    "unique_questions",
    "write_pairs_jsonl",
]
