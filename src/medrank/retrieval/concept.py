"""Concept retrieval: a mention or patient query → top-k vocabulary concepts.

This is the inference side of symptom detection (Bi-HardNCE) and of
biomedical entity normalisation (BioSyn). Every name and synonym of a concept
is an index entry; a concept scores the best of its entries. Retrieval is
BM25, dense (any encoder) or hybrid; evaluation reports NDCG@5 / Recall@5 (the
Bi-HardNCE paper's metrics) and Acc@1 / Acc@5 (BioSyn's).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.encoders.base import Encoder
from medrank.index import BM25Index, DenseIndex, HybridIndex, Index, load_index
from medrank.index.base import check_k
from medrank.metrics import evaluate
from medrank.records import Concept, ConceptDataset, Query, Ranking
from medrank.utils.io import atomic_dir

METHODS = ("bm25", "dense", "hybrid")
#: with an ``index/`` folder beside it, marks a saved concept retriever (read by :func:`medrank.load`)
CONCEPTS_FILE = "concepts.jsonl"
DEFAULT_METRICS = ("ndcg@5", "recall@5", "acc@1", "acc@5", "mrr")


def definition_entry(concept: Concept) -> str | None:
    """The first sentence of ``concept.meta["definition"]`` (HPO's definitions), or None.

    A definition says in plain words what a clinical name means ("Rhinorrhea": "Discharge of mucus from the
    nose"), so a patient's phrase the vocabulary has no synonym for can still land on it. Only the first sentence:
    the rest qualifies it ("... It may be ...") and dilutes one embedding."""
    definition = concept.meta.get("definition") if isinstance(concept.meta, dict) else None
    if not isinstance(definition, str) or not definition.strip():
        return None
    first = re.split(r"(?<=[a-z0-9)\]])\.\s+(?=[A-Z])", definition.strip(), maxsplit=1)[0]
    return first.rstrip(" .") or None


def concept_texts(concept: Concept, use_synonyms: bool = True, use_definitions: bool = False) -> tuple[str, ...]:
    """The texts a concept is indexed and trained under: its name, its synonyms with ``use_synonyms``, and last the
    first sentence of its definition with ``use_definitions`` (:func:`definition_entry`; unless a name already says
    it)."""
    names = concept.names if use_synonyms else (concept.name,)
    definition = definition_entry(concept) if use_definitions else None
    return names if definition is None or definition in names else (*names, definition)


def concept_entries(
    concepts: Sequence[Concept], use_synonyms: bool = True, use_definitions: bool = False
) -> tuple[list[str], list[str], list[str]]:
    """(entry ids, entry texts, item ids): one entry per text of each concept (:func:`concept_texts`); a name or
    synonym has id ``<concept id>#<j>``, a definition ``<concept id>#def``."""
    ids, texts, items = [], [], []
    for i, c in enumerate(concepts):
        if not isinstance(c, Concept):
            raise TypeError(f"concept {i} must be a medrank.records.Concept, got {type(c).__name__}")
        n_names = len(c.names) if use_synonyms else 1
        for j, text in enumerate(concept_texts(c, use_synonyms, use_definitions)):
            ids.append(f"{c.id}#{j}" if j < n_names else f"{c.id}#def")
            texts.append(text)
            items.append(c.id)
    return ids, texts, items


def vocabulary_digest(concepts: Sequence[Concept]) -> str:
    """A short digest of what an index over ``concepts`` holds (ids, names, synonyms, definitions): a cached index
    built from another vocabulary is never reused under the same key."""
    h = hashlib.sha256()
    for c in concepts:
        h.update(json.dumps([c.id, c.name, list(c.synonyms), c.meta.get("definition", "")], ensure_ascii=False).encode())
    return h.hexdigest()[:10]


def make_index(
    method: str,
    encoder: Encoder | None = None,
    language: str = "auto",
    zh_mode: str = "char",
    fusion: str = "rrf",
    **kwargs: Any,
) -> Index:
    """An unbuilt index of the given method (``bm25``, ``dense`` or ``hybrid`` = RRF of both)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method in ("dense", "hybrid") and encoder is None:
        raise ValueError(f"method {method!r} needs an encoder")
    if method == "bm25":
        return BM25Index(language=language, zh_mode=zh_mode)
    if method == "dense":
        return DenseIndex(encoder, **kwargs)
    return HybridIndex(
        [BM25Index(language=language, zh_mode=zh_mode), DenseIndex(encoder, **kwargs)],
        method=fusion,
    )


class ConceptRetriever:
    """An index over a vocabulary plus the concept records, saved and loaded together."""

    def __init__(self, index: Index, concepts: Sequence[Concept]) -> None:
        self.index = index
        self.concepts = {c.id: c for c in concepts}
        #: what was changed in memory to serve it faster (a query encoder's backend, approximate search), in words
        self.serving = ""

    @classmethod
    def build(
        cls,
        concepts: Sequence[Concept],
        method: str = "bm25",
        encoder: Encoder | None = None,
        use_synonyms: bool = True,
        language: str = "auto",
        zh_mode: str = "char",
        use_definitions: bool = False,
        **index_kwargs: Any,
    ) -> ConceptRetriever:
        """Index ``concepts`` (their names, synonyms with ``use_synonyms``, definitions with ``use_definitions``:
        see :func:`concept_entries`) with a ``bm25`` / ``dense`` / ``hybrid`` index; ``encoder`` is needed by the
        dense and hybrid methods."""
        if not concepts:
            raise ValueError("the vocabulary is empty")
        index = make_index(method, encoder, language=language, zh_mode=zh_mode, **index_kwargs)
        ids, texts, items = concept_entries(concepts, use_synonyms, use_definitions)
        index.build(ids, texts, items)
        return cls(index, concepts)

    @classmethod
    def mean_of(cls, retrievers: Sequence[ConceptRetriever], weights: Sequence[float] | None = None,
                depth: int = 100) -> ConceptRetriever:
        """One retriever scoring each concept by the ``weights``-mean of ``retrievers``' scores (dense retrievers of
        several encoders over the same entries, in the same order: an ensemble; see
        :class:`~medrank.index.hybrid.HybridIndex`, ``method="mean"``); each retrieves ``depth`` concepts first."""
        from medrank.index.hybrid import HybridIndex

        if len(retrievers) < 2:
            raise ValueError(f"a mean needs two or more retrievers, got {len(retrievers)}")
        index = HybridIndex.from_built([r.index for r in retrievers], method="mean",
                                       weights=list(weights) if weights is not None else None, depth=depth)
        return cls(index, list(retrievers[0].concepts.values()))

    def search(self, queries: Sequence[str | Query] | str | Query, k: int = 5) -> list[Ranking]:
        """Top-``k`` concept ids per query (a concept's score is its best entry's); see :meth:`describe`."""
        return self.index.search(queries, k=k)

    def describe(self, ranking: Ranking) -> list[dict[str, Any]]:
        """Rows of ``{id, name, score, codes?}`` for a ranking (for CLI/service output)."""
        rows = []
        for cid, score in zip(ranking.ids, ranking.scores, strict=True):
            c = self.concepts.get(cid)
            row: dict[str, Any] = {"id": cid, "name": c.name if c else cid, "score": round(float(score), 6)}
            if c is not None and c.meta.get("codes"):
                row["codes"] = list(c.meta["codes"])
            rows.append(row)
        return rows

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index and the concepts to folder ``path`` atomically; :meth:`load` reads it back."""
        with atomic_dir(path) as tmp:
            self.index.save(tmp / "index")
            with open(tmp / CONCEPTS_FILE, "w", encoding="utf-8") as fh:
                for c in self.concepts.values():
                    fh.write(
                        json.dumps(
                            {
                                "id": c.id,
                                "name": c.name,
                                "synonyms": list(c.synonyms),
                                "alt_ids": list(c.alt_ids),
                                "meta": {k: list(v) if isinstance(v, tuple) else v for k, v in c.meta.items()},
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> ConceptRetriever:
        """A retriever saved by :meth:`save`; ``kwargs`` (e.g. ``encoder=``) go to :func:`load_index`."""
        path = Path(path)
        if "encoder" not in kwargs:
            moved = _moved_run_encoder(path)
            if moved is not None:
                kwargs["encoder"] = moved
        index = load_index(path / "index", **kwargs)
        concepts = []
        with open(path / CONCEPTS_FILE, encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                meta = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("meta", {}).items()}
                concepts.append(
                    Concept(d["id"], d["name"], tuple(d.get("synonyms", ())), tuple(d.get("alt_ids", ())), meta)
                )
        return cls(index, concepts)


#: seeded sample of a vocabulary's entries on which a query encoder's backends are compared with torch
AGREEMENT_SAMPLE = 64


def prepare_for_serving(retriever: ConceptRetriever, backend: str = "auto", search: str = "hnsw") -> str:
    """Make a loaded retriever answer one query faster, in memory; returns what was changed, in words.

    * ``backend``: the dense parts' query encoder runs on ``"onnx"`` / ``"onnx-int8"``, or on ``"auto"``: the
      fastest ONNX Runtime form whose query vectors agree with torch's on a seeded sample of the vocabulary
      (:func:`medrank.encoders.choose_backend`); ``"torch"`` keeps it. The entry vectors stay the torch ones.
    * ``search="hnsw"``: an exact (flat) dense index becomes an HNSW graph over the same vectors (a query then
      visits a few thousand entries instead of every one); ``"exact"`` keeps it.
    """
    import numpy as np

    from medrank.encoders import TransformerEncoder, choose_backend
    from medrank.encoders.onnx import check_backend, with_backend
    from medrank.index.dense import DenseIndex

    if backend != "auto":
        check_backend(backend)
    if search not in ("exact", "hnsw"):
        raise ValueError(f"search must be 'exact' or 'hnsw', got {search!r}")
    notes = []
    for part in getattr(retriever.index, "components", [retriever.index]):
        if not isinstance(part, DenseIndex):
            continue
        encoder = part.encoder
        if backend != "torch" and isinstance(encoder, TransformerEncoder):
            if backend == "auto":
                texts = part.entry_texts
                pick = np.random.default_rng(0).choice(len(texts), size=min(AGREEMENT_SAMPLE, len(texts)), replace=False)
                choice = choose_backend(encoder, [texts[i] for i in sorted(pick)], kind="query")
                part.encoder = choice.encoder
                notes.append(f"queries on {choice.backend}")
            else:
                part.encoder = with_backend(encoder, backend)
                notes.append(f"queries on {backend}")
        if search == "hnsw" and part.factory == "flat":
            part.to_hnsw(ef_construction=100)
            notes.append("HNSW search")
    return ", ".join(dict.fromkeys(notes))  # the dense parts of an ensemble say it once


def saved_encoder_spec(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The encoder spec a saved retriever's index recorded (a dense index's, or the dense half of a sparse + dense
    one), or ``None`` for an index without an encoder."""
    for manifest in (Path(path) / "index" / "manifest.json", Path(path) / "index" / "dense" / "manifest.json"):
        if manifest.is_file():
            spec = json.loads(manifest.read_text(encoding="utf-8")).get("config", {}).get("encoder")
            if isinstance(spec, dict) and spec:
                return dict(spec)
    return None


def _moved_run_encoder(path: Path) -> Any | None:
    """The encoder of a run's saved index (``RUN/index``) read from ``RUN/model`` when the absolute folder the index
    recorded no longer exists: a run moved or copied elsewhere keeps its trained encoder. ``None`` when nothing moved."""
    model = path.parent / "model"
    spec = saved_encoder_spec(path) if model.is_dir() else None
    if spec is None or not spec.get("path") or Path(spec["path"]).exists():
        return None
    from medrank.encoders import load_encoder

    return load_encoder({**spec, "path": str(model)})


def evaluate_retriever(
    retriever: ConceptRetriever,
    dataset: ConceptDataset,
    metrics: Sequence[str] = DEFAULT_METRICS,
    k: int | None = None,
) -> dict[str, Any]:
    """Score ``retriever`` on ``dataset``; returns metrics plus timing and coverage facts."""
    depth = check_k(k) if k is not None else max([int(m.split("@")[1]) for m in metrics if "@" in m] + [10])
    start = time.perf_counter()
    rankings = retriever.search(list(dataset.queries), k=depth)
    elapsed = time.perf_counter() - start
    run = {r.query_id: r for r in rankings}
    scores = evaluate(dataset.qrels, run, list(metrics))
    known = set(retriever.concepts)
    reachable = sum(1 for q in dataset.queries if dataset.qrels.relevant(q.id) & known)
    return {
        "metrics": scores,
        "n_queries": len(dataset.queries),
        "n_candidates": len(retriever.concepts),
        "n_entries": len(retriever.index),
        "queries_with_a_reachable_gold": reachable,
        "seconds": round(elapsed, 3),
        "queries_per_second": round(len(dataset.queries) / elapsed, 1) if elapsed > 0 else None,
    }
