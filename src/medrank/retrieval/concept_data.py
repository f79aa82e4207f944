"""Evaluation sets and candidate vocabularies for concept retrieval, by name.

Datasets (``--dataset``) and what ``--split`` means for each:

* ``chip-cdn`` — Chinese diagnoses → ICD-10 Beijing names. ``valid`` / ``train``
  are the two sides of a fixed-seed split of the visible train file (20 %,
  grouped by mention text so a text never sits on both sides); ``all`` is the
  whole file. Candidates: ``gold`` = the distinct gold names of the visible
  train file plus those of the evaluated file (the Bi-HardNCE paper's ~4k-term
  setting), ``vocab`` = the 37,645 distinct names of the 40k-row vocabulary.
* ``ncbi-disease`` — English disease mentions → MEDIC. ``devel`` (default) or
  ``train``. Candidates: MEDIC (names and synonyms).
* ``bc5cdr`` — disease mentions of the BC5CDR training documents → MEDIC.
* ``bc5cdr-disease`` / ``bc5cdr-chemical`` — the fixed-seed carve-out of the
  BC5CDR training documents (:func:`medrank.data.bc5cdr.load_bc5cdr_carve_out`):
  ``test`` (default) is the held-out 20 % of the documents, ``train`` the rest.
  Diseases → MEDIC; chemicals → the chemical names annotated in the training
  part, grouped by MeSH id (with ``test_file``: those of all 500 visible
  training documents), so a chemical id never annotated there cannot be found.

``test_file`` replaces the split with any file in the dataset's visible format
(CHIP-CDN JSONL, or PubTator), so an independent split is scored by the same
command. A ``candidates`` path loads a vocabulary file instead: a TSV with a
``code<TAB>name`` header (CHIP-CDN format), a MEDIC file, or one term per line.
"""

from __future__ import annotations

import os
from pathlib import Path

from medrank.records import Concept, ConceptDataset

DATASETS = ("chip-cdn", "ncbi-disease", "bc5cdr", "bc5cdr-disease", "bc5cdr-chemical")
SPLIT_SEED = 13
VALID_FRACTION = 0.2


def _chip_split(dataset: ConceptDataset, split: str) -> ConceptDataset:
    from medrank.data import split_queries

    train, valid = split_queries(dataset, valid_fraction=VALID_FRACTION, seed=SPLIT_SEED)
    if split == "valid":
        return valid
    if split == "train":
        return train
    if split == "all":
        return dataset
    raise ValueError(f"chip-cdn split must be 'train', 'valid' or 'all', got {split!r}")


def load_eval_set(
    dataset: str,
    split: str | None = None,
    test_file: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> ConceptDataset:
    """The mentions to evaluate, from a named split or an explicit file."""
    from medrank import data

    if dataset == "chip-cdn":
        if test_file is not None:
            return data.load_chip_cdn_mentions(test_file)
        return _chip_split(data.load_chip_cdn(root), split or "valid")
    if dataset == "ncbi-disease":
        if test_file is not None:
            return data.load_ncbi_disease(path=test_file, root=root)
        return data.load_ncbi_disease(split=split or "devel", root=root)
    if dataset == "bc5cdr":
        if test_file is not None:
            return data.load_bc5cdr(path=test_file, root=root)
        return data.load_bc5cdr(root=root)
    if dataset in ("bc5cdr-disease", "bc5cdr-chemical"):
        return _bc5cdr_part(dataset.split("-", 1)[1].capitalize(), split, test_file, root)
    raise ValueError(f"unknown dataset {dataset!r}; choose one of {DATASETS}")


def _bc5cdr_part(
    entity_type: str, split: str | None, test_file: str | os.PathLike[str] | None, root: str | os.PathLike[str] | None
) -> ConceptDataset:
    from medrank import data
    from medrank.config import dataset_dir
    from medrank.data.bc5cdr import DATASET, TRAIN_FILE, load_bc5cdr_carve_out, mention_vocabulary

    if test_file is not None:
        vocabulary = None
        if entity_type == "Chemical":
            visible = data.parse_pubtator(dataset_dir(DATASET, root) / TRAIN_FILE)
            vocabulary = mention_vocabulary(visible, entity_type)
        return data.load_bc5cdr(root=root, path=test_file, entity_type=entity_type, vocabulary=vocabulary)
    if split not in (None, "test", "train"):
        raise ValueError(f"bc5cdr-{entity_type.lower()} split must be 'test' (the held-out documents) or 'train', got {split!r}")
    part = load_bc5cdr_carve_out(entity_type, root=root)
    return part.train if split == "train" else part.test


def _terms_file(path: Path) -> tuple[Concept, ...]:
    from medrank import data

    with open(path, encoding="utf-8") as fh:
        first = fh.readline()
    if first.rstrip("\n").split("\t")[:2] == ["code", "name"]:
        return data.load_chip_cdn_vocabulary(path)
    if "||" in first:
        return data.load_medic(path)
    seen: dict[str, Concept] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            term = line.strip()
            if term and term not in seen:
                seen[term] = Concept(term, term)
    if not seen:
        raise ValueError(f"{path}: no terms found")
    return tuple(seen.values())


def load_candidates(
    dataset: str,
    candidates: str = "gold",
    eval_set: ConceptDataset | None = None,
    root: str | os.PathLike[str] | None = None,
) -> tuple[Concept, ...]:
    """The candidate vocabulary for ``dataset`` (see the module docstring)."""
    from medrank import data

    if candidates not in ("gold", "vocab"):
        path = Path(candidates)
        if not path.exists():
            raise FileNotFoundError(f"candidates must be 'gold', 'vocab' or an existing file, got {candidates!r}")
        return _terms_file(path)
    if dataset == "chip-cdn":
        if candidates == "vocab":
            return data.load_chip_cdn_vocabulary(root)
        names = list(data.gold_terms(data.load_chip_cdn(root)))
        if eval_set is not None:
            names += data.gold_terms(eval_set)
        vocab = {c.id: c for c in data.load_chip_cdn_vocabulary(root)}
        out: dict[str, Concept] = {}
        for n in names:
            if n not in out:
                out[n] = vocab.get(n, Concept(n, n))
        return tuple(out.values())
    if dataset in ("bc5cdr-disease", "bc5cdr-chemical"):  # MEDIC, or the chemical names of the training part
        if eval_set is None:
            eval_set = load_eval_set(dataset, root=root)
        return eval_set.vocabulary
    if dataset in ("ncbi-disease", "bc5cdr"):
        if eval_set is not None and eval_set.vocabulary:
            return eval_set.vocabulary
        from medrank.config import dataset_dir

        return data.load_medic(dataset_dir("ncbi-disease", root) / "medic_06Jul2012.txt")
    raise ValueError(f"unknown dataset {dataset!r}; choose one of {DATASETS}")


def default_encoder(dataset: str) -> str:
    """The offline encoder that fits the dataset's language."""
    return "e5-small" if dataset == "chip-cdn" else "minilm"


def default_language(dataset: str) -> str:
    return "zh" if dataset == "chip-cdn" else "en"
