"""Building inquiry engines from the visible data: carve-outs, likelihood fitting, calibration.

The visible records are carved (seed 13, 20 %) into a training part and a validation part. The
likelihood tables are fitted on the training part; the stopping rule and the differential's
temperature / cut-off are tuned on an inner split of the training part (seed 14, 20 %) with tables
fitted on the rest, so the validation carve-out the reports use is never seen.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrank.pipelines.history.inquiry.engine import Calibration, InquiryEngine
from medrank.pipelines.history.inquiry.kb import (
    SEED,
    Evidence,
    InquiryInputError,
    Patient,
    carve,
    dxy_question_template,
    dxy_surface_pairs,
    load_ddxplus_kb,
    read_ddxplus_patients,
    read_dxy_patients,
    read_vocabulary,
    to_the_writer,
)
from medrank.pipelines.history.inquiry.posterior import fit_ddxplus, fit_dxy

log = logging.getLogger(__name__)

#: weights of the self-report prior tried by :func:`calibrate` (0: class prior and self-reported findings)
TEXT_WEIGHTS = (0.0, 0.5, 1.0)
#: DDXPlus first stage: weight of P(positive answer) added to a question's information gain (see
#: :class:`.first_stage.InformationGain`); chosen on the inner split of the training part (held-out
#: positive-evidence recall at 30 questions, GTPA@1 unchanged across 0.01-0.2)
PRESENCE_WEIGHT_EN = 0.05
#: turn budget of each protocol
BUDGETS = {"en": 30, "zh": 10}
DDXPLUS_PATIENTS = "release_test_patients_mini_version.txt"


@dataclass
class Corpus:
    """A language's knowledge base and visible records, carved into train / valid."""

    language: str
    folder: Path
    train: list[Patient]
    valid: list[Patient]
    evidences: dict[str, Evidence] = field(default_factory=dict)
    support: dict[str, set[str]] = field(default_factory=dict)
    condition_labels: dict[str, str] = field(default_factory=dict)
    symptoms: list[str] = field(default_factory=list)
    diseases: list[str] = field(default_factory=list)
    #: how the collection's doctors ask about a symptom, ``{}`` for its name (:func:`.kb.dxy_question_template`)
    question_template: str = "{}"

    def read_test(self, path: Path) -> list[Patient]:
        """Patients of another split in the visible format (a DDXPlus CSV; a DXY folder)."""
        if self.language == "en":
            return read_ddxplus_patients(path, self.evidences, list(self.support))
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{path}: expected a folder laid out like dxy-dialog (dialogue file + goal file)")
        return read_dxy_patients(path, self.symptoms, self.diseases)


def load_corpus(language: str, data_root: str | Path | None = None) -> Corpus:
    from medrank.config import dataset_dir

    if language == "en":
        folder = dataset_dir("ddxplus", data_root)
        evidences, support, labels = load_ddxplus_kb(folder)
        patients = read_ddxplus_patients(folder / DDXPLUS_PATIENTS, evidences, list(support))
        tr, va = carve(len(patients))
        return Corpus("en", folder, [patients[i] for i in tr], [patients[i] for i in va], evidences=evidences,
                      support=support, condition_labels=labels)
    if language == "zh":
        folder = dataset_dir("dxy-dialog", data_root)
        symptoms = read_vocabulary(folder / "symptoms_dxy.txt")
        diseases = read_vocabulary(folder / "diseases_dxy.txt")
        patients = read_dxy_patients(folder, symptoms, diseases)
        tr, va = carve(len(patients))
        return Corpus("zh", folder, [patients[i] for i in tr], [patients[i] for i in va], symptoms=symptoms,
                      diseases=diseases, condition_labels={d: d for d in diseases},
                      question_template=dxy_question_template(folder, symptoms))
    raise ValueError(f"language must be 'en' or 'zh', got {language!r}")


def fit_engine(corpus: Corpus, train: list[Patient], calibration: Calibration | None = None,
               differential_file: Path | None = None) -> InquiryEngine:
    """An uncalibrated (or given-calibration) engine with tables fitted on ``train``.

    English: the differential model is fitted on the states the engine's own inquiries reach on
    ``train`` (``calibration.budget`` questions each); ``differential_file`` keeps its weights (read
    when it exists and matches, written otherwise)."""
    cal = calibration or Calibration(budget=BUDGETS[corpus.language])
    if corpus.language == "en":
        model = fit_ddxplus(train, corpus.evidences, corpus.support)
        labels = {n: e.question for n, e in corpus.evidences.items()}
        meanings = {n: e.meanings for n, e in corpus.evidences.items() if e.meanings}
        evidences = corpus.evidences

        def english_detector() -> Any:
            from medrank.pipelines.history.inquiry.findings import EnglishDetector

            return EnglishDetector(evidences)

        from medrank.pipelines.history.inquiry.findings import follow_up_questions

        engine = InquiryEngine("en", model, labels, corpus.condition_labels, cal, demographics=True,
                               name="ddxplus-kb", detector_factory=english_detector, value_meanings=meanings,
                               presence_weight=PRESENCE_WEIGHT_EN, follow_ups=follow_up_questions(evidences))
        engine.differential_model = fit_differential(engine, train, cal.budget, differential_file)
        return engine
    from medrank.pipelines.history.inquiry.textprior import TextPrior

    model = fit_dxy(train, corpus.symptoms, corpus.diseases)
    text_prior = TextPrior(corpus.diseases).fit([p.text for p in train], [p.condition for p in train])
    folder, symptoms = corpus.folder, corpus.symptoms
    train_ids = {p.id for p in train}
    # DXY's consultations are about children: its questions name the child ("请问孩子最近有{}吗?")
    to_writer = to_the_writer(corpus.question_template)

    def chinese_detector() -> Any:
        from medrank.pipelines.history.inquiry.findings import ChineseDetector

        pairs = dxy_surface_pairs(folder)
        # surface forms only from the training dialogues (goal ids follow the dialogue order)
        kept = [pair for i, pair in enumerate(pairs) if f"train-{i}" in train_ids or str(i) in train_ids]
        return ChineseDetector(symptoms, kept or pairs)

    return InquiryEngine("zh", model, {s: s for s in corpus.symptoms}, corpus.condition_labels, cal,
                         name="dxy-kb", detector_factory=chinese_detector, text_prior=text_prior,
                         text_weight=cal.text_weight, questions={s: corpus.question_template.format(s) for s in symptoms},
                         questions_to_writer={s: to_writer.format(s) for s in symptoms} if to_writer else None,
                         population="children")


def fit_differential(engine: InquiryEngine, train: list[Patient], budget: int,
                     saved: Path | None = None) -> Any:
    """The DDXPlus differential model, fitted on where the engine's inquiries of ``budget`` questions
    end on the training patients (or read from ``saved``)."""
    from medrank.pipelines.history.inquiry.differential import DifferentialModel
    from medrank.pipelines.history.inquiry.simulate import inquiry_states

    members = DifferentialModel(engine.model)
    if saved is not None and saved.is_file():
        try:
            return members.load(saved)
        except (OSError, ValueError, KeyError):
            pass  # stale or foreign file: fit again and overwrite it
    members.fit(inquiry_states(engine, train, budget), [p.differential for p in train])
    if saved is not None:
        saved.parent.mkdir(parents=True, exist_ok=True)
        members.save(saved)
    return members


def calibrate(corpus: Corpus, budget: int | None = None) -> tuple[Calibration, dict[str, Any]]:
    """Tune the stopping rule and the differential on an inner split of the training records."""
    from medrank.pipelines.history.inquiry.simulate import run_episodes, tune

    budget = budget or BUDGETS[corpus.language]
    inner, held = carve(len(corpus.train), seed=SEED + 1)
    engine = fit_engine(corpus, [corpus.train[i] for i in inner])
    tuning = [corpus.train[i] for i in held]
    best: tuple[float, Calibration, dict[str, Any]] | None = None
    # the self-report prior changes which questions are asked, so each weight is a run of its own
    for weight in TEXT_WEIGHTS if engine.text_prior is not None else (0.0,):
        engine.text_weight = weight
        engine.calibration = Calibration(budget=budget, text_weight=weight)
        episodes = run_episodes(engine, tuning, budget, rerank=False)
        info = tune(engine, episodes, budget)
        if best is None or info["objective"] > best[0]:
            best = (info["objective"], engine.calibration, {**info, "text_weight": weight})
    assert best is not None
    cal, info = best[1], best[2]
    if corpus.language == "en":  # the outside class, fitted by leaving conditions out of the inner tables
        from medrank.pipelines.history.inquiry.outside import fit_outside, leave_conditions_out

        cases = leave_conditions_out(list(corpus.support), [corpus.train[i] for i in inner], tuning,
                                     fold_engine(corpus), seed=SEED)
        cal.outside_prior, cal.outside_leak, cal.outside_shrink, info["outside"] = fit_outside(cases)
        cal.tuned_on = {**cal.tuned_on, "outside": info["outside"]}
    return cal, info


def fold_engine(corpus: Corpus) -> Any:
    """``make(patients, conditions)``: an English engine whose tables know only ``conditions``, fitted on
    ``patients`` (closed world, no differential model: what :mod:`.outside` reads states with)."""
    labels = {n: e.question for n, e in corpus.evidences.items()}

    def make(patients: list[Patient], conditions: list[str]) -> InquiryEngine:
        model = fit_ddxplus(patients, corpus.evidences, {c: corpus.support[c] for c in conditions})
        return InquiryEngine("en", model, labels, corpus.condition_labels, Calibration(budget=BUDGETS["en"]),
                             demographics=True, name="ddxplus-kb", presence_weight=PRESENCE_WEIGHT_EN)

    return make


#: complaints whose inquiry states check a re-ranker backend against torch (``backend="auto"``)
CHECK_COMPLAINTS = {
    "en": ["I have a headache and a fever since yesterday.", "I have chest pain when I breathe in and a cough.",
           "My throat is sore and my nose is runny.", "I am short of breath and my ankles are swollen."],
    "zh": ["孩子发烧咳嗽两天了", "宝宝拉肚子，还有点呕吐", "孩子流鼻涕打喷嚏", "宝宝出皮疹，有点发热"],
}


def reranker_checks(engine: InquiryEngine, questions: int = 2) -> list[tuple[str, list[str]]]:
    """(dialogue text, first-stage candidate questions) of inquiry states reached from a few complaints:
    the opening, then after each of ``questions`` answered questions (first option / "yes")."""
    from medrank.pipelines.history.inquiry.engine import Finding
    from medrank.pipelines.history.inquiry.posterior import PRESENT

    out = []
    for complaint in CHECK_COMPLAINTS[engine.language]:
        findings, turns = engine.detect_findings(complaint), [complaint]
        for step in range(questions + 1):
            ranked = engine.next_questions(turns, findings, k=engine.rerank_k, rerank=False)
            if len(ranked) < 2:
                break
            out.append((engine.reranker_text(turns), [q.text for q in ranked]))
            if step == questions:
                break
            asked = ranked[0].finding
            options = engine.finding_options(asked)
            value = options[0][0] if options else PRESENT
            findings = [*findings, Finding(asked, value, f"question:{asked}")]
            turns = [*turns, ranked[0].text, engine.value_label(asked, value)]
    return out


def attach_reranker(engine: InquiryEngine, run: Path, backend: str = "torch") -> InquiryEngine:
    """Let a saved history re-ranker (global / cross- / bi-encoder) reorder the first stage's candidates.

    ``backend``: ``"torch"``, ``"onnx"`` / ``"onnx-int8"`` (ONNX Runtime, the global re-ranker), or
    ``"auto"``: the fastest of them whose scores agree with torch's on inquiry states of this engine
    (:func:`reranker_checks`). What runs it, and why, is kept in ``engine.reranker_backend``.
    """
    from medrank.pipelines.history.evaluation import open_reranker

    checks = reranker_checks(engine) if backend == "auto" else None
    loaded = open_reranker(run, backend, checks)
    model = loaded.scorer

    def score(dialogue: str, texts: Any) -> Any:
        return model.score(dialogue, list(texts))

    engine.reranker = score
    engine.reranker_backend = {"kind": loaded.kind, "backend": loaded.backend, "reason": loaded.reason}
    engine.name = f"{engine.name}+{loaded.kind}-reranker"
    return engine


_CACHE: dict[tuple[str, str], tuple[Corpus, Calibration, dict[str, Any]]] = {}
#: bump when the fitting or tuning changes, so saved calibrations and models are not reused
CALIBRATION_VERSION = 7


def _cache_file(corpus: Corpus, kind: str, suffix: str) -> Path:
    """Where what was tuned / fitted on this data is kept (under the cache; keyed by the data files'
    names, sizes and modification times, so new data recalibrates)."""
    from medrank.config import cache_dir

    stamp = hashlib.sha256(str(CALIBRATION_VERSION).encode())
    for f in sorted(p for p in corpus.folder.iterdir() if p.is_file()):
        st = f.stat()
        stamp.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return cache_dir() / "inquiry" / f"{kind}-{corpus.language}-{stamp.hexdigest()[:16]}{suffix}"


def _calibration_file(corpus: Corpus) -> Path:
    return _cache_file(corpus, "calibration", ".json")


def load_engine(language: str, data_root: str | Path | None = None, model: Path | None = None,
                backend: str = "torch") -> InquiryEngine:
    """English engine on DDXPlus, Chinese on DXY, fitted on the training carve-out of the visible data.

    ``model``: a re-ranker run folder (``medrank train`` of a ``history-*`` task) that reorders the
    first stage's candidates given the dialogue; ``backend`` runs it (see :func:`attach_reranker`).
    """
    if language not in ("en", "zh"):
        raise InquiryInputError(f"language must be 'en' (DDXPlus) or 'zh' (DXY), got {language!r}")
    return build_engine(language, data_root=data_root, reranker_run=model, backend=backend)


def build_engine(language: str, data_root: str | Path | None = None, reranker_run: Path | None = None,
                 backend: str = "torch") -> InquiryEngine:
    """Engine fitted on the training carve-out and calibrated on its inner split (the calibration is
    kept per process and as JSON in the cache; the evaluators always recalibrate)."""
    key = (language, str(data_root))
    if key not in _CACHE:
        corpus = load_corpus(language, data_root)
        saved = _calibration_file(corpus)
        try:
            stored = json.loads(saved.read_text(encoding="utf-8"))
            cal, info = Calibration(**stored["calibration"]), stored["info"]
        except (OSError, ValueError, KeyError, TypeError):
            cal, info = calibrate(corpus)
            from medrank.utils.io import atomic_write_json

            saved.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(saved, {"calibration": cal.__dict__, "info": info})
        _CACHE[key] = (corpus, cal, info)
    corpus, cal, _ = _CACHE[key]
    engine = fit_engine(corpus, corpus.train, Calibration(**{**cal.__dict__}),
                        differential_file=_cache_file(corpus, "differential", ".npz"))
    if reranker_run is not None:
        attach_reranker(engine, Path(reranker_run), backend)
    if backend != "torch" and engine.language == "en":
        serve_detector_on_onnx(engine)
    return engine


def serve_detector_on_onnx(engine: InquiryEngine) -> None:
    """Have the English finding detector read on ONNX Runtime in float32 where its vectors agree with torch's
    (:func:`medrank.encoders.choose_backend` over the detector's own descriptions), not in int8: a finding is read at
    a cosine threshold set on float32 vectors. A few times faster on a CPU for the handful of clauses a request
    holds; the detector is built when first used, and the choice is kept in ``engine.detector_backend``."""
    def served(detector: Any) -> Any:
        from medrank.encoders import TransformerEncoder, choose_backend

        encoder = getattr(detector, "encoder", None)
        if isinstance(encoder, TransformerEncoder):
            choice = choose_backend(encoder, detector.descriptions[:16], prefer=("onnx",))
            detector.encoder = choice.encoder
            engine.detector_backend = {"backend": choice.backend, "reason": choice.reason}
        return detector

    engine.when_detector_built(served)


def prepare_engines(languages: tuple[str, ...] = ("en", "zh"), data_root: str | Path | None = None) -> None:
    """Tune and fit each language's engine once, so its calibration and differential weights are in the cache.

    Pure-Python work on one core: the service runs this in a side process at start-up, beside its
    knowledge-base encodes, and :func:`load_engine` then reads what it wrote. A language whose files are
    cached already, or whose data is missing, is skipped (the service reports the latter itself when it
    loads the engine).
    """
    for language in languages:
        try:
            if not engine_prepared(language, data_root):
                build_engine(language, data_root=data_root)
        except (OSError, InquiryInputError) as exc:
            log.warning("inquiry engine %s not prepared: %s", language, exc)


def engine_prepared(language: str, data_root: str | Path | None = None) -> bool:
    """True when ``language``'s calibration and differential weights for its data are in the cache already."""
    corpus = load_corpus(language, data_root)
    return _calibration_file(corpus).exists() and _cache_file(corpus, "differential", ".npz").exists()
