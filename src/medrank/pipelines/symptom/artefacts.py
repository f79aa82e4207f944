"""What marks a saved symptom run (read by :func:`medrank.load`), and how its candidate indexes are opened."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from medrank.retrieval.concept import AGREEMENT_SAMPLE, prepare_for_serving

__all__ = ["AGREEMENT_SAMPLE", "DETECTOR_MARKER", "default_candidates", "ensemble_members", "open_run_index",
           "prepare_for_serving"]

#: written at the end of ``medrank train`` (candidate indexes, calibrated β, k)
DETECTOR_MARKER = "detector.json"


def default_candidates(run: Path) -> str:
    """The index a run answers from when none is named: ``gold`` (CHIP-CDN's gold names), else the run's own term
    set (``hpo``), else ``vocab``. A folder that is no symptom run gives ``gold``, and loading it says what it is."""
    try:
        indexes = json.loads((run / DETECTOR_MARKER).read_text(encoding="utf-8"))["candidates"]
    except (OSError, ValueError, KeyError, TypeError):
        return "gold"
    if "gold" in indexes or not indexes:
        return "gold"
    own = sorted(name for name in indexes if name != "vocab")
    return own[0] if own else "vocab"


def open_run_index(run: Path, index_dir: Path, backend: str = "torch", search: str = "exact") -> Any:
    """The :class:`~medrank.retrieval.concept.ConceptRetriever` saved in ``index_dir`` of ``run``, its queries
    encoded by the run's own ``model/`` folder with the settings the index recorded, so that a run moved or
    copied elsewhere keeps its trained query encoder (the index records the absolute folder it was built with).
    ``backend`` / ``search``: see :func:`prepare_for_serving` (the defaults leave the run as it was trained)."""
    retriever = _open_run_index(run, index_dir)
    retriever.serving = prepare_for_serving(retriever, backend, search)  # nothing changes for torch + exact
    return retriever


def _open_run_index(run: Path, index_dir: Path) -> Any:
    members = ensemble_members(run)
    if members:
        return _open_ensemble_index(run, index_dir, members)
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept import ConceptRetriever, saved_encoder_spec

    spec = saved_encoder_spec(index_dir) if (run / "model").is_dir() else None
    if not spec:
        return ConceptRetriever.load(index_dir)
    return ConceptRetriever.load(index_dir, encoder=load_encoder({**spec, "path": str(run / "model")}))


def ensemble_members(run: str | os.PathLike[str]) -> list[Path]:
    """The member run folders an ensemble run's ``detector.json`` names, relative to the ensemble's folder (none for
    a single run; :mod:`~medrank.pipelines.symptom.ensemble`)."""
    try:
        meta = json.loads((Path(run) / DETECTOR_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    members = meta.get("members") if isinstance(meta, dict) else None
    return [Path(run) / m for m in members] if isinstance(members, list) else []


def _open_ensemble_index(run: Path, index_dir: Path, members: list[Path]) -> Any:
    """An ensemble run's saved index, each member's part encoding queries with that member's own ``model/``."""
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept import ConceptRetriever

    retriever = ConceptRetriever.load(index_dir, load_encoder=False)
    parts = getattr(retriever.index, "components", [])
    if len(parts) != len(members):
        raise ValueError(f"{index_dir} holds {len(parts)} parts for {len(members)} members: build the ensemble again")
    for i, (part, member) in enumerate(zip(parts, members, strict=True)):
        if not (member / "model").is_dir():
            raise FileNotFoundError(f"member {member} of ensemble {run} has no model/ folder: the ensemble reads "
                                    "each member's encoder from its run folder")
        manifest = index_dir / "index" / f"component{i}" / "manifest.json"
        spec = json.loads(manifest.read_text(encoding="utf-8")).get("config", {}).get("encoder") or {}
        part.encoder = load_encoder({**spec, "path": str(member / "model")})
    return retriever
