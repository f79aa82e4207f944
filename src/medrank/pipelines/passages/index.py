"""The CDV sentence index: every sentence's decoded entity ⊕ aspect vector, scored by cosine per query.

Built once per corpus: documents → sentences → features → document encoder →
per sentence the unit entity vector and the unit aspect vector, stored side
by side as one ``(n_sentences, 2·dim)`` float32 matrix. A query (entity,
aspect) becomes ``[w·e ; (1 − w)·a]`` (unit ``e``, ``a``; ``w = ½`` is the
paper's concatenated, re-normalised query), so one matrix–vector product gives
every sentence's score ``w·cos(e, ê_t) + (1 − w)·cos(a, â_t)``; a passage
scores the mean of its sentences (the paper's PASSAGE_RANK strategy).
Scoring needs every sentence, so this is an exact scan (no ANN top-k index):
about 135k sentences × 256 floats for all of MedQuAD.

:meth:`CDVIndex.score_curve` returns the per-sentence scores of one document
(the paper's Figure 4) and :func:`plot_score_curve` draws them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.index.topk import topk_stable
from medrank.pipelines.passages.artefacts import CDV_INDEX_FORMAT
from medrank.pipelines.passages.model import CDVModel, LabelSpace
from medrank.pipelines.passages.text import SentenceTable, build_sentence_table
from medrank.records import Document, Ranking, require_text
from medrank.utils.io import atomic_dir
from medrank.utils.vectors import unit_rows

FORMAT = CDV_INDEX_FORMAT
VERSION = 1


def check_query(entity: str, aspect: str, where: str = "") -> None:
    """A clear error unless ``entity`` and ``aspect`` are both strings with some text (an empty one would be encoded as-is)."""
    require_text(entity, f"{where}entity")
    require_text(aspect, f"{where}aspect")


class CDVIndex:
    """Sentence vectors of a corpus plus the passage/document layout and the query model."""

    def __init__(
        self,
        vectors: np.ndarray,
        table: SentenceTable,
        passages: list[dict[str, Any]],
        documents: list[dict[str, Any]],
        label_space: LabelSpace,
        entity_weight: float = 0.5,
    ) -> None:
        if len(vectors) != len(table):
            raise ValueError(f"{len(vectors)} vectors for {len(table)} sentences")
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.table = table
        self.passages = passages
        self.documents = documents
        self.label_space = label_space
        self.entity_weight = float(entity_weight)
        self._starts = table.passage_offsets[:-1]
        self._counts = np.diff(table.passage_offsets).astype(np.float32)
        # The mean of a passage's sentence scores equals the query times the mean of its sentence vectors
        # (the score is linear in the sentence vector), so these centroids give the same passage scores
        # without touching every sentence; kept for callers that only need passage scores.
        self.passage_centroids = np.add.reduceat(self.vectors, self._starts, axis=0) / self._counts[:, None]
        self.passage_index = {p["id"]: i for i, p in enumerate(passages)}
        self.doc_index = {d["id"]: i for i, d in enumerate(documents)}

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def n_sentences(self) -> int:
        """Sentences indexed (each passage scores the mean of its sentences)."""
        return len(self.table)

    # -- building -----------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        documents: Sequence[Document],
        model: CDVModel,
        featurizer: Any,
        label_space: LabelSpace,
        max_tokens: int = 96,
        batch_docs: int = 16,
        show_progress: bool = True,
        timings: dict[str, float] | None = None,
    ) -> CDVIndex:
        """Encode ``documents`` with the trained ``model`` (features from ``featurizer``)."""
        if not documents:
            raise ValueError("no documents to index")
        t0 = time.perf_counter()
        table = build_sentence_table(documents, max_tokens)
        t1 = time.perf_counter()
        feats = featurizer(table.texts, table.flags, show_progress=show_progress)
        t2 = time.perf_counter()
        ent, asp = model.encode_documents(feats, table.doc_offsets, batch_docs=batch_docs)
        vectors = np.concatenate([unit_rows(ent), unit_rows(asp)], axis=1)
        t3 = time.perf_counter()
        if timings is not None:
            timings.update(split_s=t1 - t0, features_s=t2 - t1, encoder_s=t3 - t2)
        label_space.add_entities([(d.meta.get("entity", d.title) or d.id, tuple(d.meta.get("synonyms", ()))) for d in documents])
        label_space.add_aspects([p.label for d in documents for p in d.passages if p.label])
        passages = [
            {"id": p.id, "doc_id": d.id, "label": p.label, "text": p.text} for d in documents for p in d.passages
        ]
        docs = [{"id": d.id, "title": d.title, "entity": d.meta.get("entity", d.title)} for d in documents]
        return cls(vectors, table, passages, docs, label_space)

    # -- querying -----------------------------------------------------------------------------------
    def query_vector(self, entity: str, aspect: str, entity_weight: float | None = None) -> np.ndarray:
        """The query vector of one (entity, aspect): ``[w * entity vector, (1 - w) * aspect vector]``, w = ``entity_weight``."""
        check_query(entity, aspect)
        w = self.entity_weight if entity_weight is None else float(entity_weight)
        if not 0.0 <= w <= 1.0:
            raise ValueError(f"entity_weight must be in [0, 1], got {w}")
        e = self.label_space.entity_vector(entity)
        a = self.label_space.aspect_vector(aspect)
        return np.concatenate([w * e, (1.0 - w) * a]).astype(np.float32)

    def query_vectors(self, entities: Sequence[str], aspects: Sequence[str], entity_weight: float | None = None) -> np.ndarray:
        """One query vector per (entity, aspect): the two label embeddings combined with ``entity_weight``."""
        if len(entities) != len(aspects):
            raise ValueError(f"{len(entities)} entities but {len(aspects)} aspects")
        for i, (e, a) in enumerate(zip(entities, aspects, strict=True)):
            check_query(e, a, f"query {i}: ")
        w = self.entity_weight if entity_weight is None else float(entity_weight)
        e = self.label_space.entity_vectors(list(entities))
        a = self.label_space.aspect_vectors(list(aspects))
        return np.concatenate([w * e, (1.0 - w) * a], axis=1).astype(np.float32)

    def sentence_scores(self, qvec: np.ndarray) -> np.ndarray:
        """Every indexed sentence's score (inner product) for a query vector from :meth:`query_vector`."""
        return self.vectors @ qvec

    def passage_scores(self, qvec: np.ndarray, via_centroids: bool = False) -> np.ndarray:
        """Mean sentence score of every passage (scores every sentence; ``via_centroids``: the same values
        from the precomputed passage centroids, without the per-sentence scan)."""
        if via_centroids:
            return self.passage_centroids @ qvec
        return np.add.reduceat(self.sentence_scores(qvec), self._starts) / self._counts

    def search(self, entity: str, aspect: str, k: int = 10, entity_weight: float | None = None, query_id: str = "0") -> Ranking:
        """Top-``k`` passages of the whole corpus for (entity, aspect)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        scores = self.passage_scores(self.query_vector(entity, aspect, entity_weight))
        idx = topk_stable(scores, min(k, len(scores)))
        return Ranking(query_id, tuple(self.passages[i]["id"] for i in idx), tuple(float(scores[i]) for i in idx))

    def score_candidates(self, qvec: np.ndarray, passage_ids: Sequence[str]) -> np.ndarray:
        """Mean sentence score of each of ``passage_ids`` (the re-ranking protocol: only these are scored)."""
        unknown = [p for p in passage_ids if p not in self.passage_index]
        if unknown:
            raise KeyError(f"{len(unknown)} passage id(s) are not in the index, e.g. {unknown[0]!r}")
        idx = np.fromiter((self.passage_index[p] for p in passage_ids), dtype=np.int64, count=len(passage_ids))
        starts = self.table.passage_offsets[idx]
        ends = self.table.passage_offsets[idx + 1]
        out = np.empty(len(idx), dtype=np.float32)
        for j, (a, b) in enumerate(zip(starts, ends, strict=True)):
            out[j] = float((self.vectors[a:b] @ qvec).mean())
        return out

    def score_curve(self, entity: str, aspect: str, doc_id: str, entity_weight: float | None = None) -> dict[str, Any]:
        """Per-sentence scores of one document: ``{"sentences", "scores", "passages": [(id, label, start, end, score)]}``."""
        if doc_id not in self.doc_index:
            raise KeyError(f"document {doc_id!r} is not in the index")
        i = self.doc_index[doc_id]
        sl = self.table.doc_slice(i)
        q = self.query_vector(entity, aspect, entity_weight)
        scores = self.vectors[sl] @ q
        p0, p1 = int(self.table.doc_passage_offsets[i]), int(self.table.doc_passage_offsets[i + 1])
        spans = []
        for j in range(p0, p1):
            a = int(self.table.passage_offsets[j]) - sl.start
            b = int(self.table.passage_offsets[j + 1]) - sl.start
            spans.append((self.passages[j]["id"], self.passages[j]["label"], a, b, float(scores[a:b].mean())))
        return {"document": self.documents[i], "sentences": self.table.texts[sl], "scores": scores.tolist(), "passages": spans}

    # -- persistence --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sentence vectors and offsets (safetensors) and the passages (JSON lines) atomically to ``path``."""
        from safetensors.numpy import save_file

        with atomic_dir(path) as tmp:
            save_file(
                {
                    "vectors": self.vectors,
                    "flags": self.table.flags,
                    "passage_offsets": self.table.passage_offsets,
                    "doc_offsets": self.table.doc_offsets,
                    "doc_passage_offsets": self.table.doc_passage_offsets,
                },
                str(tmp / "vectors.safetensors"),
            )
            with open(tmp / "passages.jsonl", "w", encoding="utf-8") as fh:
                for p in self.passages:
                    fh.write(json.dumps(p, ensure_ascii=False) + "\n")
            with open(tmp / "sentences.jsonl", "w", encoding="utf-8") as fh:
                for s in self.table.texts:
                    fh.write(json.dumps(s, ensure_ascii=False) + "\n")
            self.label_space.save(tmp)
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "entity_weight": self.entity_weight,
                "documents": self.documents,
                "n_sentences": self.n_sentences,
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], encoder: Any = None) -> CDVIndex:
        """An index saved by :meth:`save`; ``encoder`` (the trained CDV model) is needed to search by text."""
        from safetensors.numpy import load_file

        path = Path(path)
        manifest_path = path / "manifest.json"
        if not manifest_path.exists():
            raise FileNotFoundError(f"{path} is not a CDV index (no manifest.json); build one with `medrank index-passages`")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ValueError(f"{path}: unsupported index format {manifest.get('format')!r} v{manifest.get('version')}")
        t = load_file(str(path / "vectors.safetensors"))
        with open(path / "passages.jsonl", encoding="utf-8") as fh:
            passages = [json.loads(line) for line in fh]
        with open(path / "sentences.jsonl", encoding="utf-8") as fh:
            texts = [json.loads(line) for line in fh]
        documents = manifest["documents"]
        table = SentenceTable(
            texts=texts,
            flags=t["flags"],
            passage_ids=[p["id"] for p in passages],
            passage_offsets=t["passage_offsets"],
            doc_ids=[d["id"] for d in documents],
            doc_offsets=t["doc_offsets"],
            doc_passage_offsets=t["doc_passage_offsets"],
        )
        label_space = LabelSpace.load(path, encoder=encoder)
        return cls(t["vectors"], table, passages, documents, label_space, manifest.get("entity_weight", 0.5))


def plot_score_curve(curve: dict[str, Any], path: str | os.PathLike[str], title: str | None = None) -> None:
    """Per-sentence score over a document with its passages shaded and labelled (the paper's Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = np.asarray(curve["scores"])
    fig, ax = plt.subplots(figsize=(max(6.0, min(16.0, 0.12 * len(scores) + 4)), 3.4), dpi=120)
    best = max(curve["passages"], key=lambda s: s[4]) if curve["passages"] else None
    for k, (_pid, label, a, b, score) in enumerate(curve["passages"]):
        color = "tab:green" if best is not None and (a, b) == (best[2], best[3]) else ("0.92" if k % 2 else "0.85")
        ax.axvspan(a - 0.5, b - 0.5, color=color, alpha=0.35 if color == "tab:green" else 1.0, lw=0)
        ax.text((a + b - 1) / 2, 1.02, str(label or ""), ha="center", va="bottom", fontsize=6, rotation=60,
                transform=ax.get_xaxis_transform())
        ax.hlines(score, a - 0.5, b - 0.5, colors="tab:red", linestyles="--", lw=1)
    ax.plot(np.arange(len(scores)), scores, marker=".", lw=1, color="tab:blue", label="sentence score")
    ax.set_xlim(-0.5, len(scores) - 0.5)
    ax.set_xlabel("sentence")
    ax.set_ylabel("cosine(query, sentence)")
    ax.set_title(title or curve["document"].get("title", ""), fontsize=9, pad=28)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
