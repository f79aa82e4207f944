"""MedQuAD: NIH question-answer XML files turned into long documents, passages and (entity, aspect) queries.

Documents (the setting of Arnold et al., "Learning Contextualized Document
Representations for Healthcare Answer Retrieval", WWW 2020):

* one XML file = one :class:`~medrank.records.Document` with id
  ``<source>_<id>`` (e.g. ``GARD_0000004``), title = the focus entity;
* its passages = the non-empty answers in file order, id ``<source>_<qid>``
  (e.g. ``GARD_0000004-1``), ``label`` = the question type (the aspect);
  the text of the document is the answers joined;
* documents with fewer than ``min_passages`` (default 2) answered passages are
  skipped (the answer-less MedlinePlus A.D.A.M./drug/herb files therefore
  disappear, and so do the one-answer MedlinePlus health topics); the 3 CDC
  files with an empty ``<Focus/>`` have no entity and are skipped too.

``Document.meta`` holds ``entity`` (focus), ``entity_ids`` (UMLS CUIs),
``synonyms``, ``semantic_group``, ``source``, ``url`` and ``folder``;
``Passage.meta`` holds ``question`` and ``queryable``. GHR ``treatment``
answers only list generic links, so (as in the paper's reader) they stay in
the document but are never the answer of a query (``queryable=False``).

Queries are (entity, aspect) tuples: one query per distinct pair over the
documents, relevant = every queryable passage with that aspect in a document
about that entity. Documents are about the same entity when they share a
normalised focus name or a (single) UMLS CUI, so GARD's and GHR's pages on one
disease answer one query together.

Three XML schemas occur and are all read: ``<Document>`` (almost all files),
``<doc>`` (2 NINDS files) and ``<DiseaseFile>`` (1 CDC file).

JSONL format
------------
:func:`load_medquad_jsonl` reads one JSON object per line, either a document::

    {"type": "document", "id": "D1", "title": "IgA nephropathy",
     "entity_ids": ["C0017658"], "synonyms": ["Berger disease"],
     "passages": [{"id": "D1-1", "text": "...", "aspect": "information"},
                  {"id": "D1-2", "text": "...", "aspect": "symptoms"}]}

or a query::

    {"type": "query", "id": "q1", "entity": "IgA nephropathy", "aspect": "symptoms",
     "relevant": ["D1-2"]}

``type`` may be omitted (a line with ``passages`` is a document, one with
``entity`` a query). When the file has no query lines, queries are derived from
the documents exactly as for the XML collection. Every error names the file
and line.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medrank.config import dataset_dir
from medrank.data.errors import DataFormatError
from medrank.records import Document, Passage, Qrels, Query

DATASET = "medquad"


@dataclass(frozen=True)
class PassageCorpus:
    """Documents with their (entity, aspect) queries and relevance judgments."""

    name: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    qrels: Qrels

    @property
    def passages(self) -> list[Passage]:
        return [p for d in self.documents for p in d.passages]

    def passage_by_id(self) -> dict[str, Passage]:
        return {p.id: p for d in self.documents for p in d.passages}

    def describe(self) -> dict[str, int]:
        return {
            "documents": len(self.documents),
            "passages": sum(len(d.passages) for d in self.documents),
            "queries": len(self.queries),
            "judged_relevant": sum(len(self.qrels.relevant(q)) for q in self.qrels),
        }


# -- XML ------------------------------------------------------------------------------------------------

_WS = re.compile(r"\s+")


def _clean(text: str | None) -> str:
    return _WS.sub(" ", text or "").strip()


def _child(el: ET.Element, *names: str) -> ET.Element | None:
    wanted = {n.lower() for n in names}
    for c in el:
        if c.tag.lower() in wanted:
            return c
    return None


def _children(el: ET.Element | None, *names: str) -> list[ET.Element]:
    if el is None:
        return []
    wanted = {n.lower() for n in names}
    return [c for c in el if c.tag.lower() in wanted]


def _text_of(el: ET.Element | None) -> str:
    # text nodes joined with a space: an answer split into child elements (paragraphs, list items) keeps its word
    # boundaries; ElementTree decodes the file's declared encoding, so non-ASCII letters are kept as written
    return _clean(" ".join(el.itertext())) if el is not None else ""


def normalise_entity(name: str) -> str:
    """Lower-cased focus name without the "What I need to know about" prefix some NIDDK titles carry."""
    name = re.sub(r"^what i need to know about\s+", "", name.strip(), flags=re.I)
    return _clean(name).lower()


def read_medquad_xml(path: str | os.PathLike[str], min_passages: int = 1) -> Document | None:
    """One MedQuAD XML file as a :class:`Document` (``None`` when it has fewer than ``min_passages`` answers)."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise DataFormatError(path, None, f"not well-formed XML ({exc})") from exc
    tag = root.tag.lower()
    if tag == "document":
        raw_id, source = root.get("id"), root.get("source")
    elif tag == "doc":
        raw_id, source = root.get("docid"), root.get("corpus")
    elif tag == "diseasefile":
        raw_id, source = root.get("fid"), root.get("source")
    else:
        raise DataFormatError(path, None, f"unknown root element <{root.tag}> (expected <Document>)")
    if not raw_id or not source:
        raise DataFormatError(path, None, "the root element lacks an id or a source attribute")
    focus = _text_of(_child(root, "Focus", "doctitle-focus"))
    if not focus:
        return None  # 3 CDC files have an empty <Focus/>: no entity, so no (entity, aspect) query
    annotations = _child(root, "FocusAnnotations")
    umls = _child(annotations, "UMLS") if annotations is not None else _child(root, "UMLS", "umls")
    cuis: list[str] = []
    group = ""
    if umls is not None:
        cui_parent = _child(umls, "CUIs")
        cui_els = _children(cui_parent, "CUI") if cui_parent is not None else _children(umls, "CUI", "cui")
        cuis = [c for c in (_text_of(e) for e in cui_els) if c]
        group = _text_of(_child(umls, "SemanticGroup", "semanticGroup"))
    synonyms = [s for s in (_text_of(e) for e in _children(_child(annotations, "Synonyms"), "Synonym")) if s] if (
        annotations is not None
    ) else []
    # A few CancerGov files repeat the id of a sibling (0000013_2.xml, 0000013_2_1.xml …): use the file name then.
    same_name = path.stem == raw_id
    doc_id = f"{source}_{raw_id}" if same_name else f"{source}_{path.stem}"
    passages: list[Passage] = []
    seen: set[str] = set()
    for pair in _children(_child(root, "QAPairs", "qaPairs"), "QAPair", "pair"):
        q_el = _child(pair, "Question", "question")
        answer = _text_of(_child(pair, "Answer", "answer"))
        if q_el is None or not answer:
            continue
        qid = q_el.get("qid") or f"{raw_id}-{pair.get('pid')}"
        aspect = _clean(q_el.get("qtype")).lower()
        if not aspect:
            raise DataFormatError(path, None, f"question {qid} has no qtype")
        pid = f"{source}_{qid}" if same_name else f"{doc_id}-{qid.rsplit('-', 1)[-1]}"
        if pid in seen:  # a repeated qid would make two passages indistinguishable
            pid = f"{pid}#{len(passages)}"
        seen.add(pid)
        queryable = not (source == "GHR" and aspect == "treatment")
        passages.append(
            Passage(
                pid,
                answer,
                doc_id=doc_id,
                position=len(passages),
                label=aspect,
                meta={"question": _text_of(q_el), "queryable": queryable},
            )
        )
    if len(passages) < max(1, min_passages):
        return None
    meta = {
        "entity": focus,
        "entity_ids": tuple(cuis),
        "synonyms": tuple(synonyms),
        "semantic_group": group,
        "source": source,
        "url": root.get("url", ""),
        "folder": path.parent.name,
    }
    return Document(doc_id, focus, tuple(passages), meta)


def load_medquad_documents(
    root: str | os.PathLike[str] | None = None, min_passages: int = 2, path: str | os.PathLike[str] | None = None
) -> list[Document]:
    """All documents of the collection (``path``: a folder of XML files or one file; default the data root's ``medquad``)."""
    base = Path(path) if path is not None else dataset_dir(DATASET, root)
    if base.is_file():
        doc = read_medquad_xml(base, min_passages)
        return [doc] if doc is not None else []
    if not base.is_dir():
        raise FileNotFoundError(f"{base} not found")
    files = sorted(base.rglob("*.xml"), key=lambda p: (_folder_rank(p.parent.name), p.parent.name, p.name))
    if not files:
        raise FileNotFoundError(f"no MedQuAD XML files under {base}")
    docs = [d for d in (read_medquad_xml(f, min_passages) for f in files) if d is not None]
    for what, ids in (("document", [d.id for d in docs]), ("passage", [p.id for d in docs for p in d.passages])):
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = sorted({i for i in ids if i in seen or seen.add(i)})[:5]  # type: ignore[func-returns-value]
            raise DataFormatError(base, None, f"duplicate {what} ids {dup}")
    return docs


def _folder_rank(name: str) -> int:
    m = re.match(r"(\d+)_", name)
    return int(m.group(1)) if m else 10_000


# -- queries --------------------------------------------------------------------------------------------


def entity_groups(documents: Sequence[Document]) -> list[int]:
    """Group index per document: documents sharing a normalised focus name or a single CUI are one entity."""
    parent = list(range(len(documents)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, d in enumerate(documents):
        keys = [f"name:{normalise_entity(d.meta.get('entity', d.title) or d.id)}"]
        cuis = tuple(d.meta.get("entity_ids", ()))
        if len(cuis) == 1:  # multi-CUI foci are compound topics; merging on them would over-merge
            keys.append(f"cui:{cuis[0]}")
        for key in keys:
            if key in owner:
                a, b = find(i), find(owner[key])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[key] = i
    roots = [find(i) for i in range(len(documents))]
    remap: dict[int, int] = {}
    return [remap.setdefault(r, len(remap)) for r in roots]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def build_queries(documents: Sequence[Document]) -> tuple[list[Query], Qrels]:
    """One (entity, aspect) query per distinct pair; relevant = queryable passages of that pair.

    The query's entity is the focus of the first document of its entity group;
    ``meta`` carries ``entity``, ``aspect``, ``entity_ids``, ``synonyms`` and
    ``doc_ids`` (the documents holding an answer).
    """
    groups = entity_groups(documents)
    order: list[tuple[int, str]] = []
    members: dict[tuple[int, str], list[Passage]] = {}
    first_doc: dict[int, Document] = {}
    for g, d in zip(groups, documents, strict=True):
        first_doc.setdefault(g, d)
        for p in d.passages:
            if not p.meta.get("queryable", True) or not p.label:
                continue
            key = (g, p.label)
            if key not in members:
                members[key] = []
                order.append(key)
            members[key].append(p)
    queries: list[Query] = []
    qrels = Qrels()
    used: set[str] = set()
    for g, aspect in order:
        doc = first_doc[g]
        entity = doc.meta.get("entity", doc.title) or doc.title
        qid = f"{_slug(entity)}::{_slug(aspect)}"
        while qid in used:
            qid += "+"
        used.add(qid)
        passages = members[(g, aspect)]
        queries.append(
            Query(
                qid,
                f"{entity} {aspect}",
                {
                    "entity": entity,
                    "aspect": aspect,
                    "entity_ids": tuple(doc.meta.get("entity_ids", ())),
                    "synonyms": tuple(doc.meta.get("synonyms", ())),
                    "doc_ids": tuple(dict.fromkeys(p.doc_id for p in passages if p.doc_id)),
                },
            )
        )
        for p in passages:
            qrels.add(qid, p.id, 1)
    return queries, qrels


def corpus_from_documents(documents: Sequence[Document], name: str = DATASET) -> PassageCorpus:
    queries, qrels = build_queries(documents)
    return PassageCorpus(name, tuple(documents), tuple(queries), qrels)


def split_documents(
    documents: Sequence[Document], valid_fraction: float = 0.2, seed: int = 13
) -> tuple[list[Document], list[Document]]:
    """``(train, valid)`` by whole documents: ids sorted, permuted with ``default_rng(seed)``, the first share valid."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    ids = sorted(d.id for d in documents)
    perm = np.random.default_rng(seed).permutation(len(ids))
    n_valid = int(round(valid_fraction * len(ids)))
    valid_ids = {ids[i] for i in perm[:n_valid]}
    train = [d for d in documents if d.id not in valid_ids]
    valid = [d for d in documents if d.id in valid_ids]
    return train, valid


def load_medquad(
    split: str | None = "valid",
    root: str | os.PathLike[str] | None = None,
    valid_fraction: float = 0.2,
    seed: int = 13,
    min_passages: int = 2,
) -> PassageCorpus:
    """The visible collection (``split`` ``all``/``None``), or its ``train``/``valid`` side by documents."""
    docs = load_medquad_documents(root, min_passages)
    if split in (None, "all"):
        return corpus_from_documents(docs, DATASET)
    if split not in ("train", "valid"):
        raise ValueError(f"medquad split must be train, valid or all, got {split!r}")
    train, valid = split_documents(docs, valid_fraction, seed)
    return corpus_from_documents(train if split == "train" else valid, f"{DATASET}:{split}")


# -- JSONL ----------------------------------------------------------------------------------------------


def _str_list(value: Any, where: tuple[Path, int]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataFormatError(*where, f"expected a list of strings, got {value!r}")
    return tuple(value)


def load_medquad_jsonl(path: str | os.PathLike[str], min_passages: int = 1) -> PassageCorpus:
    """Documents and (optionally) queries from a JSONL file in the format of the module docstring."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    documents: list[Document] = []
    raw_queries: list[tuple[tuple[Path, int], dict[str, Any]]] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = (path, n)
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise DataFormatError(*where, f"invalid JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise DataFormatError(*where, "expected a JSON object")
            kind = obj.get("type") or ("document" if "passages" in obj else "query" if "entity" in obj else None)
            if kind == "document":
                doc = _jsonl_document(obj, where)
                if len(doc.passages) >= max(1, min_passages):
                    documents.append(doc)
            elif kind == "query":
                raw_queries.append((where, obj))
            else:
                raise DataFormatError(*where, "a line must be a document (with 'passages') or a query (with 'entity')")
    if not documents:
        raise DataFormatError(path, None, "no documents")
    if not raw_queries:
        return corpus_from_documents(documents, path.stem)
    known = {p.id for d in documents for p in d.passages}
    queries: list[Query] = []
    qrels = Qrels()
    for where, obj in raw_queries:
        try:
            entity, aspect = str(obj["entity"]).strip(), str(obj["aspect"]).strip().lower()
            qid = str(obj.get("id") or f"{_slug(entity)}::{_slug(aspect)}")
        except KeyError as exc:
            raise DataFormatError(*where, f"query lacks {exc}") from exc
        if not entity or not aspect:
            raise DataFormatError(*where, "query entity and aspect must be non-empty")
        relevant = _str_list(obj.get("relevant"), where)
        unknown = [r for r in relevant if r not in known]
        if unknown:
            raise DataFormatError(*where, f"relevant passage ids not in the file: {unknown[:5]}")
        queries.append(
            Query(qid, f"{entity} {aspect}", {"entity": entity, "aspect": aspect,
                                                "entity_ids": _str_list(obj.get("entity_ids"), where),
                                                "synonyms": _str_list(obj.get("synonyms"), where)})
        )
        for r in relevant:
            qrels.add(qid, r, 1)
    return PassageCorpus(path.stem, tuple(documents), tuple(queries), qrels)


def _jsonl_document(obj: dict[str, Any], where: tuple[Path, int]) -> Document:
    try:
        doc_id, title = str(obj["id"]), str(obj.get("title") or obj.get("entity") or "").strip()
        raw_passages = obj["passages"]
    except KeyError as exc:
        raise DataFormatError(*where, f"document lacks {exc}") from exc
    if not title:
        raise DataFormatError(*where, f"document {doc_id!r} needs a 'title' (its entity)")
    if not isinstance(raw_passages, list):
        raise DataFormatError(*where, "'passages' must be a list")
    passages = []
    for i, p in enumerate(raw_passages):
        if not isinstance(p, dict) or not isinstance(p.get("text"), str):
            raise DataFormatError(*where, f"passage {i} must be an object with a 'text' string")
        if not p["text"].strip():
            continue
        aspect = str(p.get("aspect") or p.get("label") or "").strip().lower() or None
        passages.append(
            Passage(
                str(p.get("id") or f"{doc_id}-{i + 1}"),
                p["text"].strip(),
                doc_id=doc_id,
                position=len(passages),
                label=aspect,
                meta={"question": str(p.get("question", "")), "queryable": bool(p.get("queryable", True))},
            )
        )
    meta = {
        "entity": title,
        "entity_ids": _str_list(obj.get("entity_ids"), where),
        "synonyms": _str_list(obj.get("synonyms"), where),
        "semantic_group": str(obj.get("semantic_group", "")),
        "source": str(obj.get("source", "")),
        "url": str(obj.get("url", "")),
        "folder": "",
    }
    return Document(doc_id, title, tuple(passages), meta)


def save_medquad_jsonl(corpus: PassageCorpus, path: str | os.PathLike[str], with_queries: bool = True) -> None:
    """Write ``corpus`` in the JSONL format :func:`load_medquad_jsonl` reads (atomic)."""
    from medrank.utils.io import atomic_write_text

    lines = []
    for d in corpus.documents:
        lines.append(
            {
                "type": "document",
                "id": d.id,
                "title": d.title,
                "entity_ids": list(d.meta.get("entity_ids", ())),
                "synonyms": list(d.meta.get("synonyms", ())),
                "source": d.meta.get("source", ""),
                "passages": [
                    {"id": p.id, "text": p.text, "aspect": p.label, "queryable": p.meta.get("queryable", True)}
                    for p in d.passages
                ],
            }
        )
    if with_queries:
        for q in corpus.queries:
            lines.append(
                {
                    "type": "query",
                    "id": q.id,
                    "entity": q.meta["entity"],
                    "aspect": q.meta["aspect"],
                    "entity_ids": list(q.meta.get("entity_ids", ())),
                    "relevant": sorted(corpus.qrels.relevant(q.id)),
                }
            )
    atomic_write_text(path, "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))


def load_passage_corpus(
    path: str | os.PathLike[str] | None = None,
    split: str | None = "valid",
    root: str | os.PathLike[str] | None = None,
    valid_fraction: float = 0.2,
    seed: int = 13,
    min_passages: int = 2,
) -> PassageCorpus:
    """Any visible-format input: a ``.jsonl`` file, an XML file or folder, or (``path=None``) the split."""
    if path is None:
        return load_medquad(split, root, valid_fraction, seed, min_passages)
    p = Path(path)
    if p.suffix == ".jsonl":
        return load_medquad_jsonl(p, min_passages=1)
    docs = load_medquad_documents(path=p, min_passages=min_passages)
    if not docs:
        raise DataFormatError(p, None, f"no document with at least {min_passages} answered passages")
    return corpus_from_documents(docs, p.stem)


def iter_entities(documents: Iterable[Document]) -> Iterable[tuple[str, tuple[str, ...]]]:
    """(focus name, synonyms) of each document."""
    for d in documents:
        yield d.meta.get("entity", d.title), tuple(d.meta.get("synonyms", ()))
