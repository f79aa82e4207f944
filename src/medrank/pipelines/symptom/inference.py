"""Deployment side: a trained run → top-5 terms per query, optionally thresholded with β.

The paper's pre-consultation system shows the patient the 5 best terms; with a threshold it
only keeps terms whose similarity is at least ``β``, the score at which the validation
predictions reach precision ``α`` (calibrated at the end of training, stored in
``detector.json``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.encoders.memo import remembering_queries
from medrank.index.base import check_k
from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER, ensemble_members, open_run_index
from medrank.pipelines.symptom.crisis import CrisisProbe
from medrank.pipelines.symptom.crisis import shipped as shipped_crisis_probe
from medrank.pipelines.symptom.reranker import SERVED_BACKEND, TermReranker
from medrank.pipelines.symptom.self_report import SelfReportModel, dxy_self_report_model
from medrank.pipelines.symptom.sets import (
    DetectedTerm,
    SetCalibration,
    SetDetector,
    SymptomSet,
    run_memory,
    shipped_calibration,
    with_uncovered,
)
from medrank.pipelines.symptom.urgent import (
    CODE_SYSTEMS,
    DEFAULT_SIGNS,
    UrgentNotice,
    UrgentSigns,
    said_of_the_past,
)
from medrank.records import Query, Ranking

DEFAULT_K = 5
log = logging.getLogger(__name__)

#: the set-level detection the service serves beside each knowledge base's ranking
#: (and the DXY self-report model, which decides the 41 DXY symptoms itself)
__all__ = ["CODE_SYSTEMS", "DEFAULT_K", "DEFAULT_SIGNS", "SERVED_BACKEND", "ZERO_SHOT_VOCABULARIES", "DetectedTerm", "SelfReportModel",
           "SetCalibration", "SetDetector", "SymptomDetector", "SymptomSet", "TermReranker", "UrgentNotice", "UrgentSigns",
           "CrisisProbe", "dxy_self_report_model", "said_of_the_past", "shipped_crisis_probe",
           "ensemble_members", "set_detector_for_knowledge_base", "set_detector_for_run", "shipped_calibration",
           "with_uncovered", "zero_shot_concepts", "zero_shot_set_detector"]

#: the vocabularies a zero-shot set detector reads (:func:`zero_shot_set_detector`) → their language and encoder: the
#: service's knowledge bases of those names, as a fresh checkout serves them (no trained run)
ZERO_SHOT_VOCABULARIES: dict[str, tuple[str, str]] = {"hpo": ("en", "minilm"), "icd10cm": ("en", "minilm"),
                                                      "chip-cdn": ("zh", "e5-small")}


class SymptomDetector:
    """A :class:`~medrank.retrieval.concept.ConceptRetriever` over a trained encoder plus its β."""

    def __init__(self, retriever: Any, beta: float | None = None, k: int = DEFAULT_K) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.retriever = retriever
        self.beta = beta
        self.k = k

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str], candidates: str = "gold", backend: str = "torch",
             search: str = "exact") -> SymptomDetector:
        """Load ``RUN/index-<candidates>`` and the calibrated β of a run written by ``medrank train``;
        ``backend`` / ``search`` as :func:`~medrank.pipelines.symptom.artefacts.prepare_for_serving` (a faster
        query encoder and approximate search for serving; the defaults keep the run as trained)."""

        run = Path(run_dir)
        meta_path = run / DETECTOR_MARKER
        if not meta_path.exists():
            raise FileNotFoundError(f"{run} is not a trained symptom run (no {DETECTOR_MARKER}); train one with `medrank train`")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if candidates not in meta["candidates"]:
            raise ValueError(f"{run} has indexes for {sorted(meta['candidates'])}, not {candidates!r}")
        retriever = open_run_index(run, run / meta["candidates"][candidates], backend, search)
        return cls(retriever, meta.get("beta", {}).get(candidates), int(meta.get("k", DEFAULT_K)))

    def calibrate(self, dataset: Any, alpha: float) -> float | None:
        """Re-calibrate β so that the top-``k`` predictions on ``dataset`` are gold with precision ``alpha``."""
        from medrank.pipelines.symptom.evaluation import detection_threshold

        self.beta = detection_threshold(None, dataset, self.retriever, alpha, k=self.k)
        return self.beta

    @staticmethod
    def validation_set(run_dir: str | os.PathLike[str]) -> Any:
        """The validation split the run was trained against (from its ``config.json``)."""
        from medrank.pipelines.symptom.config import SymptomConfig
        from medrank.pipelines.symptom.task import load_task_data

        cfg = json.loads((Path(run_dir) / "config.json").read_text(encoding="utf-8"))
        return load_task_data(SymptomConfig.from_dict(cfg)).valid

    def detect(
        self,
        queries: Sequence[str | Query] | str | Query,
        k: int | None = None,
        threshold: bool | float = False,
    ) -> list[Ranking]:
        """Top-``k`` terms per query; ``threshold=True`` keeps only scores ``>= β`` (a float sets β)."""
        rankings = self.retriever.search(queries, k=self.k if k is None else check_k(k))
        beta = self.beta if threshold is True else (float(threshold) if threshold is not False else None)
        if threshold is True and beta is None:
            raise ValueError("this run has no calibrated beta; pass a float threshold instead")
        if beta is None:
            return rankings
        out = []
        for r in rankings:
            keep = [(i, s) for i, s in zip(r.ids, r.scores, strict=True) if s >= beta]
            out.append(Ranking.from_pairs(r.query_id, keep))
        return out

    def describe(self, ranking: Ranking) -> list[dict[str, Any]]:
        """A ranking as rows of ``{"id", "name", "score"}`` (and ``"codes"`` where the term has them)."""
        return self.retriever.describe(ranking)


def _lexicon(language: str | None, data_root: str | os.PathLike[str] | None) -> Any:
    """The words a Chinese complaint is cut at (:func:`~medrank.pipelines.symptom.sets.span_lexicon`: the DXY surface
    lexicon and the symptom chapter's names); ``None`` for English, or where the DXY data is missing."""
    if language != "zh":
        return None
    from medrank.pipelines.symptom.sets import span_lexicon

    return span_lexicon(data_root)


def set_detector_for_run(detector: SymptomDetector, run_dir: str | os.PathLike[str], candidates: str = "vocab",
                         language: str = "zh", data_root: str | os.PathLike[str] | None = None,
                         reranker_backend: str | None = "torch") -> SetDetector | None:
    """A :class:`SetDetector` over an already loaded trained run (its retriever, no second copy of the index), with
    the set calibration the run holds (``RUN/sets-<candidates>.json``, and ``RUN/sets-memory.json`` when the
    calibration reads one); ``None`` when it holds none, or when either cannot be read (logged: the run is then
    served as a ranking).

    A run with a trained re-ranker calibrated for ``candidates`` (``RUN/reranker/sets-<candidates>.json``,
    :mod:`~medrank.pipelines.symptom.reranker`) is served re-ranked, on ``reranker_backend`` (``None``: not
    re-ranked; ``"auto"``: :data:`~medrank.pipelines.symptom.reranker.SERVED_BACKEND`); one that cannot be read is
    logged and the run is served without it."""
    path = Path(run_dir) / f"sets-{candidates}.json"
    reranker = None
    if reranker_backend is not None:
        try:
            reranker = TermReranker.load_calibrated(run_dir, candidates, detector.retriever.concepts, reranker_backend)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            log.warning("%s: its re-ranker cannot be loaded (%s); served without it", Path(run_dir).name, exc)
        if reranker is not None:
            path = TermReranker.calibration_path(run_dir, candidates)
    if not path.exists():
        return None
    try:
        sets = SetDetector.from_retriever(detector.retriever, calibration=SetCalibration.load(path), language=language,
                                          lexicon=_lexicon(language, data_root), name=f"{Path(run_dir).name}:{candidates}",
                                          memory=run_memory(run_dir), reranker=reranker)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: its set decision cannot be read (%s); served as a ranking", Path(run_dir).name, exc)
        return None
    sets.use_small_talk(detector.retriever.index, detector.retriever.concepts.values(), data_root)
    return sets


def zero_shot_concepts(vocabulary: str, data_root: str | os.PathLike[str] | None = None) -> list[Any]:
    """The terms of a :data:`ZERO_SHOT_VOCABULARIES` vocabulary, as the service's knowledge base of that name holds
    them: HPO with MedQuAD's everyday wordings, ICD-10-CM's signs and symptoms, ICD-10 Beijing (CHIP-CDN)."""
    if vocabulary == "hpo":
        from medrank.data.consumer import hpo_with_consumer_wordings

        return hpo_with_consumer_wordings(data_root)
    if vocabulary == "icd10cm":
        from medrank.data.icd10cm import is_symptom_code, load_icd10cm

        return [c for c in load_icd10cm() if is_symptom_code(c.id)]
    if vocabulary == "chip-cdn":
        from medrank.data.chip_cdn import load_chip_cdn_vocabulary

        return list(load_chip_cdn_vocabulary(data_root))
    raise ValueError(f"no zero-shot set detection over {vocabulary!r}; known: {', '.join(ZERO_SHOT_VOCABULARIES)}")


def zero_shot_set_detector(vocabulary: str, data_root: str | os.PathLike[str] | None = None,
                           cache: str | os.PathLike[str] | None = None, encoder: str | None = None,
                           show_progress: bool = True) -> SetDetector:
    """A set detector over ``vocabulary`` (``hpo``, ``icd10cm`` or ``chip-cdn``) with no trained run: the pretrained
    encoder's hybrid index (dense + BM25, RRF) with the calibration shipped for it (:func:`shipped_calibration`),
    the DXY words for Chinese pieces, the small-talk gate for English; what the service's ``/symptoms`` decides over
    that knowledge base on a fresh checkout (its queries there may run on an ONNX backend). ``encoder``: another
    model (a folder or hub id) in place of the default; the shipped calibration was fitted for the default.

    The index is built once (the vocabulary's entries encoded: a minute or two on a CPU, ``show_progress``) and kept
    under ``cache`` (default ``$MEDRANK_CACHE/zero-shot-sets``), keyed by the vocabulary's contents and the encoder's
    files; later calls load it in seconds. Queries are never written to the cache."""
    import hashlib

    from medrank.config import cache_dir
    from medrank.encoders import CachedEncoder, load_encoder
    from medrank.retrieval.concept import CONCEPTS_FILE, ConceptRetriever, vocabulary_digest

    if vocabulary not in ZERO_SHOT_VOCABULARIES:
        raise ValueError(f"no zero-shot set detection over {vocabulary!r}; known: {', '.join(ZERO_SHOT_VOCABULARIES)}")
    language, default_encoder = ZERO_SHOT_VOCABULARIES[vocabulary]
    calibration = shipped_calibration(vocabulary, "hybrid")
    if calibration is None:  # pragma: no cover - the package ships one per vocabulary above
        raise FileNotFoundError(f"no shipped set calibration for {vocabulary} (calibrations/{vocabulary}-hybrid.json)")
    concepts = zero_shot_concepts(vocabulary, data_root)
    query_encoder = load_encoder(encoder or default_encoder)
    key = json.dumps([vocabulary_digest(concepts), query_encoder.fingerprint()], sort_keys=True, default=str)
    folder = Path(cache or cache_dir() / "zero-shot-sets") / f"{vocabulary}-{hashlib.sha1(key.encode()).hexdigest()[:12]}"
    if not (folder / CONCEPTS_FILE).exists():
        # the entries' vectors go through the shared embedding cache (a rebuild, or the bench's index, reuses them)
        entries = CachedEncoder(query_encoder, cache_dir() / "embeddings")
        log.info("zero-shot %s: indexing %d terms (first use only)", vocabulary, len(concepts))
        ConceptRetriever.build(concepts, method="hybrid", encoder=entries, language=language,
                               show_progress=show_progress).save(folder)
    retriever = ConceptRetriever.load(folder, encoder=query_encoder)
    lexicon = _lexicon(language, data_root)
    detector = SetDetector.from_retriever(retriever, language=language, name=vocabulary, calibration=calibration,
                                          lexicon=lexicon)
    if language == "en":
        detector.use_small_talk(retriever.index, retriever.concepts.values(), data_root)
        if "lay_words" in calibration.rules:  # the vocabulary's words are encoded only where the rule reads them
            detector.use_lay_words(word_encoder(retriever.index), cache_dir() / "embeddings")
    return detector


def word_encoder(index: Any = None, encoder: Any = None) -> Any:
    """The encoder the ``lay_words`` rule compares words by: ``encoder``, else the one dense encoder of ``index``
    (:func:`~medrank.pipelines.symptom.small_talk.dense_view`; ``None`` for an index without one, or an ensemble of
    several), outside any query memo or disk cache around it (a complaint's words are kept nowhere)."""
    from medrank.encoders import CachedEncoder
    from medrank.encoders.memo import QueryMemo
    from medrank.index.dense import DenseIndex
    from medrank.pipelines.symptom.small_talk import dense_view

    if encoder is None and index is not None:
        dense = dense_view(index)
        encoder = dense.encoder if isinstance(dense, DenseIndex) else None
    while isinstance(encoder, (QueryMemo, CachedEncoder)):
        encoder = encoder.encoder
    return encoder


def set_detector_for_knowledge_base(kb: Any, data_root: str | os.PathLike[str] | None = None) -> SetDetector | None:
    """A :class:`SetDetector` over a service knowledge base with the calibration shipped for it
    (``shipped_calibration``); ``None`` when none was fitted for that knowledge base and method."""
    from medrank.config import cache_dir

    calibration = shipped_calibration(kb.info.name, kb.info.method, trained=bool(kb.info.trained))
    if calibration is None:
        return None
    sets = SetDetector.from_knowledge_base(kb, calibration=calibration, lexicon=_lexicon(kb.info.language, data_root))
    # small talk names no finding: gated on the knowledge base's dense search, an index's dense part or a store's
    # dense scores (``dense_scores`` and ``encoder``); a BM25-only knowledge base has none
    backend = kb.backend
    lay = "lay_words" in calibration.rules  # the vocabulary's words are encoded only where the rule reads them
    if getattr(backend, "retriever", None) is not None:
        sets.use_small_talk(backend.retriever.index, kb.concepts.values(), data_root)
        if lay:
            sets.use_lay_words(word_encoder(backend.retriever.index), cache_dir() / "embeddings")
    elif callable(getattr(backend, "dense_scores", None)) and getattr(backend, "encoder", None) is not None:
        # the store's search, its dense scores and the small-talk index share one query memo: a piece is encoded once
        backend.encoder = remembering_queries(backend.encoder)
        sets.use_small_talk(backend.dense_scores, kb.concepts.values(), data_root, encoder=backend.encoder)
        if lay:
            sets.use_lay_words(word_encoder(encoder=backend.encoder), cache_dir() / "embeddings")
    return sets
