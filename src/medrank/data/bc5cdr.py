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

:func:`load_bc5cdr_carve_out` splits the documents into a training part and a
fixed-seed held-out part (20 %, seed 13) for evaluation; its chemical
vocabulary is built from the chemical names annotated in the training part
(:func:`mention_vocabulary`), since no chemical vocabulary ships offline.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from medrank.config import dataset_dir
from medrank.data.ncbi import DATASET as NCBI_DATASET
from medrank.data.ncbi import (
    MEDIC_FILE,
    augment_vocabulary,
    concept_id_map,
    load_medic,
    mention_vocabulary,
    normalise_concept_id,
    pubtator_to_dataset,
)
from medrank.data.pubtator import PubTatorDocument, parse_pubtator
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


# -- the fixed-seed carve-out of the visible training documents ---------------------------------------

#: share of the 500 visible training documents held out for evaluation, and the seed that picks them
CARVE_OUT_FRACTION = 0.2
CARVE_OUT_SEED = 13


def split_documents(
    docs: Sequence[PubTatorDocument], fraction: float = CARVE_OUT_FRACTION, seed: int = CARVE_OUT_SEED
) -> tuple[list[PubTatorDocument], list[PubTatorDocument]]:
    """(training part, held-out part): a fixed-seed ``fraction`` of the distinct PMIDs is held out, every
    mention of a document on one side. The documents keep their file order on each side."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    pmids = sorted({d.pmid for d in docs})
    if len(pmids) < 2:
        raise ValueError(f"need at least 2 documents to hold some out, got {len(pmids)}")
    n_held = min(len(pmids) - 1, max(1, round(fraction * len(pmids))))
    held = set(np.random.default_rng(seed).permutation(pmids)[:n_held].tolist())
    return [d for d in docs if d.pmid not in held], [d for d in docs if d.pmid in held]


def count_unseen(docs: Iterable[PubTatorDocument], vocabulary: Sequence[Concept], entity_type: str) -> int:
    """Mentions of ``entity_type`` that carry ids none of which the vocabulary knows: a retriever over it
    cannot find them (:func:`~medrank.data.ncbi.pubtator_to_dataset` drops them from the queries)."""
    id_map = concept_id_map(vocabulary)
    return sum(
        1
        for d in docs
        for a in d.annotations
        if a.type == entity_type and a.ids and not any(normalise_concept_id(i) in id_map for i in a.ids)
    )


@dataclass(frozen=True)
class BC5CDRCarveOut:
    """One entity type of the carve-out: training-part and held-out mentions against one vocabulary.

    ``unseen``: held-out mentions whose ids the vocabulary lacks (not queries; a system cannot get them
    right); ``no_id``: held-out mentions annotated ``-1``. Both are left out of ``test``."""

    entity_type: str
    train: ConceptDataset
    test: ConceptDataset
    vocabulary: tuple[Concept, ...]
    vocabulary_source: str
    unseen: int
    no_id: int


def load_bc5cdr_carve_out(
    entity_type: str = "Disease",
    root: PathLike | None = None,
    fraction: float = CARVE_OUT_FRACTION,
    seed: int = CARVE_OUT_SEED,
    augment: bool = False,
    path: PathLike | None = None,
) -> BC5CDRCarveOut:
    """The visible BC5CDR training documents split into a training part and a fixed-seed held-out part.

    Disease mentions are normalised against MEDIC; with ``augment`` MEDIC's concepts also get the disease
    names of the training part as synonyms (BioSyn's dictionary augmentation). Chemical mentions are
    normalised against :func:`mention_vocabulary` of the training part: the chemical names annotated there,
    grouped by MeSH id. That is not a chemical vocabulary like CTD's (none ships offline): a held-out
    chemical whose id never occurs in the training part cannot be found, and is counted in ``unseen``.
    ``path`` replaces the training file.
    """
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown BC5CDR entity type {entity_type!r}; expected one of {ENTITY_TYPES}")
    file = Path(path) if path is not None else dataset_dir(DATASET, root) / TRAIN_FILE
    docs = parse_pubtator(file)
    train_docs, test_docs = split_documents(docs, fraction, seed)
    if entity_type == "Disease":
        vocabulary = load_medic(dataset_dir(NCBI_DATASET, root) / MEDIC_FILE)
        source = "MEDIC"
        if augment:
            vocabulary = augment_vocabulary(vocabulary, mention_vocabulary(train_docs, entity_type))
            source = "MEDIC + training-part disease names"
    else:
        vocabulary = mention_vocabulary(train_docs, entity_type)
        source = "training-part chemical names grouped by MeSH id"
    id_map = concept_id_map(vocabulary)
    name = f"{DATASET}/carve-out-{entity_type.lower()}"
    return BC5CDRCarveOut(
        entity_type,
        pubtator_to_dataset(train_docs, vocabulary, f"{name}:train", entity_type=entity_type, id_map=id_map),
        pubtator_to_dataset(test_docs, vocabulary, f"{name}:test", entity_type=entity_type, id_map=id_map),
        vocabulary,
        source,
        count_unseen(test_docs, vocabulary, entity_type),
        sum(1 for d in test_docs for a in d.annotations if a.type == entity_type and not a.ids),
    )
