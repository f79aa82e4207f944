"""What marks a saved symptom run (read by :func:`medrank.load`), and how its candidate indexes are opened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: written at the end of ``medrank train`` (candidate indexes, calibrated β, k)
DETECTOR_MARKER = "detector.json"


def open_run_index(run: Path, index_dir: Path, backend: str = "torch", search: str = "exact") -> Any:
    """The :class:`~medrank.retrieval.concept.ConceptRetriever` saved in ``index_dir`` of ``run``, its queries
    encoded by the run's own ``model/`` folder with the settings the index recorded, so that a run moved or
    copied elsewhere keeps its trained query encoder (the index records the absolute folder it was built with).
    ``backend`` / ``search``: see :func:`prepare_for_serving` (the defaults leave the run as it was trained)."""
    retriever = _open_run_index(run, index_dir)
    if backend != "torch" or search != "exact":
        retriever.serving = prepare_for_serving(retriever, backend, search)
    return retriever


#: seeded sample of a vocabulary's entries on which a query encoder's backends are compared with torch
AGREEMENT_SAMPLE = 64


def prepare_for_serving(retriever: Any, backend: str = "auto", search: str = "hnsw") -> str:
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
    return ", ".join(notes)


def _open_run_index(run: Path, index_dir: Path) -> Any:
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept import ConceptRetriever

    manifest = index_dir / "index" / "manifest.json"
    spec: dict[str, Any] = {}
    if (run / "model").is_dir() and manifest.exists():
        spec = dict(json.loads(manifest.read_text(encoding="utf-8")).get("config", {}).get("encoder") or {})
    if not spec:
        return ConceptRetriever.load(index_dir)
    spec["path"] = str(run / "model")
    return ConceptRetriever.load(index_dir, encoder=load_encoder(spec))
