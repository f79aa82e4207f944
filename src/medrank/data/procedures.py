"""CHIP 2019 Chinese procedure normalisation: the standard procedure list (``kb.tsv``) and the mentions.

Files (``<data root>/chip2019-procedures``, see its README): ``kb.tsv`` is
``code<TAB>name`` without a header (9,867 ICD-9-CM-3 based codes, 9,468
distinct names); ``train.tsv`` / ``val.tsv`` have a header and
``mention<TAB>names`` with several standard names joined by ``##``.

As for CHIP-CDN (:mod:`medrank.data.chip_cdn`) **a concept is a distinct
name**, because gold labels are names and a name can sit under several codes:
``Concept(id=name, name=name, alt_ids=codes[1:], meta={"codes": codes})`` in
the file order of the name's first appearance.

Licence: the source repository states none (see the dataset README).
"""

from __future__ import annotations

import os
from pathlib import Path

from medrank.config import dataset_dir
from medrank.data.errors import DataFormatError
from medrank.records import Concept, ConceptDataset, Qrels, Query

DATASET = "chip2019-procedures"
KB_FILE = "kb.tsv"
NAME_SEPARATOR = "##"

PathLike = str | os.PathLike[str]


def _folder(root: PathLike | None) -> Path:
    return dataset_dir(DATASET, root)


def load_procedure_kb(root: PathLike | None = None) -> list[Concept]:
    """The standard procedure names as concepts (one per distinct name, codes in ``meta["codes"]``)."""
    path = _folder(root) / KB_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (the CHIP 2019 procedure code list)")
    codes: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
                raise DataFormatError(path, lineno, "expected 'code<TAB>name'")
            code, name = parts[0].strip(), parts[1].strip()
            codes.setdefault(name, []).append(code)
    if not codes:
        raise DataFormatError(path, None, "empty code list")
    return [Concept(name, name, (), tuple(c[1:]), {"codes": tuple(c)}) for name, c in codes.items()]


def load_procedure_mentions(split: str = "train", root: PathLike | None = None) -> ConceptDataset:
    """``train`` or ``val`` mentions with their gold standard names as qrels (names missing from the KB kept)."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    folder = _folder(root)
    path = folder / f"{split}.tsv"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    vocabulary = tuple(load_procedure_kb(root))
    known = {c.id for c in vocabulary}
    queries, qrels, unmapped = [], Qrels(), 0
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for lineno, line in enumerate(lines[1:], 2):  # first line is the worksheet header
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataFormatError(path, lineno, "expected 'mention<TAB>names'")
        qid = f"{split}:{lineno}"
        names = [n.strip() for n in parts[1].split(NAME_SEPARATOR) if n.strip()]
        queries.append(Query(qid, parts[0].strip(), {"language": "zh"}))
        for n in names:
            qrels.add(qid, n)
            unmapped += n not in known
    return ConceptDataset(DATASET, tuple(queries), qrels, vocabulary, unmapped=unmapped)
