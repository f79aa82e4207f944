"""One entry point for every saved medrank artefact: ``medrank.load(path)``.

Each pipeline keeps its own loader (``SymptomDetector.load``, ``ProcedureNormalizer.load`` …);
:func:`load` reads which kind of artefact a folder holds from the files each pipeline writes and
calls that loader, the way ``SentenceTransformer(path)`` opens any saved model folder.

========================================  ===============================================  ==============================
folder (what wrote it)                    recognised by                                    returns
========================================  ===============================================  ==============================
``medrank train`` procedures KAR/fusion   ``normalizer.json``                              ``ProcedureNormalizer``
``medrank train`` symptom run             ``detector.json``                                ``SymptomDetector``
``medrank index`` / ``ConceptRetriever``  ``concepts.jsonl`` + ``index/``                  ``ConceptRetriever``
``medrank index-passages``                ``manifest.json`` of format medrank-cdv-index    ``CDVIndex``
``medrank train`` CDV run                 ``cdv.json`` (or ``model/cdv.json``)             ``TrainedCDV``
``medrank train`` similar-question run    ``matcher.json`` (or ``matcher/matcher.json``)   ``PairMatcher``
``medrank train`` history re-ranker       its model's JSON (or under ``model/``)           the re-ranker module
any saved index (BM25, dense, hybrid)     ``manifest.json`` with a ``type``                ``Index``
========================================  ===============================================  ==============================

Keyword arguments go to the loader (e.g. ``candidates="vocab"`` for a symptom run, ``encoder=``
for an index whose encoder moved).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_PASSAGE_BASELINE = "a passage baseline run re-ranks a corpus: use `medrank evaluate --dataset medquad`"
# runs that hold no stand-alone inference object, and what to do with them instead
NOT_LOADABLE = {
    "procedures-mtcg": "an MTCG run is the candidate generator only: train KAR over it "
    "(configs/procedures/kar.yaml) and load that run",
    **dict.fromkeys(("passage-cross-encoder", "passage-dssm", "passage-knrm"), _PASSAGE_BASELINE),
}


def artefact_kind(path: str | os.PathLike[str]) -> str:
    """Which kind of medrank artefact folder ``path`` holds (a key of :data:`KINDS`); clear errors otherwise."""
    folder = Path(path)
    if not folder.exists():
        raise FileNotFoundError(f"{folder} does not exist")
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file; medrank artefacts are folders")
    from medrank.pipelines.history.artefacts import RERANKER_MARKERS
    from medrank.pipelines.passages.artefacts import CDV_INDEX_FORMAT, CDV_MODEL_MARKER
    from medrank.pipelines.procedures.artefacts import NORMALIZER_MARKER
    from medrank.pipelines.similar.artefacts import MATCHER_MARKER
    from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER
    from medrank.retrieval.concept import CONCEPTS_FILE

    if (folder / NORMALIZER_MARKER).is_file():
        return "procedure-normalizer"
    if (folder / DETECTOR_MARKER).is_file():
        return "symptom-detector"
    if (folder / CONCEPTS_FILE).is_file() and (folder / "index").is_dir():
        return "concept-retriever"
    manifest = _json(folder / "manifest.json")
    if manifest is not None and manifest.get("format") == CDV_INDEX_FORMAT:
        return "cdv-index"
    if (folder / CDV_MODEL_MARKER).is_file() or (folder / "model" / CDV_MODEL_MARKER).is_file():
        return "cdv-model"
    if (folder / MATCHER_MARKER).is_file() or (folder / "matcher" / MATCHER_MARKER).is_file():
        return "question-matcher"
    if any((d / f).is_file() for d in (folder, folder / "model") for f in RERANKER_MARKERS):
        return "history-reranker"
    if manifest is not None and "type" in manifest:
        return "index"
    task = (_json(folder / "config.json") or {}).get("task")
    if isinstance(task, str) and task in NOT_LOADABLE:
        raise ValueError(f"{folder}: {NOT_LOADABLE[task]}")
    if (folder / "checkpoints").is_dir():
        raise ValueError(f"{folder} holds checkpoints but no saved model: its training has not finished "
                         "(run the same `medrank train` command again to resume)")
    raise ValueError(f"{folder} holds no medrank artefact this version can load (known kinds: {', '.join(KINDS)})")


def load(path: str | os.PathLike[str], **kwargs: Any) -> Any:
    """Load any saved medrank artefact folder (see the module's table); ``kwargs`` go to its loader."""
    kind = artefact_kind(path)
    return KINDS[kind](Path(path), **kwargs)


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _procedure_normalizer(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.procedures.inference import ProcedureNormalizer

    return ProcedureNormalizer.load(path, **kwargs)


def _symptom_detector(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.symptom.inference import SymptomDetector

    return SymptomDetector.load(path, **kwargs)


def _concept_retriever(path: Path, **kwargs: Any) -> Any:
    from medrank.retrieval.concept import ConceptRetriever

    return ConceptRetriever.load(path, **kwargs)


def _cdv_index(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.passages.inference import CDVIndex

    return CDVIndex.load(path, **kwargs)


def _cdv_model(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.passages.inference import TrainedCDV

    return TrainedCDV(path, **kwargs)


def _question_matcher(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.similar.inference import load_matcher

    _no_options("a question matcher", kwargs)
    return load_matcher(path)


def _history_reranker(path: Path, **kwargs: Any) -> Any:
    from medrank.pipelines.history.inference import load_reranker

    _no_options("a history re-ranker", kwargs)
    return load_reranker(path)[1]


def _index(path: Path, **kwargs: Any) -> Any:
    from medrank.index import load_index

    return load_index(path, **kwargs)


def _no_options(what: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TypeError(f"loading {what} takes no options, got {sorted(kwargs)}")


#: artefact kind → loader(path, **kwargs), in the order :func:`artefact_kind` tests them
KINDS = {
    "procedure-normalizer": _procedure_normalizer,
    "symptom-detector": _symptom_detector,
    "concept-retriever": _concept_retriever,
    "cdv-index": _cdv_index,
    "cdv-model": _cdv_model,
    "question-matcher": _question_matcher,
    "history-reranker": _history_reranker,
    "index": _index,
}
