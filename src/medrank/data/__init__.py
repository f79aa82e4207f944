"""Dataset loaders: real files under the data root turned into medrank records.

``LOADERS`` maps a dataset name to a function ``(root) -> ConceptDataset``
that returns the standard evaluation set of that dataset (the held-out
official splits are reserved for independent evaluation):

* ``chip-cdn``: ``train.jsonl`` against ICD-10 Beijing v601 names;
* ``ncbi-disease``: the development set against MEDIC;
* ``bc5cdr``: disease mentions of the training file against MEDIC.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from medrank.data.bc5cdr import load_bc5cdr
from medrank.data.chip_cdn import gold_terms, load_chip_cdn, load_chip_cdn_mentions, load_chip_cdn_vocabulary
from medrank.data.errors import DataFormatError
from medrank.data.ncbi import concept_id_map, load_medic, load_ncbi_disease, normalise_concept_id
from medrank.data.pubtator import (
    PubTatorAnnotation,
    PubTatorDocument,
    PubTatorRelation,
    count_offset_mismatches,
    parse_pubtator,
)
from medrank.data.splits import split_queries, subset
from medrank.records import ConceptDataset

Root = str | os.PathLike[str] | None


def _chip_cdn(root: Root = None) -> ConceptDataset:
    return load_chip_cdn(root)


def _ncbi_disease(root: Root = None) -> ConceptDataset:
    return load_ncbi_disease("devel", root)


def _bc5cdr(root: Root = None) -> ConceptDataset:
    return load_bc5cdr(root)


LOADERS: dict[str, Callable[[Root], ConceptDataset]] = {
    "chip-cdn": _chip_cdn,
    "ncbi-disease": _ncbi_disease,
    "bc5cdr": _bc5cdr,
}


def load_dataset(name: str, root: Root = None) -> ConceptDataset:
    """The standard evaluation set of ``name`` (a key of :data:`LOADERS`)."""
    try:
        loader = LOADERS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(LOADERS)}") from None
    return loader(root)


__all__ = [
    "LOADERS",
    "DataFormatError",
    "PubTatorAnnotation",
    "PubTatorDocument",
    "PubTatorRelation",
    "concept_id_map",
    "count_offset_mismatches",
    "gold_terms",
    "load_bc5cdr",
    "load_chip_cdn",
    "load_chip_cdn_mentions",
    "load_chip_cdn_vocabulary",
    "load_dataset",
    "load_medic",
    "load_ncbi_disease",
    "normalise_concept_id",
    "parse_pubtator",
    "split_queries",
    "subset",
]
