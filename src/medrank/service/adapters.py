"""One adapter per endpoint: each wraps a pipeline and says which model served the answer.

Adapters are plain objects built by :mod:`medrank.service.build` (or directly
in tests) and are called from worker threads; they hold no per-request state.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index import BM25Index
from medrank.index.topk import topk_stable
from medrank.pipelines.history.inference import EN_YES_NO_QUESTION, NextQuestionRanker, NoQuestionBankError
from medrank.service.backends import KnowledgeBase
from medrank.service.calibration import FEATURES as CALIBRATION_FEATURES
from medrank.service.calibration import same_text
from medrank.text import HAN_RANGES, LANGUAGE_NAMES, has_han, identify
from medrank.utils.vectors import unit_rows


def resolve_language(text: str, language: str) -> str:
    """``language``, or the language :func:`medrank.text.identify` finds when it is ``auto``.

    Raises :class:`UnavailableError` (→ 404) when the text is in neither served language: the knowledge bases are
    English and Chinese, and a nearest neighbour in the wrong language would be a confident wrong answer."""
    if language != "auto":
        return language
    found = identify(text)
    if found.language == "other":
        raise UnsupportedLanguageError(
            f"the text {found.reads}: medrank serves English and Chinese only (pass language='en' or 'zh' to search anyway)",
            "" if found.code == "none" else found.name,
        )
    return found.language


def conversation_language(dialogue: Sequence[dict[str, str]], fallback: str, language: str) -> str:
    """``language``, or for ``auto`` the language of the first patient turn (short answers, "ok", "38.5", say little
    about it), else of ``fallback`` (:func:`resolve_language`)."""
    opening = next((t["text"] for t in dialogue if t["speaker"] == "patient"), None)
    return resolve_language(opening if opening is not None else fallback, language)


class UnavailableError(LookupError):
    """The requested knowledge base / language is not served by this deployment (→ 404 / 503)."""


class UnsupportedLanguageError(UnavailableError):
    """The text is in neither served language (→ 404 whose error entry is typed ``unsupported_language``);
    ``read_as`` is the language it reads as (``""``: no letters), so a page can say so in its own words."""

    def __init__(self, message: str, read_as: str) -> None:
        super().__init__(message)
        self.read_as = read_as


class KnowledgeBaseLanguageError(UnavailableError):
    """The text reads in another language than the knowledge base asked for (→ 404 whose error entry is typed
    ``knowledge_base_language``); ``kb_reads`` and ``text_reads`` name the two languages, so a page can say which
    list to choose in its own words."""

    def __init__(self, message: str, kb_reads: str, text_reads: str) -> None:
        super().__init__(message)
        self.kb_reads, self.text_reads = kb_reads, text_reads


class StillBuildingError(LookupError):
    """What the request needs is still being built in the background (→ 503 with ``Retry-After``)."""

    def __init__(self, what: str, step: Any) -> None:
        from medrank.service.readiness import human_duration

        eta = step.eta_s() if step is not None else None
        self.retry_after_s = max(1, math.ceil(eta)) if eta is not None else 10
        when = f"about {human_duration(eta)}" if eta is not None else "a little while"
        detail = step.detail() if step is not None else "building"
        super().__init__(f"{what} is still being built ({detail}); try again in {when}")


@dataclass
class PipelineInfo:
    """What ``/models`` reports for one pipeline."""

    model: str
    version: str
    trained: bool
    details: dict[str, Any] = field(default_factory=dict)


# -- /symptoms ----------------------------------------------------------------------------------------
#: Chinese words in another language's text: a run of Han characters, with what stands between two of them (Chinese
#: punctuation, digits, spaces: "头痛，发烧两天")
_HAN_PART = re.compile(f"[{HAN_RANGES}](?:[{HAN_RANGES}\\d\\s，。、；：！？（）]*[{HAN_RANGES}])?")


def han_parts(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` offsets of the Chinese words of a text in another language ("I have a headache and 发烧")."""
    return [m.span() for m in _HAN_PART.finditer(text)]


#: English words in a Chinese text: a run of Latin words (three letters or more, not all capitals: "CT", "MRI", "PICC"
#: are abbreviations a Chinese record writes as they are, and the Chinese list reads them)
_LATIN_WORD = r"(?<![A-Za-z])(?![A-Z]+(?![A-Za-z]))[A-Za-z][A-Za-z'-]{2,}"
_LATIN_PART = re.compile(rf"{_LATIN_WORD}(?:[ ]+{_LATIN_WORD})*")


def latin_parts(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` offsets of the English words of a Chinese text ("孩子拉肚子，还有 vomiting")."""
    return [m.span() for m in _LATIN_PART.finditer(text)]


class SymptomService:
    """Patient text → top-k terms of a knowledge base (HPO / ICD-10-CM for English, CHIP-CDN ICD-10 for Chinese).

    Knowledge bases join as they are built (:meth:`add`, an atomic swap of the dictionaries a request reads);
    ``pending`` names those still building (name → (language, build step)): asking for one answers 503 with
    its ETA, and ``auto`` uses another ready knowledge base of the language meanwhile.
    """

    #: the knowledge base ``auto`` prefers per language, best first
    PREFERENCE = {"en": ("hpo", "icd10cm"), "zh": ("chip-cdn",)}
    #: under ``auto``, the set of a knowledge base is completed by another one's terms on words it leaves uncovered
    #: (ICD-10 Beijing has no plain 流涕 for 流鼻涕; the DXY symptoms have it): each such term names its ``source``
    COMPLEMENTS = {"chip-cdn": "dxy"}

    def __init__(self, kbs: dict[str, KnowledgeBase], defaults: dict[str, str] | None = None,
                 pending: dict[str, tuple[str, Any]] | None = None, set_detectors: dict[str, Any] | None = None,
                 urgent_signs: Any = None, crisis_readers: dict[str, Callable[[str], Any]] | None = None) -> None:
        from medrank.pipelines.symptom.inference import UrgentSigns

        if not kbs and not pending:
            raise ValueError("no knowledge base to detect symptoms with")
        for name, detector in (set_detectors or {}).items():
            if not callable(getattr(detector, "detect", None)):
                raise ValueError(f"set_detectors[{name!r}] must have detect(text) -> SymptomSet")
        #: knowledge base name → a set detector over it (``medrank.pipelines.symptom.sets.SetDetector``): the
        #: response then carries the decided set (spans, probabilities) and its ranked alternatives
        self.set_detectors = dict(set_detectors or {})
        self.kbs = dict(kbs)
        self.pending = dict(pending or {})
        self.defaults = dict(defaults) if defaults is not None else self._defaults(self.kbs)
        #: the signs that put an urgent notice above a decided set (``medrank.pipelines.symptom.urgent``; default:
        #: the file shipped with the package)
        self.urgent_signs = urgent_signs if urgent_signs is not None else UrgentSigns.load()
        #: language → text → the span of the clause read as a thought of suicide or self-harm, or None (a probe on
        #: the served encoder's embeddings, ``medrank.pipelines.symptom.crisis``); it raises the ``self-harm`` sign
        self.crisis_readers = dict(crisis_readers or {})
        #: knowledge base name → (that knowledge base, its term names → ids), for :meth:`urgent_for_names`
        self._names: dict[str, tuple[KnowledgeBase, dict[str, str]]] = {}
        for lang, name in self.defaults.items():
            if name not in kbs:
                raise ValueError(f"default knowledge base {name!r} for {lang} is not loaded")

    @classmethod
    def _defaults(cls, kbs: dict[str, KnowledgeBase]) -> dict[str, str]:
        out = {}
        for lang, order in cls.PREFERENCE.items():
            found = next((n for n in order if n in kbs), None)
            if found:
                out[lang] = found
        return out

    def add(self, name: str, kb: KnowledgeBase, set_detector: Any = None) -> None:
        """Serve ``kb`` from now on, with its ``set_detector`` when there is one (new dictionaries swapped in whole:
        a request sees the old or the new state)."""
        if set_detector is not None:
            self.set_detectors = {**self.set_detectors, name: set_detector}
        kbs = {**self.kbs, name: kb}
        defaults = self._defaults(kbs)
        self.kbs, self.defaults = kbs, defaults
        self.pending = {n: v for n, v in self.pending.items() if n != name}

    def pick(self, language: str, kb: str) -> KnowledgeBase:
        kbs, pending = self.kbs, self.pending
        if kb != "auto":
            if kb in kbs:
                return kbs[kb]
            if kb in pending:
                raise StillBuildingError(f"the {kb} knowledge base", pending[kb][1])
            raise UnavailableError(f"unknown knowledge base {kb!r}; served: {sorted(kbs) + sorted(pending)}")
        name = next((n for n in self.PREFERENCE.get(language, ()) if n in kbs), None) or \
            next((n for n, b in kbs.items() if b.info.language == language), None)
        if name is None:
            waiting = next((n for n, (lang, _) in pending.items() if lang == language), None)
            if waiting is not None:
                raise StillBuildingError(f"the {waiting} knowledge base", pending[waiting][1])
            raise UnavailableError(f"no symptom knowledge base for language {language!r}")
        return kbs[name]

    def detect(self, query: str, language: str = "auto", kb: str = "auto", k: int = 5) -> dict[str, Any]:
        lang = resolve_language(query, language)
        base = self.pick(lang, kb)
        if language == "auto" and base.info.language != lang:
            # nearest neighbours across languages are confident wrong answers; an explicit language overrides this
            kb_reads, text_reads = (LANGUAGE_NAMES.get(x, x) for x in (base.info.language, lang))
            raise KnowledgeBaseLanguageError(
                f"knowledge base {base.info.name!r} holds {kb_reads} terms and the text reads as {text_reads}: choose a "
                f"knowledge base in {text_reads} ({lang!r}), or pass language={base.info.language!r} to search it anyway",
                kb_reads, text_reads)
        detector = self.set_detectors.get(base.info.name)
        found = self._decided(base, [query], kb == "auto")[0] if detector is not None else None
        unread: list[dict[str, Any]] = []
        if found is not None and kb == "auto" and lang in ("en", "zh"):
            found, unread = self._with_other_language(query, lang, found)
        # the set detector searched the whole text over this knowledge base already (to its own depth)
        ranked = getattr(found, "ranking", ())
        hits = base.hits(ranked)[:k] if ranked and k <= getattr(detector, "k", 0) else base.search([query], k)[0]
        out = {"model": base.info.model, "trained": base.info.trained, "language": lang, "kb": base.info.name,
               "results": [{"id": h.id, "name": h.name, "score": h.score, "codes": list(h.codes)} for h in hits]}
        if found is not None:
            out["terms"] = [_term(t) for t in found.terms]
            out["alternatives"] = [_term(t) for t in found.alternatives[:k]]
            out["urgent"] = [n.as_dict() for n in self.urgent(found.terms, base.info.name, lang, [query])]
        if unread:
            out["unread"] = unread
        if kb == "auto":
            # what auto would have chosen had it been built: the answer is the fallback's, and says so
            pending = self.pending
            preferred = self.PREFERENCE.get(lang, ())
            ahead = preferred[:preferred.index(base.info.name)] if base.info.name in preferred else preferred
            out["still_building"] = [n for n in ahead if n in pending]
        return out

    def urgent(self, terms: Sequence[Any], kb: str, language: str, texts: Sequence[str] = ()) -> list[Any]:
        """The urgent notices (``medrank.pipelines.symptom.inference.UrgentNotice``) for decided ``terms`` of knowledge
        base ``kb`` (a term decided by another list names it as its ``source``) and for the signs' own words in the
        patient's ``texts``, in ``language``. A term whose words (in the one text read) are said of a resolved past
        raises none ("I fainted once at a concert years ago")."""
        from medrank.pipelines.symptom.inference import said_of_the_past

        now = [t for t in terms if len(texts) != 1 or getattr(t, "span", None) is None
               or not said_of_the_past(texts[0], *t.span)]
        read = []
        reader = self.crisis_readers.get(language)
        if reader is not None and len(texts) == 1:
            span = reader(texts[0])
            if span is not None and not said_of_the_past(texts[0], *span):
                read.append(("self-harm", tuple(span)))
        return self._notices([(t.id, getattr(t, "source", None) or kb) for t in now], language, texts, read)

    def urgent_for_names(self, names: Sequence[str], language: str, texts: Sequence[str] = ()) -> list[Any]:
        """The urgent notices for symptoms known by name only (those a patient confirmed on the page, or
        ``/next-questions`` read), each looked up in the served lists (the language's own first), and for the signs'
        own words in the patient's ``texts``."""
        kbs = self.kbs
        order = list(dict.fromkeys([*self.PREFERENCE.get(language, ()), *(n for n in kbs if kbs[n].info.language == language),
                                    *kbs]))
        found = []
        for name in dict.fromkeys(names):
            kb = next((n for n in order if n in kbs and name in self._ids_by_name(n)), None)
            if kb is not None:
                found.append((self._ids_by_name(kb)[name], kb))
        return self._notices(found, language, texts)

    def _ids_by_name(self, kb: str) -> dict[str, str]:
        """Term name → id of a served list (built on first use; rebuilt when that list was swapped)."""
        base = self.kbs[kb]
        held = self._names.get(kb)
        if held is None or held[0] is not base:
            ids: dict[str, str] = {}
            for c in base.concepts.values():
                ids.setdefault(c.name, c.id)
            held = self._names[kb] = (base, ids)
        return held[1]

    def _notices(self, terms: Sequence[tuple[str, str]], language: str, texts: Sequence[str] = (),
                 read: Sequence[tuple[str, tuple[int, int]]] = ()) -> list[Any]:
        """The notices for ``(term id, knowledge base name)`` pairs, the patient's ``texts`` and the signs ``read``
        in the one text by another reader."""
        from medrank.pipelines.symptom.inference import CODE_SYSTEMS

        rows = []
        for cid, name in terms:
            base = self.kbs.get(name)
            concept = base.concepts.get(cid) if base is not None else None
            codes = tuple(concept.meta.get("codes", ())) if concept is not None else ()
            system = CODE_SYSTEMS.get(name) or ("hpo" if cid.startswith("HP:") else None)
            if system is None and codes and base is not None:  # a trained run's list of ICD-10 terms
                system = "icd10_beijing" if base.info.language == "zh" else "icd10cm"
            if system is not None:
                rows.append((system, cid, codes))
        keys = {sg.key for sg in self.urgent_signs.signs}  # a deployment's own signs file may have no such sign
        return self.urgent_signs.notices(rows, language, texts=texts, read=[r for r in read if r[0] in keys])

    def _decided(self, base: KnowledgeBase, texts: Sequence[str], complete: bool) -> list[Any]:
        """The set detector of ``base`` on ``texts``; with ``complete``, each set completed by the :data:`COMPLEMENTS`
        knowledge base's terms on words it leaves uncovered. One text is read alone, as ``/symptoms`` reads a
        complaint; several in one batch (an int8 query encoder may then read one slightly otherwise)."""

        def decide(detector: Any) -> list[Any]:
            return [detector.detect(texts[0])] if len(texts) == 1 else list(detector.detect_many(list(texts)))

        found = decide(self.set_detectors[base.info.name])
        complement = self.COMPLEMENTS.get(base.info.name) if complete else None
        other = self.set_detectors.get(complement) if complement in self.kbs else None
        if other is not None and self.kbs[complement].info.language == base.info.language:
            from medrank.pipelines.symptom.inference import with_uncovered

            found = [with_uncovered(f, o, complement) for f, o in zip(found, decide(other), strict=True)]
        return found

    def _with_other_language(self, query: str, lang: str, found: Any) -> tuple[Any, list[dict[str, Any]]]:
        """A text's decided set with its words of the other served language read by that language's ``auto`` list:
        the Chinese words of an English text ("I have a headache and 发烧": Headache, and 发热 from the chip-cdn list), the
        English words of a Chinese one ("孩子拉肚子，还有 vomiting": 稀便, and Vomiting from the hpo list). Each such term
        fills words no term of the text's own list covers (or covers unsurely, :func:`with_uncovered`) and is marked with
        the list that decided it; an English term placed on Chinese words alone is dropped (MiniLM cannot read them;
        e5-small, the Chinese list's encoder, reads English words). Second, the words left unread, with why (no list of
        that language served, or still being built)."""
        from medrank.pipelines.symptom.inference import SymptomSet, with_uncovered

        other_lang = "zh" if lang == "en" else "en"
        parts = han_parts(query) if lang == "en" else latin_parts(query)
        if not parts:
            return found, []
        if lang == "en":
            def inside(span: Any) -> bool:
                return span is not None and any(a <= span[0] and span[1] <= b for a, b in parts)

            found = SymptomSet([t for t in found.terms if not inside(t.span)],
                               [t for t in found.alternatives if not inside(t.span)], found.ranking)
        try:
            other = self.pick(other_lang, "auto")
        except (StillBuildingError, UnavailableError) as exc:
            return found, [{"span": [a, b], "reason": str(exc)} for a, b in parts]
        if other.info.name not in self.set_detectors:
            reason = f"the {other.info.name} knowledge base ranks terms only; it decides no set"
            return found, [{"span": [a, b], "reason": reason} for a, b in parts]
        offered: list[Any] = []  # the other list's alternatives, after the text's own
        for (a, _), read in zip(parts, self._decided(other, [query[a:b] for a, b in parts], True), strict=True):
            def moved(terms: Sequence[Any], a: int = a) -> list[Any]:
                return [dataclasses.replace(t, span=None if t.span is None else (t.span[0] + a, t.span[1] + a),
                                            source=t.source or other.info.name) for t in terms]

            found = with_uncovered(found, SymptomSet(moved(read.terms), []), other.info.name)
            offered += moved(read.alternatives)
        decided = {t.name for t in found.terms}
        return SymptomSet(found.terms, [*found.alternatives, *(t for t in offered if t.name not in decided)],
                          found.ranking), []

    def decide_many(self, texts: Sequence[str], language: str, confident: bool = False,
                    kb: str = "auto") -> list[Any] | None:
        """The decided sets (``medrank.pipelines.symptom.sets.SymptomSet``) of ``texts`` in ``language``, as
        ``/symptoms`` decides them with ``kb`` (auto: the language's default, completed as there), in one batch;
        None when no set detector serves that knowledge base (a ranking only). ``confident``: only the terms at or
        above the detector's calibrated threshold (a term the minimum count or a wording rule added below it stays
        out). Raises as :meth:`pick` while that knowledge base still builds, or when it is not served."""
        base = self.pick(language, kb)
        detector = self.set_detectors.get(base.info.name)
        if detector is None:
            return None
        found = self._decided(base, texts, kb == "auto") if texts else []
        cut = _decision_threshold(detector) if confident else None
        if cut is None:
            return found
        return [dataclasses.replace(f, terms=[t for t in f.terms if t.probability >= cut]) for f in found]

    def info(self) -> PipelineInfo:
        return PipelineInfo(
            "; ".join(f"{n}: {b.info.model}" for n, b in self.kbs.items()),
            "; ".join(f"{n}: {b.info.version}" for n, b in self.kbs.items()),
            any(b.info.trained for b in self.kbs.values()),
            {"knowledge_bases": {n: b.describe() for n, b in self.kbs.items()}, "defaults": self.defaults,
             "building": {n: step.detail() for n, (_, step) in self.pending.items()},
             "set_detection": {n: _set_detection(self.set_detectors.get(n)) for n in self.kbs}},
        )


def _set_detection(detector: Any) -> str:
    if detector is None:
        return "ranking only (no set calibration for it)"
    memory = getattr(detector, "memory", None)
    return ("decides the set of terms (calibrated probabilities, spans, alternatives)"
            + (f"; reads the training memory of {memory.n_texts} annotated texts" if memory is not None else ""))


def _decision_threshold(detector: Any) -> float | None:
    """The probability at which a set detector decides a term by itself (its calibration's threshold; a self-report
    model's own), None when it has none."""
    calibration = getattr(detector, "calibration", None)
    value = getattr(calibration, "threshold", None) if calibration is not None else getattr(detector, "threshold", None)
    return float(value) if isinstance(value, int | float) else None


def _term(term: Any) -> dict[str, Any]:
    out = {"id": term.id, "name": term.name, "probability": round(float(term.probability), 6),
           "span": list(term.span) if term.span is not None else None}
    if getattr(term, "source", None):
        out["source"] = term.source
    return out


# -- /normalize ---------------------------------------------------------------------------------------
def require_chinese(mention: str, abbreviations: frozenset[str] = frozenset()) -> None:
    """The procedure normalisers read Chinese procedure names: text without a Han character is refused (→ 404), but
    for a procedure abbreviation of the data written alone ("TURP"; ``medrank.pipelines.procedures.abbreviations``)."""
    from medrank.pipelines.procedures.inference import reads_as_abbreviation

    if not has_han(mention) and not reads_as_abbreviation(mention, abbreviations):
        found = identify(mention)
        raise UnavailableError(f"the text {found.reads} and holds no Chinese character: the procedure normaliser reads "
                               "Chinese procedure names only, and procedure abbreviations its data writes alone")


class NormalizeService:
    """Procedure mention → standard procedure names with their codes (zero-shot: the procedures knowledge base).

    ``calibrator`` turns the ranking into P(the top name is right) (:class:`~medrank.service.calibration.
    TopHitCalibrator`, fit on a carve-out of the visible training mentions); ``low_confidence`` = below 0.5.
    """

    def __init__(self, kb: KnowledgeBase, calibrator: Any = None, abbreviations: frozenset[str] = frozenset()) -> None:
        self.kb = kb
        self.calibrator = calibrator
        #: procedure abbreviations read when written alone (``abbreviations_of_data``)
        self.abbreviations = abbreviations

    def normalize(self, mention: str, k: int = 5) -> dict[str, Any]:
        require_chinese(mention, self.abbreviations)
        hits = self.kb.search([mention], max(k, 2))[0]
        exact = bool(hits) and same_text(mention, hits[0].name)
        confidence = (None if self.calibrator is None
                      else round(self.calibrator.probability([h.score for h in hits], exact), 4))
        return {"model": self.kb.info.model, "trained": self.kb.info.trained, "kb": self.kb.info.name,
                "results": [{"id": h.id, "name": h.name, "score": h.score, "codes": list(h.codes)} for h in hits[:k]],
                "predicted": [hits[0].name] if hits else [], "confidence": confidence,
                "low_confidence": None if confidence is None else confidence < 0.5}

    def info(self) -> PipelineInfo:
        details = self.kb.describe()
        if self.calibrator is not None:
            details["confidence"] = {"method": f"Platt scaling of ({', '.join(CALIBRATION_FEATURES)})",
                                     **self.calibrator.to_dict()}
        return PipelineInfo(self.kb.info.model, self.kb.info.version, self.kb.info.trained, details)


class TrainedNormalizeService:
    """The trained recall-and-rank normaliser (MTCG → KAR → FB or the learned fusion, :class:`~medrank.pipelines.
    procedures.normalizer.ProcedureNormalizer`): the candidates with their fused scores, plus the terms its count rule selects."""

    def __init__(self, normalizer: Any, codes: dict[str, tuple[str, ...]], model: str, version: str,
                 abbreviations: frozenset[str] = frozenset()) -> None:
        if not callable(getattr(normalizer, "normalize_one", None)):
            raise ValueError("normalizer must have normalize_one(text) -> Prediction")
        self.normalizer = normalizer
        self.codes = codes
        self.abbreviations = abbreviations
        # what computes the frozen bottom MTCG and KAR share (the trained blocks and heads run on torch)
        self._info = PipelineInfo(model, version, True, {"standard_names": len(codes), "backend": getattr(normalizer, "backend", "torch")})
        # the normaliser toggles eval mode and fills caches per call: one request at a time
        self._lock = threading.Lock()

    def normalize(self, mention: str, k: int = 5) -> dict[str, Any]:
        require_chinese(mention, self.abbreviations)
        with self._lock:
            pred = self.normalizer.normalize_one(mention)
        rows = [{"id": name, "name": name, "score": round(float(score), 6), "codes": list(self.codes.get(name, ()))}
                for name, score in sorted(zip(pred.candidates, pred.final, strict=True), key=lambda x: -x[1])[:k]]
        return {"model": self._info.model, "trained": True, "kb": "procedures", "results": rows,
                "predicted": list(pred.terms), "confidence": None if pred.confidence is None else round(pred.confidence, 4),
                "low_confidence": pred.low_confidence}

    def info(self) -> PipelineInfo:
        return self._info


# -- /passages ----------------------------------------------------------------------------------------
def _curve_payload(curve: dict[str, Any]) -> dict[str, Any]:
    return {
        "document": str(curve["document"].get("title", curve["document"].get("id", ""))),
        "scores": [round(float(s), 4) for s in curve["scores"]],
        "passages": [{"passage_id": p[0], "aspect": p[1], "start": int(p[2]), "end": int(p[3]), "score": round(float(p[4]), 4)}
                     for p in curve["passages"]],
    }


class CDVPassageService:
    """A trained CDV sentence index (:class:`~medrank.pipelines.passages.index.CDVIndex`): passages + score curves.

    As in the CDV paper's protocol, BM25 (query ``entity aspect``) recalls ``candidates`` passages and CDV re-ranks
    them; without a BM25 index (or when BM25 finds nothing) CDV scores every passage of the corpus.
    """

    sentence_scores = "CDV: w·cos(entity) + (1−w)·cos(aspect) of each sentence's contextual vectors"

    def __init__(self, index: Any, model: str, version: str, bm25: BM25Index | None = None, candidates: int = 64) -> None:
        self.index = index
        self.bm25 = bm25
        self.candidates = candidates
        recall = f"BM25 top-{candidates} re-ranked by CDV" if bm25 is not None else "CDV over every passage"
        self._info = PipelineInfo(model, version, True, {"passages": len(index), "sentences": index.n_sentences,
                                                         "retrieval": recall})

    def _rank(self, entity: str, aspect: str, k: int) -> list[tuple[str, float]]:
        from medrank.pipelines.passages.inference import bm25_query_text

        if self.bm25 is not None:
            ranking = self.bm25.search([bm25_query_text(entity, aspect)], k=self.candidates)[0]
            if ranking.ids:
                qvec = self.index.query_vector(entity, aspect)
                scores = self.index.score_candidates(qvec, list(ranking.ids))
                order = topk_stable(scores, min(k, len(scores)))
                return [(ranking.ids[j], float(scores[j])) for j in order]
        ranking = self.index.search(entity, aspect, k=k)
        return list(zip(ranking.ids, ranking.scores, strict=True))

    def search(self, entity: str, aspect: str, k: int = 5) -> dict[str, Any]:
        ranked, seen = [], set()
        for pid, score in self._rank(entity, aspect, 2 * k + 10):  # deeper than k: repeated texts are dropped
            key = " ".join(self.index.passages[self.index.passage_index[pid]]["text"].lower().split())
            if key not in seen and len(ranked) < k:
                seen.add(key)
                ranked.append((pid, score))
        results, curves = [], {}
        for pid, score in ranked:
            p = self.index.passages[self.index.passage_index[pid]]
            if p["doc_id"] not in curves:
                curves[p["doc_id"]] = self.index.score_curve(entity, aspect, p["doc_id"])
            curve = curves[p["doc_id"]]
            span = next(s for s in curve["passages"] if s[0] == pid)
            sentences = [{"text": t, "score": round(float(s), 4)}
                         for t, s in zip(curve["sentences"][span[2]:span[3]], curve["scores"][span[2]:span[3]], strict=True)]
            results.append({"passage_id": pid, "document": str(curve["document"].get("title", "")), "aspect": p.get("label"),
                            "score": round(float(score), 4), "text": p["text"], "sentences": sentences})
        top = _curve_payload(curves[self.index.passages[self.index.passage_index[ranked[0][0]]]["doc_id"]]) if results else None
        return {"model": self._info.model, "trained": True, "sentence_scores": self.sentence_scores,
                "results": results, "curve": top}

    def info(self) -> PipelineInfo:
        return self._info


class BM25PassageService:
    """The zero-shot form: BM25 over whole passages (query ``entity aspect``), each sentence scored by the cosine of
    its encoder vector with the query's.

    Every sentence of the corpus is split and encoded once, when the index is built (:meth:`build`); a request
    encodes only its query. Passages whose text repeats a better-ranked one are dropped.

    Built without sentence vectors (``encoder=None``) it ranks the same passages and scores each sentence by BM25;
    :meth:`use_sentence_vectors` swaps the encoder's vectors in later, in one assignment (a request in flight keeps
    the scorer it started with). The service does this so that ``/passages`` answers while the sentences encode.
    """

    def __init__(self, passages: Sequence[dict[str, Any]], index: BM25Index, encoder: Encoder | None, version: str,
                 sentences: Sequence[Sequence[str]] | None = None, sentence_vectors: np.ndarray | None = None) -> None:
        from medrank.pipelines.passages.inference import split_sentences

        self.passages = list(passages)
        self.position = {p["id"]: i for i, p in enumerate(self.passages)}
        self.by_doc: dict[str, list[int]] = {}
        for i, p in enumerate(self.passages):
            self.by_doc.setdefault(p["doc_id"], []).append(i)
        self.index = index
        if sentences is None:
            sentences = [[t for t, _ in split_sentences(p["text"])] for p in self.passages]
        if len(sentences) != len(self.passages):
            raise ValueError(f"{len(sentences)} sentence lists for {len(self.passages)} passages")
        #: every sentence, passage after passage; passage i's are ``flat[start[i]:start[i + 1]]``
        self.flat = [t for sents in sentences for t in sents]
        self.start = np.cumsum([0, *[len(sents) for sents in sentences]])
        self.version = version
        self._dense: tuple[Encoder, np.ndarray] | None = None
        if encoder is not None and sentence_vectors is None:
            sentence_vectors = self.encode_sentences(encoder, self.flat)
        if encoder is not None and sentence_vectors is not None:
            self.use_sentence_vectors(encoder, sentence_vectors)
        elif sentence_vectors is not None:
            raise ValueError("sentence vectors need the encoder that made them (to encode each query)")

    @property
    def encoder(self) -> Encoder | None:
        return None if self._dense is None else self._dense[0]

    @property
    def vectors(self) -> np.ndarray | None:
        return None if self._dense is None else self._dense[1]

    @property
    def sentence_scorer(self) -> str:
        return f"cosine({self._dense[0].name})" if self._dense is not None else "BM25 of the sentence"

    @property
    def sentence_scores(self) -> str:
        return _scored_by(self.sentence_scorer)

    def use_sentence_vectors(self, encoder: Encoder, vectors: np.ndarray) -> None:
        """Score sentences by the cosine of ``vectors`` (one row per sentence, in :attr:`flat` order) with the
        query's ``encoder`` vector from now on."""
        if len(vectors) != len(self.flat):
            raise ValueError(f"{len(vectors)} sentence vectors for {len(self.flat)} sentences")
        if vectors.ndim != 2 or vectors.shape[1] != encoder.dim:
            raise ValueError(f"sentence vectors of shape {vectors.shape} for an encoder of dimension {encoder.dim}")
        self._dense = (encoder, vectors)

    @staticmethod
    def encode_sentences(encoder: Encoder, sentences: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``sentences`` in one encoder call, kept as float16 (half the memory; cosines move by
        less than 1e-3)."""
        vecs = encoder.encode(list(sentences), kind="passage", batch_size=128, show_progress=False)
        return unit_rows(np.asarray(vecs, dtype=np.float32)).astype(np.float16)

    @staticmethod
    def build(passages: Sequence[dict[str, Any]], encoder: Encoder | None, version: str,
              sentence_vectors: np.ndarray | None = None) -> BM25PassageService:
        index = BM25Index(language="en").build([p["id"] for p in passages], [p["text"] for p in passages])
        return BM25PassageService(passages, index, encoder, version, sentence_vectors=sentence_vectors)

    def _scores(self, query: str, members: Sequence[int]) -> tuple[str, dict[int, np.ndarray]]:
        """How sentences were scored, and the sentence scores of each passage in ``members`` (precomputed vectors;
        BM25 of the sentence without them)."""
        dense = self._dense  # read once: a swap during this request does not mix two scorers
        if dense is not None:
            encoder, vectors = dense
            q = unit_rows(np.asarray(encoder.encode([query], kind="query", show_progress=False), dtype=np.float32))[0]
            return _scored_by(f"cosine({encoder.name})"), {i: vectors[self.start[i]:self.start[i + 1]].astype(np.float32) @ q for i in members}
        label = _scored_by("BM25 of the sentence")
        texts = [self.flat[j] for i in members for j in range(self.start[i], self.start[i + 1])]
        if not texts:
            return label, {i: np.zeros(0, np.float32) for i in members}
        flat = BM25Index(language="en").build([str(n) for n in range(len(texts))], texts).query_scores(query)
        out, pos = {}, 0
        for i in members:
            n = int(self.start[i + 1] - self.start[i])
            out[i] = np.asarray(flat[pos:pos + n], dtype=np.float32)
            pos += n
        return label, out

    def search(self, entity: str, aspect: str, k: int = 5) -> dict[str, Any]:
        from medrank.pipelines.passages.inference import bm25_query_text

        query = bm25_query_text(entity, aspect)
        scores = self.index.query_scores(query)
        idx, seen = [], set()
        for i in topk_stable(scores, min(2 * k + 10, len(scores))):  # deeper than k: repeated texts are dropped
            if scores[i] <= 0 or len(idx) == k:
                break
            key = " ".join(self.passages[i]["text"].lower().split())
            if key not in seen:
                seen.add(key)
                idx.append(int(i))
        results, curve, sentence_scores = [], None, self.sentence_scores
        if idx:
            top_doc = self.passages[idx[0]]["doc_id"]
            sentence_scores, sscore = self._scores(f"{entity} {aspect}", sorted(set(idx) | set(self.by_doc[top_doc])))
            for i in idx:
                p = self.passages[i]
                results.append({"passage_id": p["id"], "document": p.get("title", p["doc_id"]), "aspect": p.get("label"),
                                "score": round(float(scores[i]), 4), "text": p["text"],
                                "sentences": [{"text": self.flat[j], "score": round(float(s), 4)}
                                              for j, s in zip(range(self.start[i], self.start[i + 1]), sscore[i], strict=True)]})
            spans, curve_scores = [], []
            for i in self.by_doc[top_doc]:
                seg = sscore[i]
                spans.append({"passage_id": self.passages[i]["id"], "aspect": self.passages[i].get("label"),
                              "start": len(curve_scores), "end": len(curve_scores) + len(seg),
                              "score": round(float(seg.mean()) if len(seg) else 0.0, 4)})
                curve_scores += [round(float(v), 4) for v in seg]
            curve = {"document": self.passages[idx[0]].get("title", top_doc), "scores": curve_scores, "passages": spans}
        return {"model": BM25_PASSAGES_MODEL, "trained": False, "sentence_scores": sentence_scores,
                "results": results, "curve": curve}

    def info(self) -> PipelineInfo:
        return PipelineInfo(BM25_PASSAGES_MODEL, self.version, False,
                            {"passages": len(self.passages), "sentences": len(self.flat),
                             "sentence_scorer": self.sentence_scorer})


BM25_PASSAGES_MODEL = "BM25 (zero-shot; no trained CDV index found)"


def _scored_by(scorer: str) -> str:
    return f"zero-shot: {scorer} between 'entity aspect' and each sentence"


# -- /next-questions and /differential ---------------------------------------------------------------
#: the values of a finding that are an answer, not a value code (the request schema's, the engine's too)
ANSWER_VALUES = ("present", "absent", "unsure")
#: what a finding's ``source`` in a request becomes in the engine (an answer names the question it answers)
ANSWER_SOURCES = ("self-report", "answer", "doctor")
#: the one-line statement every differential carries
NOT_A_DIAGNOSIS = ("This is not a diagnosis: it is how likely each condition is given the answers so far, from "
                   "statistics of public case collections. Only a clinician who examines you can diagnose you.")


def coverage_note(engine: Any) -> str:
    """What a differential can name: the engine's conditions, and (an open-world engine) how likely it is that the
    condition is none of them; a closed-world engine still ranks its nearest conditions for a complaint outside
    them (a swollen knee for DDXPlus)."""
    n = len(engine.model.conditions)
    population = getattr(engine, "population", None)
    collection = f"its case collection (consultations about {population})" if population else "its case collection"
    if getattr(engine, "open_world", False):
        return (f"It weighs the {n} conditions of {collection} and the chance that the condition is none of "
                "them; a condition outside them is never named.")
    return f"It weighs the {n} conditions of {collection} only: a condition outside them is never listed."


def population_note(engine: Any, dialogue: Sequence[dict[str, str]]) -> str:
    """For a collection about others than the one writing (DXY's consultations about children, to an adult who writes
    of themself: :meth:`~medrank.pipelines.history.inference.InquiryEngine.addresses_writer`), that its conditions and
    their chances are those of its population, not the writer's; empty otherwise."""
    population = getattr(engine, "population", None)
    patient = [t["text"] for t in dialogue if t.get("speaker") == "patient"]
    if not population or not engine.addresses_writer(patient):
        return ""
    return (f"You write of yourself, and its cases are consultations about {population}: conditions of adults are not "
            f"among them, and the chances are those of {population}.")


def finding_key(name: str, value: str) -> str:
    """A finding as one string: its name, with ``=value`` for a value of a multiple-choice finding."""
    return name if value == "present" else f"{name}={value}"


def finding_text(engine: Any, name: str, value: str) -> str:
    """A present finding in a few words ("pain somewhere…: knee(R)" for a value of a multiple-choice one)."""
    text = engine.finding_description(name)
    return text if value == "present" else f"{text}: {engine.value_label(name, value)}"


def supporting_text(engine: Any, name: str, established: Sequence[Any]) -> str:
    """A finding that raises a condition in a few words, with the values established for a multiple-choice one
    ("pain somewhere: forehead, top of the head": the pain and where it is read alike without them)."""
    values = [f.value for f in established if f.name == name and f.value not in ANSWER_VALUES]
    text = engine.finding_description(name)
    return f"{text}: {', '.join(engine.value_label(name, v) for v in values)}" if values else text


def unexplained_note(engine: Any, ranked: Sequence[Any]) -> str:
    """When no listed condition accounts for every established finding, the differential says which findings
    none of them accounts for (those its case collection never shows with any of them), or that each leaves one."""
    if not ranked or not all(c.unexplained for c in ranked):
        return ""
    common = set(ranked[0].unexplained).intersection(*(set(c.unexplained) for c in ranked[1:]))
    if common:
        words = ", ".join(finding_text(engine, n, v) for n, v in ranked[0].unexplained if (n, v) in common)
        return (f"None of the conditions listed accounts for: {words}. The complaint may lie outside the conditions "
                "of its case collection.")
    return ("Each condition listed leaves something reported unexplained: the complaint may lie outside the "
            "conditions of its case collection.")


def engine_model(engine: Any) -> str:
    """What an inquiry engine is, for the ``model`` of a response."""
    fitted = f"{engine.name} (naive Bayes over the {'DDXPlus' if engine.language == 'en' else 'DXY'} training carve-out"
    if engine.reranker is None:
        return f"{fitted}, knowledge-base first stage; zero-shot: no re-ranker)"
    backend = (getattr(engine, "reranker_backend", None) or {}).get("backend")
    return f"{fitted}, re-ranked by a trained history re-ranker" + (f" on {backend})" if backend else ")")


class ReadTerm(str):
    """The name of a symptom term ``/symptoms`` decided in a text, which also knows the words of the text it covers
    (``span``: ``[start, end)`` character offsets, None when the wording as a whole points to it) and its calibrated
    probability (None: not given). A ``str``, so that it stands wherever a confirmed symptom's name does."""

    span: tuple[int, int] | None
    probability: float | None

    def __new__(cls, name: str, span: tuple[int, int] | None = None, probability: float | None = None) -> ReadTerm:
        term = super().__new__(cls, name)
        term.span, term.probability = span, probability
        return term


#: (texts, language) → per text, the symptom terms ``/symptoms`` decides in it (plain names, or :class:`ReadTerm`
#: with the words each covers); None when it cannot now
SymptomReader = Callable[[Sequence[str], str], "list[list[str]] | None"]


def without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with the words of each span replaced by a clause break (what is left is read as the clauses it was)."""
    out, at = [], 0
    for start, end in sorted(spans):
        if start >= at:
            out += [text[at:start], " , "]
            at = end
        else:
            at = max(at, end)
    return "".join([*out, text[at:]])


class Inquiry:
    """The history inquiry engines (``medrank.pipelines.history.inference.InquiryEngine``, one per language)
    and how a request becomes their findings.

    A request's findings are what the patient answered (name + ``present`` / ``absent`` / ``unsure``, or a value
    code of a categorical finding); the patient's own words in the dialogue (and the symptoms ticked on the page)
    add the findings the engine's detector reads out of them, unless an answer already settles that finding.
    """

    #: languages in which a request that confirms no symptoms has its first patient turn read by the symptoms
    #: pipeline too: the DDXPlus evidence matcher knows the questions' own wording ("a fever", not "a high
    #: temperature" or "the runs"). Not Chinese: read by the dxy knowledge base's self-report model, the DXY engine's
    #: validation self-reports gave it no finding its own detector had missed (``bench/inquiry_from_words.py``)
    READ_SYMPTOMS_IN: tuple[str, ...] = ("en",)
    #: how many of the first patient turns may hold the complaint: a patient who greets first ("Hello doctor") states
    #: it in answer to the opening question the bank then asks ("What brings you here today?")
    OPENING_TURNS = 3
    #: the probability at which a decided term's name reads its words instead of them (:meth:`double_readings`): a
    #: term more probably right than wrong
    NAME_OVER_WORDS = 0.5

    def __init__(self, engines: dict[str, Any], reader: SymptomReader | None = None) -> None:
        from medrank.pipelines.history.inference import Finding

        if not engines:
            raise ValueError("no inquiry engine")
        for lang, engine in engines.items():
            for method in ("next_questions", "differential", "detect_findings", "should_stop", "finding_label"):
                if not callable(getattr(engine, method, None)):
                    raise ValueError(f"engines[{lang!r}] must have {method}()")
        if reader is not None and not callable(reader):
            raise ValueError("reader must be a callable (texts, language) -> symptom names per text, or None")
        self.engines = dict(engines)
        self.finding = Finding
        #: (texts, language) → per text, the names of the symptom terms the symptoms pipeline decides in it (None
        #: when it cannot read them now): what the page would tick, for a caller that sends the dialogue alone
        self.reader = reader

    def reader_for(self, language: str) -> SymptomReader | None:
        """:attr:`reader` where it reads ``language`` (:data:`READ_SYMPTOMS_IN`), else None."""
        return self.reader if language in self.READ_SYMPTOMS_IN else None

    def symptoms_of(self, engine: Any, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str] | None
                    ) -> tuple[list[str], list[str] | None, dict[str, list[str]]]:
        """The symptoms a request confirms; when it names none (``None``, not an empty list: the patient may have
        unticked every one), the terms :attr:`reader` decides in the first patient turn that names any (of the first
        :data:`OPENING_TURNS`, read one after the other), which are also returned second (``None`` when nothing could
        be read). Third, per patient turn read, the terms decided in it (:class:`ReadTerm` where the reader gives the
        words each covers): for confirmed symptoms sent with the request, the first turns are read for that alone
        (:meth:`established` reads a confirmed symptom's words through its name, not twice)."""
        said = [t["text"] for t in dialogue if t["speaker"] == "patient"][:self.OPENING_TURNS]
        reader = self.reader_for(engine.language)
        if symptoms is not None:
            if not symptoms or not said or reader is None:
                return list(symptoms), None, {}
            read = reader(said, engine.language)
            return list(symptoms), None, {} if read is None else dict(zip(said, read, strict=True))
        if not said or reader is None:
            return [], None, {}
        for text in said:
            read = reader([text], engine.language)
            if read is None:
                return [], None, {}
            if read[0]:
                return list(read[0]), list(read[0]), {text: list(read[0])}
        return [], [], {}

    def engine(self, language: str) -> Any:
        engine = self.engines.get(language)
        if engine is None:
            raise UnavailableError(f"no inquiry engine for language {language!r}; served: {sorted(self.engines)}")
        return engine

    def established(self, engine: Any, dialogue: Sequence[dict[str, str]], findings: Sequence[dict[str, str]],
                    symptoms: Sequence[str] = (), readings: dict[str, list[str]] | None = None,
                    memo: dict[tuple[str, bool], list[Any]] | None = None) -> list[Any]:
        """The answered findings, then those detected in the patient's words that no answer settles.

        ``readings`` (from :meth:`symptoms_of`): per patient turn, the terms decided in it with the words each covers;
        where a confirmed symptom's name reads otherwise than its own words do, its words are read through its name
        only (:meth:`double_readings`). ``memo``: (text, read as a term's name) → the findings read, filled here for
        a later reading of the same request (:meth:`not_weighed`)."""
        from medrank.pipelines.history.inference import InquiryInputError

        known = set(engine.finding_names())
        given = []
        for f in findings:
            if f["name"] not in known:
                examples = ", ".join(list(known)[:3])
                raise InquiryInputError(f"unknown finding {f['name']!r} for the {engine.name} engine (its findings are "
                                        f"named like {examples}; /next-questions returns the ones it asks about)")
            source = f.get("source") or "answer"
            given.append(self.finding(f["name"], f["value"], f"question:{f['name']}" if source == "answer" else source))
        settled = {f.name for f in given}
        # a patient turn that answers the question about an answered finding is that finding ("yes", "not sure"):
        # it is not read again as free text
        # (the question may be worded around the finding's label: "有没有流涕？" for 流涕)
        answered = {label for f in given if f.name in known for label in engine.question_wordings(f.name)}

        def answers_one(i: int) -> bool:
            asked = dialogue[i - 1]["text"] if i and dialogue[i - 1]["speaker"] == "doctor" else ""
            # nor is the choice made to the engine's own question of values ("Where is the pain located?" "pharynx,
            # tonsil(R)"): its words are the values' names, read as its answer, not as a sore throat besides
            return bool(asked) and (any(label in asked for label in answered)
                                    or engine.choice_question(asked) is not None)

        # the patient's answer to the doctor's question in the dialogue is that question's answer ("Have you vomited?"
        # "yes, twice"; "Where is the pain located?" "forehead"), unless the patient's own words settle the finding (read
        # below first: "I have a headache" keeps its pain after "Any back pain?" "no"); the turn is still read for what
        # else it says. A choice made to the engine's own question of values settles its finding as an answer sent does:
        # "forehead" says where the pain is, which "I have a headache" said only as "somewhere on the head"
        in_dialogue = [self.finding(n, v, f"question:{n}") for i, turn in enumerate(dialogue)
                       if turn["speaker"] == "patient" and i and dialogue[i - 1]["speaker"] == "doctor"
                       for n, v in engine.answered_findings(dialogue[i - 1]["text"], turn["text"])]
        chosen = {f.name for f in in_dialogue if engine.finding_options(f.name)} - settled
        settled |= chosen

        patient: list[str] = []
        for i, t in enumerate(dialogue):
            if t["speaker"] != "patient":
                continue
            if not answers_one(i):
                patient.append(t["text"])
            elif left := self._besides_choice(engine, dialogue, i):
                # what a turn that makes a choice says besides it is the patient's words ("forehead, and I have a fever")
                patient.append(left)
        first = next((i for i, t in enumerate(dialogue) if t["speaker"] == "patient"), None)
        opening = [dialogue[first]["text"]] if first is not None and dialogue[first]["text"] in patient[:1] else []
        # the first patient turn (and the symptoms ticked from it) is the self-report; later turns are answers
        # a confirmed symptom is read as the name of a term, not as the patient's words (``term``)
        texts = ([(t, "self-report", False) for t in opening] + [(t, "self-report", True) for t in symptoms]
                 + [(t, "patient", False) for t in patient[len(opening):]])
        read = self.memo_reader(engine, readings, {} if memo is None else memo)
        doubles = {text: self.double_readings(read, text, terms, symptoms, engine.refines)
                   for text, terms in (readings or {}).items()}
        unsure = {name for text, terms in (readings or {}).items() for name in self.unsure_names(read, text, terms)}
        texts = [(t, source, term) for t, source, term in texts if not (term and t in unsure)]
        detected: list[Any] = []
        first_text: dict[str, str] = {}  # finding -> the text that established it (a multi-choice finding may
        for text, source, term in texts:  # carry several values from that one text: head, forehead …)
            for f in read(text, term):
                if not term and (f.name, f.value) in doubles.get(text, ()):
                    continue
                if f.name in settled and first_text.get(f.name) != text:
                    continue
                if any(d.name == f.name and d.value == f.value for d in detected):
                    continue
                settled.add(f.name)
                first_text.setdefault(f.name, text)
                detected.append(self.finding(f.name, f.value, source, read=f.read))
        return given + [f for f in in_dialogue if f.name in chosen or f.name not in settled] + detected

    @staticmethod
    def memo_reader(engine: Any, readings: dict[str, list[str]] | None,
                    memo: dict[tuple[str, bool], list[Any]]) -> Callable[[str, bool], list[Any]]:
        """``engine.detect_findings`` through ``memo`` ((text, read as a term's name) → findings): a request reads the
        same texts again (:meth:`established`, :meth:`double_readings`, :meth:`not_weighed`); a term's name is read with
        the words it covers (:meth:`spoken`)."""
        spoken = Inquiry.spoken(readings)

        def read(text: str, term: bool = False) -> list[Any]:
            if (text, term) not in memo:
                memo[text, term] = engine.detect_findings(text, term=term, **(
                    {"spoken": spoken[text]} if term and text in spoken else {}))
            return memo[text, term]

        return read

    @staticmethod
    def spoken(readings: dict[str, list[str]] | None) -> dict[str, str]:
        """Per symptom decided in the patient's words (``readings``, from :meth:`symptoms_of`), the words it covers: its
        name is read with them (``detect_findings(…, spoken=…)``: a past diagnosis only where they name it)."""
        out: dict[str, str] = {}
        for text, terms in (readings or {}).items():
            for term in terms:
                span = getattr(term, "span", None)
                if span is not None:
                    out.setdefault(str(term), text[span[0]:span[1]])
        return out

    @staticmethod
    def not_weighed(engine: Any, symptoms: Sequence[str], readings: dict[str, list[str]] | None = None,
                    memo: dict[tuple[str, bool], list[Any]] | None = None) -> list[str]:
        """The symptoms (confirmed, or read from the patient's words) that the engine reads no finding from: neither
        their name (``detect_findings(name, term=True)``) nor the words of the turn they cover (``readings``, from
        :meth:`symptoms_of`: what the turn reads that it does not without those words). Its conditions are weighed
        without them ("my vision goes blurry": Blurred vision is no finding of DDXPlus), which a reader of the
        differential should be told rather than left to assume. ``memo`` as :meth:`established` fills it."""
        memo_read = Inquiry.memo_reader(engine, readings, {} if memo is None else memo)

        def read(text: str, term: bool = False) -> set[tuple[str, str]]:
            return {(f.name, f.value) for f in memo_read(text, term)}

        spans = {str(term): (text, span) for text, terms in (readings or {}).items() for term in terms
                 if (span := getattr(term, "span", None)) is not None}
        out = []
        for name in dict.fromkeys(symptoms):
            if read(name, True):
                continue
            if name in spans:
                text, span = spans[name]
                if read(text) - read(without_spans(text, [span])):
                    continue
            out.append(str(name))
        return out

    @staticmethod
    def _besides_choice(engine: Any, dialogue: Sequence[dict[str, str]], i: int) -> str:
        """What patient turn ``i``, the answer to the engine's own question of values, says besides its choice (empty
        when nothing but the values and their separators; any other turn: empty)."""
        if not i or dialogue[i - 1]["speaker"] != "doctor":
            return ""
        left = engine.choice_remainder(dialogue[i - 1]["text"], dialogue[i]["text"]) or ""
        return left if re.search(r"\w{2,}", left) else ""

    def double_readings(self, read: Callable[[str, bool], list[Any]], text: str, terms: Sequence[str],
                        symptoms: Sequence[str], refines: Callable[[str, str], bool] | None = None
                        ) -> set[tuple[str, str]]:
        """The yes / no findings that the words of a confirmed symptom in ``text`` give besides what its name gives.

        The engine's detector matches the patient's words to its own questions, and ``/symptoms`` reads the same words
        as a term whose name the detector reads too: "a whistling sound when I breathe" is Wheezing (read as the
        wheeze on breathing out) but its words come nearest to the high-pitched sound on breathing in; "I fainted" is
        Loss of consciousness, its words nearest to feeling about to faint. Where the name reads a yes / no finding the
        words do not, the findings that the words give only while that term's words are in the text (``read`` of the
        text without them, :func:`without_spans`) and that no confirmed symptom's name gives are the double ones.
        The words keep their reading where the term has no words of its own (``span``), its name reads nothing, or
        it is decided less probably than :data:`NAME_OVER_WORDS` (a term that is more probably wrong than right:
        "food gets stuck when I swallow" read as Food allergy keeps its difficulty swallowing), and a finding of the
        words that says the name's and more (``refines(words', name's)``, :meth:`InquiryEngine.refines`: "my cough
        brings up green stuff", Cough, keeps the cough that produces colored sputum) is no double."""
        confirmed = set(symptoms)
        found = {(f.name, f.value) for f in read(text, False)}
        by_name = {term: {(f.name, f.value) for f in read(term, True)} for term in confirmed}
        named = {n for reading in by_name.values() for n, _ in reading}
        doubles: set[tuple[str, str]] = set()
        for term in terms:
            span, probability = getattr(term, "span", None), getattr(term, "probability", None)
            if term not in confirmed or span is None or probability is not None and probability < self.NAME_OVER_WORDS:
                continue
            own = {f for f in by_name[term] if f[1] in ANSWER_VALUES}
            if not own or own <= found:
                continue  # the words already give what the name does: nothing to mend
            left = {(f.name, f.value) for f in read(without_spans(text, [span]), False)}
            doubles |= {f for f in found - left if f[1] in ANSWER_VALUES and f[0] not in named
                        and not (refines is not None and any(refines(f[0], o) for o, _ in own))}
        return doubles

    def unsure_names(self, read: Callable[[str, bool], list[Any]], text: str, terms: Sequence[Any]) -> set[str]:
        """The terms decided in ``text`` less probably than :data:`NAME_OVER_WORDS` whose own words read a yes / no
        finding their name does not: those words stand for them, the name is not read ("I feel faint" decided Loss of
        consciousness at 38 %; its words read feeling about to faint, its name the loss of consciousness it is not).
        The mirror of :meth:`double_readings`, where a name more probably right than wrong reads its words."""
        out: set[str] = set()
        found = None
        for term in terms:
            span, probability = getattr(term, "span", None), getattr(term, "probability", None)
            if span is None or probability is None or probability >= self.NAME_OVER_WORDS:
                continue
            if found is None:
                found = {(f.name, f.value) for f in read(text, False)}
            own = found - {(f.name, f.value) for f in read(without_spans(text, [span]), False)}
            named = {(f.name, f.value) for f in read(str(term), True)}
            if {f for f in own if f[1] in ANSWER_VALUES} - named and named - own:
                out.add(str(term))
        return out

    @staticmethod
    def turns(dialogue: Sequence[dict[str, str]]) -> list[str]:
        return [t["text"] for t in dialogue]

    def describe(self, engine: Any, finding: Any) -> dict[str, Any]:
        return {"name": finding.name, "label": engine.finding_description(finding.name), "value": finding.value,
                "value_label": engine.value_label(finding.name, finding.value), "source": finding.source}

    def question(self, engine: Any, q: Any) -> dict[str, Any]:
        return {"id": q.finding, "finding": q.finding, "label": engine.finding_description(q.finding), "text": q.text,
                "score": round(float(q.score), 6), "options": [{"value": v, "label": label}
                                                               for v, label in engine.finding_options(q.finding)],
                "choice_only": engine.asks_which(q.finding)}

    def info(self) -> dict[str, Any]:
        return {lang: {"engine": e.name, "findings": len(e.finding_names()), "conditions": len(e.model.conditions),
                       "first_stage": "expected information gain over a naive-Bayes posterior",
                       "reranker": e.reranker is not None}
                for lang, e in self.engines.items()}


class NextQuestionService:
    """``/next-questions``: the inquiry engine of the language (questions about findings not yet established,
    ranked by how well they tell the plausible conditions apart), or the history pipeline's question bank
    (:class:`~medrank.pipelines.history.question_bank.NextQuestionRanker`) where no engine serves the complaint:
    a language without one (yet), given candidate questions, or a complaint in which no finding of the engine is
    found. ``inquiry`` may be set after construction (the engines build in the background)."""

    #: a question asked for a yes or a no ("Are you seeing double?", "Any jaundice recently?"), past a filler word
    #: or two; an open one ("Where do you see this rash?") asks more about a confirmed symptom, not it again
    YES_NO = EN_YES_NO_QUESTION
    #: how many questions past ``k`` the bank is asked for, to stand in for those dropped
    SPARE = 10
    #: languages whose engine asks even when nothing is read: the DXY bank holds only template questions about the
    #: engine's own symptoms, so a greeting got the templates nearest its words (肺部阴影? — a finding no parent
    #: can tell); the engine's questions are those that best tell its conditions apart from the prior
    #: (``bench/inquiry_from_nothing.py``). English keeps the bank: its first stage asks what the complaint is
    ENGINE_FROM_NOTHING = ("zh",)

    def __init__(self, ranker: NextQuestionRanker, inquiry: Inquiry | None = None, drop_repeats: bool = True) -> None:
        self.ranker = ranker
        self.inquiry = inquiry
        #: drop the bank's yes / no questions about a confirmed symptom (:meth:`_asks_again`; English, where the
        #: inquiry has a reader); False keeps the bank's list as it ranks it
        self.drop_repeats = drop_repeats
        #: a bank question → the symptom terms the inquiry's reader decides in it (its words are the bank's, not a
        #: user's: kept for the process, at most one entry per bank question)
        self._question_terms: dict[str, frozenset[str]] = {}

    def rank(self, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str] | None = None,
             candidates: Sequence[str] | None = None, language: str = "auto", k: int = 5,
             findings: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
        """``symptoms``: the terms the patient confirmed; ``None`` (not sent) lets the inquiry read them from the
        first patient turn (:meth:`Inquiry.symptoms_of`, reported as ``symptoms_read``)."""
        lang = conversation_language(dialogue, self.ranker.query(dialogue, symptoms or ()), language)
        inquiry = self.inquiry
        engine = inquiry.engines.get(lang) if inquiry is not None and candidates is None else None
        read: list[str] | None = None
        if engine is not None:
            symptoms, read, readings = inquiry.symptoms_of(engine, dialogue, symptoms)
            memo: dict[tuple[str, bool], list[Any]] = {}
            established = inquiry.established(engine, dialogue, findings, symptoms, readings, memo)
            # an age or a sex alone names nothing the engine asks about: the bank asks what brings the patient
            if states_a_finding(established) or lang in self.ENGINE_FROM_NOTHING:
                return {**self._engine_answer(inquiry, engine, dialogue, established, lang, k), "symptoms_read": read,
                        "symptoms_not_weighed": inquiry.not_weighed(engine, symptoms, readings, memo)}
        elif findings and candidates is None:
            raise UnavailableError(f"findings need the inquiry engine, which serves {sorted(inquiry.engines) if inquiry else []}"
                                   f" now, not {lang!r}" + ("" if inquiry else " (it is still being built)"))
        confirmed = frozenset(symptoms or ())
        reader = inquiry.reader_for(lang) if inquiry is not None else None
        # :data:`YES_NO` reads English questions (the DXY engine answers nearly every Chinese complaint)
        drops = self.drop_repeats and lang == "en" and bool(confirmed) and reader is not None and candidates is None
        try:
            out = self.ranker.rank(dialogue, list(symptoms or ()), candidates, lang, k + self.SPARE if drops else k)
        except NoQuestionBankError as exc:
            raise UnavailableError(str(exc)) from None
        results = out["results"]
        if drops:
            asks_again = self._asks_again([r["text"] for r in results], confirmed, reader, lang)
            results = [r for r, again in zip(results, asks_again, strict=True) if not again][:k]
            out = {**out, "retrieval": f"{out['retrieval']}; yes / no questions about a confirmed symptom dropped"}
        # the engine of the language read nothing it knows: say so, since no list of conditions follows
        note = None if engine is None else (
            f"Nothing in these words is one of the findings the {engine.name} engine asks about, so no list of possible "
            f"conditions is made yet (it weighs the {len(engine.model.conditions)} conditions of its case collection"
            + (f", consultations about {engine.population}" if getattr(engine, "population", None) else "")
            + "). These questions come from a bank of what doctors asked next in similar conversations; answer one, "
            "or tick a symptom.")
        return {**out, "engine": "question-bank", "findings": [], "should_stop": None, "symptoms_read": read,
                "note": note,
                "results": [{**r, "finding": None, "label": None, "options": [], "choice_only": False} for r in results]}

    def _asks_again(self, questions: Sequence[str], confirmed: frozenset[str], reader: SymptomReader,
                    lang: str) -> list[bool]:
        """Per bank question, whether it asks for a yes or a no about a symptom the patient confirmed: one of the
        terms the reader decides in the question is ("Are you seeing double?" once Diplopia is; "Any double vision
        or headaches?" too: the headache deserves a question of its own). The questions not read before are read
        in one call and remembered."""
        yes_no = [q for q in questions if self.YES_NO.match(q)]
        unread = list(dict.fromkeys(q for q in yes_no if q not in self._question_terms))
        found = reader(unread, lang) if unread else []
        if found is not None:  # None: the reader cannot read now; those questions stay, nothing is remembered
            self._question_terms.update({q: frozenset(names) for q, names in zip(unread, found, strict=True)})
        return [q in yes_no and bool(self._question_terms.get(q, frozenset()) & confirmed) for q in questions]

    @staticmethod
    def _engine_answer(inquiry: Inquiry, engine: Any, dialogue: Sequence[dict[str, str]], established: list[Any],
                       lang: str, k: int) -> dict[str, Any]:
        turns = inquiry.turns(dialogue)
        # a collection about children asks the adult who writes of themself about themself
        to_writer = engine.addresses_writer([t["text"] for t in dialogue if t["speaker"] == "patient"])
        questions = engine.next_questions(turns, established, k=k, to_writer=to_writer)
        answered = max(sum(t["speaker"] == "doctor" for t in dialogue),
                       sum(f.source.startswith("question:") for f in established))
        return {"model": engine_model(engine), "trained": engine.reranker is not None, "language": lang, "engine": engine.name,
                "retrieval": f"{engine.name}: questions about findings not yet established, ranked by expected "
                             "information gain over the conditions still plausible",
                "results": [inquiry.question(engine, q) for q in questions],
                "findings": [inquiry.describe(engine, f) for f in established],
                "should_stop": bool(engine.should_stop(established, answered, dialogue=turns))}

    def info(self) -> PipelineInfo:
        r = self.ranker
        details: dict[str, Any] = {lang: {"questions": len(b.ids), "retrieval": b.retrieval, "source": b.source,
                                          "rephrasings_dropped_at_cosine": r.distinct.get(lang)}
                                   for lang, b in r.banks.items()}
        inquiry = self.inquiry
        details["inquiry_engines"] = inquiry.info() if inquiry is not None else "still building (the question bank answers)"
        model = r.model if inquiry is None else \
            "; ".join(f"{lang}: {e.name}" for lang, e in inquiry.engines.items()) + f"; fallback: question bank ({r.model})"
        return PipelineInfo(model, "re-ranked" if r.reranker is not None else "first-stage", r.trained, details)


def states_a_finding(established: Sequence[Any]) -> bool:
    """Whether ``established`` holds a finding besides the patient's age and sex (which the English reader reads from
    "my 3 year old …", but which alone say nothing of a complaint)."""
    return any(f.name not in ("age", "sex") for f in established)


class DifferentialService:
    """``/differential``: findings (answered, and detected in the patient's words) → ranked conditions with their
    probabilities, the findings that raise each, and whether the inquiry may stop."""

    def __init__(self, inquiry: Inquiry) -> None:
        self.inquiry = inquiry

    def rank(self, findings: Sequence[dict[str, str]], language: str, k: int = 10,
             dialogue: Sequence[dict[str, str]] = (), symptoms: Sequence[str] | None = None) -> dict[str, Any]:
        """``symptoms`` as for :meth:`NextQuestionService.rank` (``None``: read from the first patient turn)."""
        from medrank.pipelines.history.inference import InquiryInputError

        inquiry = self.inquiry
        language = self._language(findings, dialogue, symptoms, language)
        engine = inquiry.engine(language)
        # the same findings /next-questions chose its questions by: answers, the patient's words, confirmed symptoms
        symptoms, read, readings = inquiry.symptoms_of(engine, dialogue, symptoms)
        memo: dict[tuple[str, bool], list[Any]] = {}
        established = inquiry.established(engine, dialogue, findings, symptoms, readings, memo)
        if not states_a_finding(established):
            if symptoms or any(t.get("text", "").strip() for t in dialogue if isinstance(t, dict)):
                # something was said: none of it is a finding this engine's conditions are weighed by
                raise InquiryInputError(
                    f"no finding to rank conditions by: none of the symptoms or words sent is one of the findings the "
                    f"{engine.name} engine weighs its {len(engine.model.conditions)} conditions by, so it ranks none of "
                    "them; send a finding it asks about, a confirmed symptom, or words that describe another symptom")
            raise InquiryInputError("no finding to rank conditions by: send at least one finding, a confirmed symptom, "
                                    "or a dialogue in which the patient describes a symptom")
        turns = inquiry.turns(dialogue) or None
        ranked = engine.differential(established, k=k, dialogue=turns)
        weigh_outside = getattr(engine, "outside_probability", None)  # an engine that weighs its conditions only lacks it
        outside = weigh_outside(established) if callable(weigh_outside) else None
        answered = sum(f.source.startswith("question:") for f in established)
        return {"model": engine_model(engine), "trained": engine.reranker is not None, "language": language,
                "engine": engine.name, "note": " ".join(filter(None, (NOT_A_DIAGNOSIS, coverage_note(engine),
                                                                     population_note(engine, dialogue),
                                                                     unexplained_note(engine, ranked)))),
                "results": [{"name": c.name, "label": engine.condition_label(c.name),
                             "probability": round(float(c.probability), 6), "supporting": list(c.supporting),
                             "supporting_labels": [supporting_text(engine, n, established) for n in c.supporting],
                             "unexplained": [finding_key(n, v) for n, v in c.unexplained],
                             "unexplained_labels": [finding_text(engine, n, v) for n, v in c.unexplained]}
                            for c in ranked],
                "outside_probability": None if outside is None else round(float(outside), 6),
                "findings": [inquiry.describe(engine, f) for f in established], "symptoms_read": read,
                "symptoms_not_weighed": inquiry.not_weighed(engine, symptoms, readings, memo),
                "should_stop": bool(engine.should_stop(established, answered, dialogue=turns))}

    def _language(self, findings: Sequence[dict[str, str]], dialogue: Sequence[dict[str, str]],
                  symptoms: Sequence[str] | None, language: str) -> str:
        """``language``, or for ``auto`` the language of the first patient turn (as ``/next-questions`` reads it),
        else of the confirmed symptoms, else the one engine that knows every finding name sent."""
        from medrank.pipelines.history.inference import InquiryInputError

        if language != "auto":
            return language
        if any(t["speaker"] == "patient" for t in dialogue) or symptoms:
            return conversation_language(dialogue, " ".join(symptoms or ()), language)
        names = {f["name"] for f in findings} - {"age", "sex"}
        knowing = [lang for lang, e in self.inquiry.engines.items() if names and names <= set(e.finding_names())]
        if len(knowing) == 1:
            return knowing[0]
        raise InquiryInputError("language 'auto' needs a patient turn, a confirmed symptom or findings that one engine "
                                f"knows: send language 'en' or 'zh' (engines served now: {sorted(self.inquiry.engines)})")

    def info(self) -> PipelineInfo:
        engines = self.inquiry.engines
        return PipelineInfo("; ".join(f"{lang}: {e.name}" for lang, e in engines.items()), "inquiry engine",
                            any(e.reranker is not None for e in engines.values()), self.inquiry.info())


# -- /similar-questions -------------------------------------------------------------------------------
@dataclass
class SimilarSearcher:
    """One language's :class:`~medrank.pipelines.similar.retrieval.SimilarQuestionSearcher` and what serves it."""

    searcher: Any
    model: str
    trained: bool
    recall: str
    source: str
    #: question text → {"answer", "url"} for the solved questions that have an answer
    answers: dict[str, dict[str, str]] = field(default_factory=dict)


class SimilarService:
    """New question → similar solved questions: BM25 top-20 recall, re-ranked by a trained matcher when present."""

    def __init__(self, searchers: dict[str, SimilarSearcher]) -> None:
        if not searchers:
            raise ValueError("no similar-question searcher")
        self.searchers = searchers

    def search(self, question: str, language: str = "auto", k: int = 5) -> dict[str, Any]:
        lang = resolve_language(question, language)
        s = self.searchers.get(lang)
        if s is None:
            raise UnavailableError(f"no similar-question corpus for language {lang!r}")
        results = s.searcher.search(question, k=k)
        return {"model": s.model, "trained": s.trained, "language": lang,
                "recall": f"{s.recall} over {len(s.searcher):,} questions ({s.source})",
                "results": [{**r.to_dict(), **self._answer(s, r.text)} for r in results]}

    @staticmethod
    def _answer(searcher: SimilarSearcher, text: str) -> dict[str, str | None]:
        found = searcher.answers.get(text)
        if not found:
            return {"answer": None, "answer_url": None}
        url = found.get("url") or ""
        # only a web page is offered as the source (the page links it); anything else is dropped
        return {"answer": found["answer"], "answer_url": url if url.startswith(("https://", "http://")) else None}

    def info(self) -> PipelineInfo:
        return PipelineInfo(
            "; ".join(f"{lang}: {s.model}" for lang, s in self.searchers.items()), "see details",
            any(s.trained for s in self.searchers.values()),
            {lang: {"model": s.model, "trained": s.trained, "questions": len(s.searcher), "recall": s.recall, "source": s.source,
                    "answered_questions": len(s.answers)}
             for lang, s in self.searchers.items()},
        )


@dataclass
class Services:
    """Every adapter the app serves; ``None`` = not part of this deployment, or (with a step in ``steps``) not
    built yet. ``steps``: the background build steps by name (``symptoms:hpo``, ``normalize`` …)."""

    symptoms: SymptomService | None = None
    normalize: NormalizeService | TrainedNormalizeService | None = None
    passages: CDVPassageService | BM25PassageService | None = None
    next_questions: NextQuestionService | None = None
    similar: SimilarService | None = None
    differential: DifferentialService | None = None
    steps: dict[str, Any] = field(default_factory=dict)
    #: language → {encoder, backend (torch | torch-bf16 | onnx | onnx-int8), reason, vectors} of the encoders loaded so far
    encoders: dict[str, dict[str, str]] = field(default_factory=dict)

    def available(self) -> dict[str, bool]:
        return {name: getattr(self, attr) is not None for name, attr in PIPELINES.items()}

    def steps_of(self, pipeline: str) -> list[Any]:
        return [s for n, s in self.steps.items() if n == pipeline or n.startswith(pipeline + ":")]

    def state(self, pipeline: str) -> str:
        """``ready``, ``building 45 %``, ``waiting``, ``failed: reason`` or ``not served``."""
        steps = self.steps_of(pipeline)
        if getattr(self, PIPELINES[pipeline]) is not None:
            busy = [s for s in steps if s.state != "ready"]
            return "ready" if not busy else "ready; still building " + ", ".join(f"{s.name} ({s.detail()})" for s in busy)
        if not steps:
            return "not served"
        failed = [s for s in steps if s.state == "failed"]
        if failed and all(s.state in ("failed", "ready") for s in steps):
            return failed[0].detail()
        building = [s for s in steps if s.state == "building"]
        return (building or steps)[0].detail()

    def models(self) -> list[dict[str, Any]]:
        from medrank.service.training import train_command

        out = []
        for name, attr in PIPELINES.items():
            svc = getattr(self, attr)
            state = self.state(name)
            if svc is not None:
                info = svc.info()
                out.append({"pipeline": name, "state": state, "model": info.model, "version": info.version,
                            "trained": info.trained, "form": "trained" if info.trained else "zero-shot / first-stage",
                            "train_command": train_command(name), "details": info.details,
                            "encoders": dict(self.encoders)})
            elif state != "not served":
                out.append({"pipeline": name, "state": state, "model": "(not ready yet)", "version": "", "trained": False,
                            "form": "not ready yet", "train_command": train_command(name), "details": {}})
        return out


PIPELINES = {"symptoms": "symptoms", "normalize": "normalize", "passages": "passages",
             "next-questions": "next_questions", "similar-questions": "similar", "differential": "differential"}
