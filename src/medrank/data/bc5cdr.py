"""BC5CDR (BioCreative V CDR) training documents as a disease normalisation set.

File: ``<data root>/bc5cdr/CDR_TrainingSet.PubTator.txt`` (500 documents,
PubTator with ``Chemical``/``Disease`` mentions, MeSH ids, CID relations).

Disease mentions are normalised against MEDIC (``ncbi-disease/
medic_06Jul2012.txt``), with the same conventions as
:mod:`medrank.data.ncbi`: ``|``-joined ids form a gold set (any of them is
correct), ids resolve through id/alt-id, and mentions with id ``-1`` or with
no id in MEDIC are dropped and counted in ``unmapped``. Chemicals have no
MEDIC entries, so ``entity_type="Chemical"`` needs an explicit
``vocabulary`` (e.g. MeSH chemicals, not shipped here).
"""

from __future__ import annotations

import os
from pathlib import Path

from medrank.config import dataset_dir
from medrank.data.ncbi import DATASET as NCBI_DATASET
from medrank.data.ncbi import MEDIC_FILE, load_medic, pubtator_to_dataset
from medrank.data.pubtator import parse_pubtator
from medrank.records import Concept, ConceptDataset

DATASET = "bc5cdr"
TRAIN_FILE = "CDR_TrainingSet.PubTator.txt"
ENTITY_TYPES = ("Disease", "Chemical")

PathLike = str | os.PathLike[str]


def load_bc5cdr(
    root: PathLike | None = None,
    path: PathLike | None = None,
    entity_type: str = "Disease",
    vocabulary: tuple[Concept, ...] | None = None,
) -> ConceptDataset:
    """BC5CDR mentions of ``entity_type`` against MEDIC (or ``vocabulary``).

    ``path`` overrides the PubTator file (e.g. an independent test file in the
    same format). Query ids are ``f"{pmid}:{start}-{end}"``; see
    :func:`medrank.data.ncbi.pubtator_to_dataset` for ``meta``.
    """
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown BC5CDR entity type {entity_type!r}; expected one of {ENTITY_TYPES}")
    if vocabulary is None and entity_type != "Disease":
        raise ValueError(
            f"BC5CDR {entity_type} mentions cannot be normalised against MEDIC (a disease vocabulary with no "
            "chemical entries); pass vocabulary=... with a chemical vocabulary"
        )
    file = Path(path) if path is not None else dataset_dir(DATASET, root) / TRAIN_FILE
    if vocabulary is None:
        vocabulary = load_medic(dataset_dir(NCBI_DATASET, root) / MEDIC_FILE)
    stem = "train" if file.name == TRAIN_FILE else file.stem
    suffix = "" if entity_type == "Disease" else f"-{entity_type.lower()}"
    return pubtator_to_dataset(
        parse_pubtator(file), vocabulary, f"{DATASET}/{stem}{suffix}", entity_type=entity_type
    )
