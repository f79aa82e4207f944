"""CHIP-CDN (Chinese clinical diagnosis normalisation) loaders.

Files (``<data root>/chip-cdn``, see its README):

* ``icd10_beijing_v601.tsv``: header ``code<TAB>name`` then one ICD-10 Beijing
  v601 code per row (40,474 rows, 37,645 distinct names).
* ``train.jsonl``: one JSON object per line with ``text`` (the diagnosis as
  written by a doctor) and ``normalized_result`` (standard name(s) joined with
  ``##``).

Conventions
-----------
* **A concept is a distinct name.** Gold labels are names, and the same name
  can sit under several codes, so the vocabulary is one :class:`Concept` per
  distinct name, ``Concept(id=name, name=name, meta={"codes": (...)})``, in
  the file order of the name's first appearance.
* **Gold names** are the ``##``-separated parts of ``normalized_result`` with
  surrounding whitespace and double quotes removed. The quotes are a CSV
  artefact of the source: a field containing a comma was wrapped in quotes
  *as a whole*, so a quoted multi-name field such as ``"A,x##B"`` leaves a
  leading quote on its first name and a trailing quote on its last. Stripping
  quote characters from both ends of every part undoes both cases.
* **Unmapped gold names** (not in the vocabulary) are kept in the qrels: they
  are valid labels that a retriever over the vocabulary simply cannot find,
  so they cost recall exactly as they should. Their occurrences are counted in
  :attr:`ConceptDataset.unmapped` and listed per query in
  ``query.meta["unmapped"]``.
* **The label ``O``** (34 occurrences in 31 records, never the only label of
  a record) is kept as an ordinary gold name: it is in the data (apparently
  the annotators' marker for a part of the text with no standard name) and is
  not in the vocabulary, so it counts as unmapped. Filter it downstream if an
  experiment needs to.
* A name repeated within one record (after cleaning) is one qrels entry.
* ``text`` is kept verbatim, including the surrounding double quotes that the
  same CSV artefact left on 191 training texts.
* Query ids are ``f"{file stem}:{line number}"`` (``train:17``), so an
  independent split in the same format (``dev.jsonl``) loads the same way
  with non-colliding ids.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from medrank.config import DataNotFoundError, dataset_dir
from medrank.data.errors import DataFormatError
from medrank.records import Concept, ConceptDataset, Qrels, Query

DATASET = "chip-cdn"
VOCAB_FILE = "icd10_beijing_v601.tsv"
TRAIN_FILE = "train.jsonl"
NAME_SEPARATOR = "##"
NO_LABEL = "O"
"""The placeholder label used by 34 training records; kept as a gold name."""

PathLike = str | os.PathLike[str]


def clean_name(raw: str) -> str:
    """Strip whitespace and surrounding double quotes from one gold name."""
    return raw.strip().strip('"').strip()


def split_names(normalized_result: str) -> list[str]:
    """Split a ``normalized_result`` field into cleaned names (may contain empty strings)."""
    return [clean_name(part) for part in normalized_result.split(NAME_SEPARATOR)]


def _vocab_path(path_or_root: PathLike | None) -> Path:
    if path_or_root is not None:
        p = Path(path_or_root)
        if p.is_file():
            return p
        if p.is_dir() and (p / VOCAB_FILE).is_file():
            return p / VOCAB_FILE
        if p.suffix and not p.exists():
            raise DataNotFoundError(f"CHIP-CDN vocabulary file {p} not found")
    return dataset_dir(DATASET, path_or_root) / VOCAB_FILE


def load_chip_cdn_vocabulary(path_or_root: PathLike | None = None) -> tuple[Concept, ...]:
    """Load the ICD-10 Beijing v601 names as one concept per distinct name.

    ``path_or_root`` is the TSV file, the ``chip-cdn`` folder, or the data root
    (``None``: the default data root). Every code of a name is kept, in file
    order, in ``concept.meta["codes"]``.
    """
    path = _vocab_path(path_or_root)
    codes_by_name: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if lineno == 1:
                if line.lstrip("\ufeff") != "code\tname":
                    raise DataFormatError(path, 1, f"expected header 'code<TAB>name', got {line[:60]!r}")
                continue
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise DataFormatError(
                    path, lineno, f"expected 2 tab-separated fields (code, name), got {len(fields)}"
                )
            code, name = fields[0].strip(), fields[1].strip()
            if not code:
                raise DataFormatError(path, lineno, "empty code")
            if not name:
                raise DataFormatError(path, lineno, f"empty name for code {code!r}")
            codes_by_name.setdefault(name, []).append(code)
    if not codes_by_name:
        raise DataFormatError(path, None, "no vocabulary rows")
    return tuple(Concept(id=n, name=n, meta={"codes": tuple(c)}) for n, c in codes_by_name.items())


def load_chip_cdn_mentions(path: PathLike, vocabulary: tuple[Concept, ...] | None = None) -> ConceptDataset:
    """Load a CHIP-CDN JSON-lines file (``train.jsonl`` or any file in that format).

    Each line becomes a :class:`Query` with id ``f"{stem}:{line}"`` and text
    ``text``; its qrels are the cleaned gold names (grade 1). Gold names that
    are not vocabulary ids are kept and counted in ``unmapped`` (occurrences,
    one per query and name). Without a ``vocabulary`` nothing can be checked:
    the dataset's vocabulary is empty and ``unmapped`` is 0.

    ``query.meta``: ``line``, ``source`` (file name), ``raw`` (the original
    ``normalized_result``), ``unmapped`` (tuple of this query's gold names not
    in the vocabulary) and ``n_unmapped``.
    """
    path = Path(path)
    vocab = tuple(vocabulary) if vocabulary is not None else ()
    known = {c.id for c in vocab} if vocabulary is not None else None
    queries: list[Query] = []
    qrels = Qrels()
    unmapped = 0
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(path, lineno, f"invalid JSON: {e.msg} (column {e.colno})") from None
            if not isinstance(rec, dict):
                raise DataFormatError(path, lineno, f"expected a JSON object, got {type(rec).__name__}")
            for key in ("text", "normalized_result"):
                if key not in rec:
                    raise DataFormatError(path, lineno, f"field {key!r} missing")
                if not isinstance(rec[key], str):
                    raise DataFormatError(
                        path, lineno, f"field {key!r} must be a string, got {type(rec[key]).__name__}"
                    )
            text, raw = rec["text"], rec["normalized_result"]
            if not text.strip():
                raise DataFormatError(path, lineno, "field 'text' is empty")
            names = split_names(raw)
            if any(not n for n in names):
                raise DataFormatError(path, lineno, f"empty name in 'normalized_result' {raw!r}")
            names = list(dict.fromkeys(names))
            missing = tuple(n for n in names if known is not None and n not in known)
            unmapped += len(missing)
            qid = f"{path.stem}:{lineno}"
            queries.append(
                Query(
                    id=qid,
                    text=text,
                    meta={
                        "line": lineno,
                        "source": path.name,
                        "raw": raw,
                        "unmapped": missing,
                        "n_unmapped": len(missing),
                    },
                )
            )
            for n in names:
                qrels.add(qid, n, 1)
    if not queries:
        raise DataFormatError(path, None, "no records")
    return ConceptDataset(
        name=f"{DATASET}/{path.stem}",
        queries=tuple(queries),
        qrels=qrels,
        vocabulary=vocab,
        unmapped=unmapped,
    )


def load_chip_cdn(root: PathLike | None = None) -> ConceptDataset:
    """The CHIP-CDN training file against the ICD-10 Beijing v601 vocabulary (the evaluation set here)."""
    folder = dataset_dir(DATASET, root)
    vocab = load_chip_cdn_vocabulary(folder / VOCAB_FILE)
    return load_chip_cdn_mentions(folder / TRAIN_FILE, vocab)


def gold_terms(dataset: ConceptDataset) -> list[str]:
    """Distinct gold item ids (for CHIP-CDN: names) in order of first appearance over the queries."""
    seen: dict[str, None] = {}
    for q in dataset.queries:
        for item in dataset.qrels.get(q.id, {}):
            seen.setdefault(item, None)
    return list(seen)
