"""Knowledge bases: a concept vocabulary behind one ``search(texts, k)`` call.

Two backends answer the same call:

* :class:`IndexBackend` — a :class:`~medrank.retrieval.concept.ConceptRetriever` over
  ``medrank.index`` (BM25, dense or RRF hybrid; one entry per name/synonym, a concept scores its
  best entry), saved in the service's state directory;
* :class:`StoreBackend` — a ``medrank.store`` store (embedded faiss + bm25s + SQLite, or
  PostgreSQL + pgvector) holding one row per name/synonym with ``{"concept": id}`` metadata;
  the concept records themselves stay in the state directory.

:class:`KnowledgeBase` adds the concept records and the facts ``/models`` reports
(source, version, licence, method, encoder, trained or zero-shot).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from medrank.encoders.base import Encoder
from medrank.records import Concept
from medrank.retrieval.concept import ConceptRetriever, concept_entries
from medrank.utils.io import atomic_dir

FORMAT = "medrank-service-kb"
VERSION = 1


@dataclass(frozen=True)
class KBInfo:
    """What a knowledge base is: name, language, source, version, licence, and how it is searched."""

    name: str
    language: str
    source: str
    version: str
    licence: str
    method: str = "hybrid"
    model: str = "zero-shot"
    trained: bool = False
    #: names found garbled (UTF-8 read as Latin-1) in the source and decoded back when it was read
    repaired_names: int = 0


@dataclass(frozen=True)
class ConceptHit:
    id: str
    name: str
    score: float
    codes: tuple[str, ...] = ()


class Backend(Protocol):
    def search(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]: ...

    def __len__(self) -> int: ...


class IndexBackend:
    """A :class:`ConceptRetriever` (any ``medrank.index`` index)."""

    kind = "index"

    def __init__(self, retriever: ConceptRetriever) -> None:
        self.retriever = retriever

    def __len__(self) -> int:
        return len(self.retriever.index)

    def search(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [list(zip(r.ids, r.scores, strict=True)) for r in self.retriever.search(list(texts), k=k)]


class DetectorBackend:
    """A trained symptom run (:class:`~medrank.pipelines.symptom.inference.SymptomDetector`): its retriever's top-k,
    keeping only the terms that score at least its calibrated threshold β when the run has one."""

    kind = "trained-detector"

    def __init__(self, detector: Any) -> None:
        self.detector = detector

    def __len__(self) -> int:
        return len(self.detector.retriever.index)

    def search(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        rankings = self.detector.detect(list(texts), k=k, threshold=self.detector.beta is not None)
        return [list(zip(r.ids, r.scores, strict=True)) for r in rankings]


class SelfReportBackend:
    """A trained self-report model (:class:`~medrank.pipelines.symptom.self_report.SelfReportModel`): every one of
    its normalised symptoms ranked by the model's probability that the text states it."""

    kind = "self-report-model"

    def __init__(self, model: Any) -> None:
        self.model = model

    def __len__(self) -> int:
        return len(self.model.names)

    def search(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [ranked[:k] for ranked in self.model.rankings(list(texts))]


class StoreBackend:
    """A ``medrank.store`` store: entries are names/synonyms, hits collapse to their concept (best entry)."""

    kind = "store"

    def __init__(self, store: Any, encoder: Encoder | None, mode: str = "hybrid", overfetch: int = 4) -> None:
        if mode not in ("dense", "bm25", "hybrid"):
            raise ValueError(f"mode must be dense, bm25 or hybrid, got {mode!r}")
        if mode != "bm25" and encoder is None:
            raise ValueError(f"store mode {mode!r} needs an encoder")
        self.store = store
        self.encoder = encoder
        self.mode = mode
        self.overfetch = overfetch

    def __len__(self) -> int:
        return int(self.store.count())

    @staticmethod
    def ingest(store: Any, concepts: Sequence[Concept], encoder: Encoder | None, batch_size: int = 2048,
               show_progress: bool = True, progress: Any = None) -> int:
        """Add every name/synonym of ``concepts`` to ``store`` in batches (vectors from ``encoder``);
        ``progress(done, total)`` is called after each batch."""
        from tqdm.auto import tqdm

        ids, texts, items = concept_entries(concepts)
        # one encoder call for every entry: an embedding cache writes its file once per call, not once per batch
        vectors = (encoder.encode(texts, kind="passage", batch_size=128, show_progress=show_progress)
                   if encoder is not None else None)
        added = 0
        bar = tqdm(total=len(ids), desc="ingest", unit="entry", disable=not show_progress)
        for start in range(0, len(ids), batch_size):
            sl = slice(start, start + batch_size)
            added += store.add(ids[sl], texts[sl], None if vectors is None else vectors[sl],
                               [{"concept": c} for c in items[sl]])
            bar.update(len(ids[sl]))
            if progress is not None:
                progress(min(start + batch_size, len(ids)), len(ids))
        bar.close()
        store.save()
        return added

    def _search_batches(self, texts: Sequence[str], depth: int, mode: str) -> list[Any]:
        """The store's hits for each text (entries, best first), ``depth`` per text, searched by ``mode``."""
        vectors = (self.encoder.encode(list(texts), kind="query", batch_size=32, show_progress=False)
                   if mode != "bm25" else None)
        if hasattr(self.store, "search_batch"):
            return self.store.search_batch(vectors, list(texts), k=depth, mode=mode)
        # a store without batch search
        return [self.store.search(None if vectors is None else vectors[i], t, k=depth, mode=mode)
                for i, t in enumerate(texts)]

    def dense_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's best entry score in the store's dense search alone (what a small-talk gate compares with:
        ``medrank.pipelines.symptom.small_talk``); needs an encoder."""
        if self.encoder is None:
            raise ValueError("a bm25 store has no dense scores")
        batches = self._search_batches(texts, 1, "dense")
        return np.array([float(hits[0].score) if hits else -np.inf for hits in batches], dtype=np.float64)

    def search(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        batches = self._search_batches(texts, k * self.overfetch, self.mode)
        out = []
        for hits in batches:
            best: dict[str, float] = {}
            for h in hits:
                concept = (h.metadata or {}).get("concept") or h.id.split("#", 1)[0]
                if concept not in best:  # hits come best first
                    best[concept] = float(h.score)
            out.append(sorted(best.items(), key=lambda x: -x[1])[:k])
        return out


class KnowledgeBase:
    """Concept records + a backend + the facts served by ``/models``."""

    def __init__(self, info: KBInfo, concepts: Sequence[Concept], backend: Backend) -> None:
        from medrank.text import looks_like_mojibake

        self.info = info
        self.concepts = {c.id: c for c in concepts}
        self.backend = backend
        #: concepts whose name still looks garbled: counted in /models and ranked after every clean hit
        self.garbled = {c.id for c in concepts if looks_like_mojibake(c.name)}

    def __len__(self) -> int:
        return len(self.concepts)

    @classmethod
    def build_index(cls, info: KBInfo, concepts: Sequence[Concept], encoder: Encoder | None,
                    show_progress: bool | None = None) -> KnowledgeBase:
        """Index every name and synonym with ``info.method`` (bm25 | dense | hybrid)."""
        kwargs = {"show_progress": show_progress} if info.method != "bm25" else {}
        retriever = ConceptRetriever.build(concepts, method=info.method, encoder=encoder, language=info.language, **kwargs)
        return cls(info, concepts, IndexBackend(retriever))

    def search(self, texts: Sequence[str], k: int = 5) -> list[list[ConceptHit]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        return [self.hits(pairs) for pairs in self.backend.search(list(texts), k)]

    def hits(self, pairs: Sequence[tuple[str, float]]) -> list[ConceptHit]:
        """``(concept id, score)`` pairs of this knowledge base's backend, best first, as served rows (name, codes;
        a trained run's rows below its calibrated β dropped, as its backend's own search drops them)."""
        beta = self.backend.detector.beta if isinstance(self.backend, DetectorBackend) else None
        rows = []
        for cid, score in pairs:
            if beta is not None and score < beta:
                continue
            c = self.concepts.get(cid)
            codes = tuple(c.meta.get("codes", ())) if c is not None else ()
            rows.append(ConceptHit(cid, c.name if c is not None else cid, round(float(score), 6), codes))
        if self.garbled:  # a garbled name is never served before a readable one (stable: order kept otherwise)
            rows.sort(key=lambda h: h.id in self.garbled)
        return rows

    def describe(self) -> dict[str, Any]:
        out = {**asdict(self.info), "concepts": len(self.concepts), "entries": len(self.backend),
               "backend": getattr(self.backend, "kind", type(self.backend).__name__), "garbled_names": len(self.garbled)}
        if isinstance(self.backend, DetectorBackend):
            out["beta"] = self.backend.detector.beta
        return out

    # -- persistence --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], fingerprint: str = "") -> None:
        """Index backend: index + concepts; store backend: concepts + manifest (the store saves itself)."""
        with atomic_dir(path) as tmp:
            if isinstance(self.backend, IndexBackend):
                self.backend.retriever.save(tmp / "retriever")
            write_concepts(tmp / "concepts.jsonl", self.concepts.values())
            manifest = {"format": FORMAT, "version": VERSION, "info": asdict(self.info),
                        "backend": getattr(self.backend, "kind", "index"), "fingerprint": fingerprint}
            (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")

    @staticmethod
    def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The manifest of a saved knowledge base, or ``None`` when absent / of another format."""
        mpath = Path(path) / "manifest.json"
        if not mpath.exists():
            return None
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            return None
        return manifest

    @classmethod
    def load(cls, path: str | os.PathLike[str], encoder: Encoder | None = None, store: Any = None,
             store_mode: str = "hybrid") -> KnowledgeBase:
        path = Path(path)
        manifest = cls.read_manifest(path)
        if manifest is None:
            raise FileNotFoundError(f"{path} holds no saved knowledge base (manifest.json of format {FORMAT} v{VERSION})")
        info = KBInfo(**manifest["info"])
        concepts = read_concepts(path / "concepts.jsonl")
        if manifest["backend"] == "store":
            if store is None:
                raise ValueError(f"{path} is a store-backed knowledge base: pass the opened store")
            return cls(info, concepts, StoreBackend(store, encoder, store_mode))
        kwargs = {"encoder": encoder} if encoder is not None else {}
        retriever = ConceptRetriever.load(path / "retriever", **kwargs)
        return cls(info, concepts, IndexBackend(retriever))


def repair_names(concepts: Sequence[Concept]) -> tuple[list[Concept], int]:
    """``concepts`` with garbled names and synonyms (UTF-8 read as Latin-1) decoded back, and how many names were;
    ids stay as the source wrote them (they are the source's keys)."""
    from dataclasses import replace

    from medrank.text import repair_mojibake

    out, repaired = [], 0
    for c in concepts:
        name = repair_mojibake(c.name)
        synonyms = tuple(repair_mojibake(s) or s for s in c.synonyms)
        if name is not None or synonyms != c.synonyms:
            repaired += name is not None
            c = replace(c, name=name or c.name, synonyms=synonyms)
        out.append(c)
    return out, repaired


def write_concepts(path: Path, concepts: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for c in concepts:
            meta = {k: list(v) if isinstance(v, tuple) else v for k, v in c.meta.items()}
            fh.write(json.dumps({"id": c.id, "name": c.name, "synonyms": list(c.synonyms), "alt_ids": list(c.alt_ids),
                                 "meta": meta}, ensure_ascii=False) + "\n")


def read_concepts(path: Path) -> list[Concept]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            meta = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get("meta", {}).items()}
            out.append(Concept(d["id"], d["name"], tuple(d.get("synonyms", ())), tuple(d.get("alt_ids", ())), meta))
    return out
