"""NCBI disease corpus and the MEDIC vocabulary (disease mention normalisation).

Files (``<data root>/ncbi-disease``, see its README): ``NCBItrainset_corpus.txt``
and ``NCBIdevelopset_corpus.txt`` (PubTator, see :mod:`medrank.data.pubtator`)
and ``medic_06Jul2012.txt`` (MEDIC, ``ids||name|synonym|...``).

Conventions
-----------
* **Ids.** Bare numeric ids (MEDIC's OMIM numbers, rare in the corpus) become
  ``OMIM:######``; a ``MESH:`` prefix (newer PubTator releases) is removed, so
  MeSH ids are plain ``D######``/``C######`` everywhere.
* **MEDIC concepts.** One concept per line: ``id`` = first id, ``alt_ids`` =
  the other ids of the line, ``name`` = first name, ``synonyms`` = the rest.
  The line ``C||Diseases`` (the root of the MeSH disease tree, id ``C``) is
  legitimate and kept.
* **Gold ids.** The concept column is split on ``|`` (composite mention: any of
  these) and ``+`` (a mention needing several concepts); both give a *set* of
  gold ids. Each gold id is resolved through the map
  ``id or alt_id -> concept ids`` (:func:`concept_id_map`); an id that is
  listed on more than one MEDIC line (OMIM 260350 is its own line and an
  alt id of D010190) resolves to all of them. ``qrels[qid]`` = every resolved
  concept id, grade 1.
* **Unmappable mentions are dropped.** A mention none of whose gold ids
  resolves (or with no id, ``-1``) is not a query; it is counted in
  :attr:`ConceptDataset.unmapped` (BioSyn also drops unmappable mentions).
  Ids of a kept mention that do not resolve are listed in
  ``meta["unresolved_ids"]``.
* **Evaluation (BioSyn convention).** A prediction is correct if it shares
  any id with the gold set. With the qrels above, Acc@k is "any relevant
  concept in the top k" (hit rate at k); for ``+`` mentions a single
  component concept counts as correct, exactly as in BioSyn.
* **Query ids** are ``f"{pmid}:{start}-{end}"``; an exact duplicate document
  (PMID 8528200 occurs twice, identically, in the training file) is skipped
  with a log message, and any other colliding id gets a ``#2``, ``#3`` suffix.
  ``meta``: ``pmid``, ``start``, ``end``, ``class`` (mention class / entity
  type), ``raw_ids`` (the concept column verbatim), ``ids`` (normalised gold
  ids), ``unresolved_ids``, ``individual_mentions``, ``offset_ok``, ``line``,
  ``n_unmapped`` (always 0 for a kept mention). The query text is the mention
  string with surrounding whitespace removed.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from medrank.config import dataset_dir
from medrank.data.errors import DataFormatError
from medrank.data.pubtator import PubTatorDocument, parse_pubtator
from medrank.records import Concept, ConceptDataset, Qrels, Query

log = logging.getLogger(__name__)

DATASET = "ncbi-disease"
MEDIC_FILE = "medic_06Jul2012.txt"
SPLIT_FILES = {"train": "NCBItrainset_corpus.txt", "devel": "NCBIdevelopset_corpus.txt"}

PathLike = str | os.PathLike[str]

# MeSH ids (D/C + digits; "C" alone is the disease-tree root), OMIM with or without prefix.
_MEDIC_ID = re.compile(r"^(?:MESH:)?[CD]\d*$|^(?:OMIM:)?\d+$")


def normalise_concept_id(raw: str) -> str:
    """``"123456"`` -> ``"OMIM:123456"``, ``"MESH:D001"`` -> ``"D001"``; other ids stripped and unchanged."""
    x = raw.strip()
    if x.isdigit():
        return f"OMIM:{x}"
    if x.upper().startswith("MESH:"):
        return x[5:]
    return x


def load_medic(path: PathLike) -> tuple[Concept, ...]:
    """Load MEDIC (``ids||name|synonym|...``) as concepts; raise on lines that break the format."""
    path = Path(path)
    concepts: list[Concept] = []
    first_line: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if "||" not in line:
                raise DataFormatError(path, lineno, "missing '||' between the ids and the names")
            id_part, name_part = line.split("||", 1)
            raw_ids = id_part.split("|")
            if not id_part or any(not i.strip() for i in raw_ids):
                raise DataFormatError(path, lineno, f"empty id in {id_part!r}")
            bad = [i for i in raw_ids if not _MEDIC_ID.match(i.strip())]
            if bad:
                raise DataFormatError(
                    path, lineno, f"malformed id {bad[0]!r} (expected MeSH D/C id or OMIM number)"
                )
            names = name_part.split("|")
            if any(not n.strip() for n in names):
                pos = next(k for k, n in enumerate(names) if not n.strip())
                raise DataFormatError(
                    path, lineno, f"empty name at position {pos + 1} of the names after '||'"
                )
            ids = list(dict.fromkeys(normalise_concept_id(i) for i in raw_ids))
            if ids[0] in first_line:
                raise DataFormatError(
                    path, lineno, f"concept id {ids[0]} already defined on line {first_line[ids[0]]}"
                )
            first_line[ids[0]] = lineno
            names = [n.strip() for n in names]
            concepts.append(
                Concept(
                    id=ids[0],
                    name=names[0],
                    synonyms=tuple(names[1:]),
                    alt_ids=tuple(ids[1:]),
                    meta={"line": lineno},
                )
            )
    if not concepts:
        raise DataFormatError(path, None, "no concept lines")
    return tuple(concepts)


def concept_id_map(vocabulary: Iterable[Concept]) -> dict[str, tuple[str, ...]]:
    """Map every id and alt id to the concept ids that carry it (primary owner first)."""
    owners: dict[str, list[str]] = {}
    alt_owners: dict[str, list[str]] = {}
    for c in vocabulary:
        owners.setdefault(c.id, []).append(c.id)
        for a in c.alt_ids:
            alt_owners.setdefault(a, []).append(c.id)
    out: dict[str, tuple[str, ...]] = {}
    for key in dict.fromkeys([*owners, *alt_owners]):
        out[key] = tuple(dict.fromkeys([*owners.get(key, ()), *alt_owners.get(key, ())]))
    return out


def mention_vocabulary(docs: Iterable[PubTatorDocument], entity_type: str | None = None) -> tuple[Concept, ...]:
    """A vocabulary built from annotated mentions (of ``entity_type``, or of every type): one concept per id,
    its names the distinct mention strings annotated with that id (compared case-insensitively; the most
    frequent spelling is the name).

    A mention with one id names that id. A composite mention (several ids) names its ids only through
    its individual mentions when it lists one per id (the seventh column, in id order); otherwise it is
    left out, since its string names none of them alone. Mentions without an id (``-1``) are skipped. A
    form annotated with several ids names the one it is annotated with most often (ties: the smallest id).
    Concepts come in order of how often the corpus annotates them.
    """
    counts: dict[str, dict[str, Counter[str]]] = {}
    for doc in docs:
        for a in doc.annotations:
            if (entity_type is not None and a.type != entity_type) or not a.ids:
                continue
            ids = [normalise_concept_id(i) for i in a.ids]
            if len(ids) == 1:
                pairs = [(ids[0], a.mention)]
            elif len(a.individual_mentions) == len(ids):
                pairs = list(zip(ids, a.individual_mentions, strict=True))
            else:
                continue
            for cid, text in pairs:
                text = " ".join(text.split())
                if text:
                    counts.setdefault(cid, {}).setdefault(text.lower(), Counter())[text] += 1
    # a form annotated with several ids names only the one it is annotated with most often (ties: the
    # smallest id): the same name under two concepts would tie exactly, and the tie decides nothing
    owner: dict[str, tuple[int, str]] = {}
    for cid in sorted(counts):
        for form, spellings in counts[cid].items():
            n = sum(spellings.values())
            if form not in owner or n > owner[form][0]:
                owner[form] = (n, cid)
    concepts = []
    # concepts by how often the corpus annotates them (then by id): augment_vocabulary keeps this order
    for cid in sorted(counts, key=lambda i: (-sum(sum(c.values()) for c in counts[i].values()), i)):
        own = [c for form, c in counts[cid].items() if owner[form][1] == cid]
        if not own:
            continue
        # per lower-cased form: its most frequent spelling; forms by frequency, then alphabetically
        forms = sorted(own, key=lambda c: (-sum(c.values()), min(c)))
        names = [max(sorted(c), key=lambda s: c[s]) for c in forms]
        concepts.append(Concept(cid, names[0], tuple(names[1:])))
    return tuple(concepts)


def augment_vocabulary(vocabulary: Sequence[Concept], extra: Iterable[Concept]) -> tuple[Concept, ...]:
    """``vocabulary`` with the names of ``extra`` added as synonyms of the concepts their ids resolve to
    (through ids and alt ids); names already present (case-insensitively) and ids the vocabulary lacks are
    skipped. BioSyn's evaluation dictionaries are augmented in the same way with the training mentions.

    The concepts ``extra`` names come first, in ``extra``'s order (:func:`mention_vocabulary`: the most often
    annotated first), the rest after in their own order. Retrievers break exact ties by entry position, and MEDIC
    often lists one name under two concepts (``DM`` under the MeSH Myotonic Dystrophy and the OMIM Dystrophia
    myotonica 1; ``Aniridia`` under a MeSH and an OMIM id): such a tie then goes to the concept the annotated
    corpus uses most, the prior of the corpus's annotation convention, instead of to whichever concept MEDIC
    happens to list first."""
    id_map = concept_id_map(vocabulary)
    added: dict[str, list[str]] = {}
    for c in extra:
        for owner in id_map.get(c.id, ()):
            added.setdefault(owner, []).extend(c.names)
    out = []
    for c in vocabulary:
        if c.id not in added:
            out.append(c)
            continue
        known = {n.lower() for n in c.names}
        new = [n for n in added[c.id] if not (n.lower() in known or known.add(n.lower()))]
        out.append(Concept(c.id, c.name, (*c.synonyms, *new), c.alt_ids, c.meta) if new else c)
    first = {cid: i for i, cid in enumerate(added)}  # insertion order: extra's order
    return tuple(sorted((c for c in out if c.id in added), key=lambda c: first[c.id])) + tuple(
        c for c in out if c.id not in added)


def pubtator_to_dataset(
    docs: Iterable[PubTatorDocument],
    vocabulary: tuple[Concept, ...],
    name: str,
    entity_type: str | None = None,
    id_map: Mapping[str, tuple[str, ...]] | None = None,
) -> ConceptDataset:
    """Turn PubTator annotations into a :class:`ConceptDataset` (conventions in the module docstring).

    ``entity_type`` keeps only annotations of that type (``None``: all).
    """
    id_map = concept_id_map(vocabulary) if id_map is None else id_map
    queries: list[Query] = []
    qrels = Qrels()
    dropped = 0
    seen_docs: dict[str, tuple[object, ...]] = {}
    seen_qids: set[str] = set()
    for doc in docs:
        signature = (
            doc.title,
            doc.abstract,
            tuple((a.start, a.end, a.type, a.raw_id) for a in doc.annotations),
        )
        if seen_docs.get(doc.pmid) == signature:
            log.info("%s: skipping exact duplicate of document %s (line %d)", name, doc.pmid, doc.line)
            continue
        seen_docs.setdefault(doc.pmid, signature)
        for a in doc.annotations:
            if entity_type is not None and a.type != entity_type:
                continue
            gold = tuple(dict.fromkeys(normalise_concept_id(i) for i in a.ids))
            resolved: list[str] = []
            unresolved: list[str] = []
            for g in gold:
                hits = id_map.get(g)
                if hits:
                    resolved.extend(h for h in hits if h not in resolved)
                else:
                    unresolved.append(g)
            if not resolved:
                dropped += 1
                continue
            qid = f"{a.pmid}:{a.start}-{a.end}"
            if qid in seen_qids:
                k = 2
                while f"{qid}#{k}" in seen_qids:
                    k += 1
                qid = f"{qid}#{k}"
            seen_qids.add(qid)
            queries.append(
                Query(
                    id=qid,
                    text=a.mention.strip(),
                    meta={
                        "pmid": a.pmid,
                        "start": a.start,
                        "end": a.end,
                        "class": a.type,
                        "raw_ids": a.raw_id,
                        "ids": gold,
                        "unresolved_ids": tuple(unresolved),
                        "individual_mentions": a.individual_mentions,
                        "offset_ok": a.offset_ok,
                        "line": a.line,
                        "n_unmapped": 0,
                    },
                )
            )
            for cid in resolved:
                qrels.add(qid, cid, 1)
    if dropped:
        log.info("%s: dropped %d mention(s) whose gold ids are not in the vocabulary", name, dropped)
    return ConceptDataset(
        name=name, queries=tuple(queries), qrels=qrels, vocabulary=vocabulary, unmapped=dropped
    )


def load_ncbi_disease(
    split: str = "devel",
    root: PathLike | None = None,
    path: PathLike | None = None,
    vocabulary: tuple[Concept, ...] | None = None,
) -> ConceptDataset:
    """NCBI disease mentions (``split`` = ``"devel"`` or ``"train"``, or any PubTator file via ``path``) against MEDIC.

    Evaluation follows BioSyn: a prediction is correct if it shares any id with
    the gold set, i.e. Acc@k = any relevant concept in the top k. Mentions
    whose ids do not resolve are dropped and counted in ``unmapped``.
    ``vocabulary`` overrides MEDIC (default: ``medic_06Jul2012.txt`` under the
    data root).
    """
    if path is None:
        if split not in SPLIT_FILES:
            raise ValueError(f"unknown NCBI disease split {split!r}; expected one of {sorted(SPLIT_FILES)}")
        path = dataset_dir(DATASET, root) / SPLIT_FILES[split]
        name = f"{DATASET}/{split}"
    else:
        path = Path(path)
        name = f"{DATASET}/{path.stem}"
    if vocabulary is None:
        vocabulary = load_medic(dataset_dir(DATASET, root) / MEDIC_FILE)
    return pubtator_to_dataset(parse_pubtator(path), vocabulary, name)
