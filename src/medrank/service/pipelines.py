"""One adapter per endpoint: each wraps a pipeline and says which model served the answer.

Adapters are plain objects built by :mod:`medrank.service.build` (or directly
in tests) and are called from worker threads; they hold no per-request state.
"""

from __future__ import annotations

import numbers
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index import BM25Index
from medrank.index.topk import topk_stable
from medrank.service.backends import KnowledgeBase
from medrank.utils.vectors import unit_rows

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def detect_language(text: str) -> str:
    """``zh`` when CJK characters carry the text (one CJK character counts as three Latin letters), ``en`` when
    Latin letters do, ``unknown`` otherwise (other scripts, or no letters at all: digits, emoji, punctuation)."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if cjk and 3 * cjk >= latin:
        return "zh"
    other = sum(ch.isalpha() for ch in text) - cjk - latin  # Cyrillic, Greek, Arabic, kana, accented letters…
    return "en" if latin and latin >= other else "unknown"


def resolve_language(text: str, language: str) -> str:
    """``language``, or the language :func:`detect_language` finds when it is ``auto``.

    Raises :class:`UnavailableError` when the text is in neither served language: the knowledge bases are
    English and Chinese, and a nearest neighbour in the wrong language would be a confident wrong answer."""
    if language != "auto":
        return language
    found = detect_language(text)
    if found == "unknown":
        raise UnavailableError("could not tell the language of the text: medrank serves English and Chinese "
                               "(pass language='en' or 'zh' to choose one)")
    return found


class UnavailableError(LookupError):
    """The requested knowledge base / language is not served by this deployment (→ 404 / 503)."""


@dataclass
class PipelineInfo:
    """What ``/models`` reports for one pipeline."""

    model: str
    version: str
    trained: bool
    details: dict[str, Any] = field(default_factory=dict)


# -- /symptoms ----------------------------------------------------------------------------------------
class SymptomService:
    """Patient text → top-k terms of a knowledge base (HPO / ICD-10-CM for English, CHIP-CDN ICD-10 for Chinese)."""

    def __init__(self, kbs: dict[str, KnowledgeBase], defaults: dict[str, str] | None = None) -> None:
        if not kbs:
            raise ValueError("no knowledge base to detect symptoms with")
        self.kbs = kbs
        self.defaults = defaults or {}
        for lang, name in self.defaults.items():
            if name not in kbs:
                raise ValueError(f"default knowledge base {name!r} for {lang} is not loaded")

    def pick(self, language: str, kb: str) -> KnowledgeBase:
        if kb != "auto":
            if kb not in self.kbs:
                raise UnavailableError(f"unknown knowledge base {kb!r}; served: {sorted(self.kbs)}")
            return self.kbs[kb]
        name = self.defaults.get(language) or next((n for n, b in self.kbs.items() if b.info.language == language), None)
        if name is None:
            raise UnavailableError(f"no symptom knowledge base for language {language!r}")
        return self.kbs[name]

    def detect(self, query: str, language: str = "auto", kb: str = "auto", k: int = 5) -> dict[str, Any]:
        lang = resolve_language(query, language)
        base = self.pick(lang, kb)
        if language == "auto" and base.info.language != lang:
            # nearest neighbours across languages are confident wrong answers; an explicit language overrides this
            raise UnavailableError(f"knowledge base {base.info.name!r} is in {base.info.language!r}, the text reads as "
                                   f"{lang!r}: choose a {lang!r} knowledge base, or pass language={base.info.language!r} "
                                   "to search it anyway")
        hits = base.search([query], k)[0]
        return {"model": base.info.model, "trained": base.info.trained, "language": lang, "kb": base.info.name,
                "results": [{"id": h.id, "name": h.name, "score": h.score, "codes": list(h.codes)} for h in hits]}

    def info(self) -> PipelineInfo:
        return PipelineInfo(
            "; ".join(f"{n}: {b.info.model}" for n, b in self.kbs.items()),
            "; ".join(f"{n}: {b.info.version}" for n, b in self.kbs.items()),
            any(b.info.trained for b in self.kbs.values()),
            {"knowledge_bases": {n: b.describe() for n, b in self.kbs.items()}, "defaults": self.defaults},
        )


# -- /normalize ---------------------------------------------------------------------------------------
class NormalizeService:
    """Procedure mention → standard procedure names with their codes."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb

    def normalize(self, mention: str, k: int = 5) -> dict[str, Any]:
        hits = self.kb.search([mention], k)[0]
        return {"model": self.kb.info.model, "trained": self.kb.info.trained, "kb": self.kb.info.name,
                "results": [{"id": h.id, "name": h.name, "score": h.score, "codes": list(h.codes)} for h in hits]}

    def info(self) -> PipelineInfo:
        return PipelineInfo(self.kb.info.model, self.kb.info.version, self.kb.info.trained, self.kb.describe())


class TrainedNormalizeService:
    """Issue 4's recall-and-rank normaliser (MTCG → KAR → FB or the learned fusion, :class:`~medrank.pipelines.
    procedures.normalizer.ProcedureNormalizer`): the candidates with their fused scores, plus the terms its count rule selects."""

    def __init__(self, normalizer: Any, codes: dict[str, tuple[str, ...]], model: str, version: str) -> None:
        if not callable(getattr(normalizer, "normalize_one", None)):
            raise ValueError("normalizer must have normalize_one(text) -> Prediction")
        self.normalizer = normalizer
        self.codes = codes
        self._info = PipelineInfo(model, version, True, {"standard_names": len(codes)})
        # the normaliser toggles eval mode and fills caches per call: one request at a time
        self._lock = threading.Lock()

    def normalize(self, mention: str, k: int = 5) -> dict[str, Any]:
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
        ranked = self._rank(entity, aspect, k)
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
    """The zero-shot form: BM25 over whole passages (query ``entity aspect``), sentences scored by encoder cosine."""

    def __init__(self, passages: Sequence[dict[str, Any]], index: BM25Index, encoder: Encoder | None, version: str) -> None:
        self.passages = list(passages)
        self.position = {p["id"]: i for i, p in enumerate(self.passages)}
        self.by_doc: dict[str, list[int]] = {}
        for i, p in enumerate(self.passages):
            self.by_doc.setdefault(p["doc_id"], []).append(i)
        self.index = index
        self.encoder = encoder
        scorer = f"cosine({encoder.name})" if encoder is not None else "BM25 of the sentence"
        self.sentence_scores = f"zero-shot: {scorer} between 'entity aspect' and each sentence"
        self._info = PipelineInfo("BM25 (zero-shot; no trained CDV index found)", version, False,
                                  {"passages": len(self.passages), "sentence_scorer": scorer})

    @staticmethod
    def build(passages: Sequence[dict[str, Any]], encoder: Encoder | None, version: str) -> BM25PassageService:
        index = BM25Index(language="en").build([p["id"] for p in passages], [p["text"] for p in passages])
        return BM25PassageService(passages, index, encoder, version)

    def _sentence_scores(self, query: str, sentences: list[str]) -> np.ndarray:
        if not sentences:
            return np.zeros(0, np.float32)
        if self.encoder is not None:
            q = self.encoder.encode([query], kind="query", show_progress=False)[0]
            s = self.encoder.encode(sentences, kind="passage", batch_size=64, show_progress=False)
            return s @ q
        tmp = BM25Index(language="en").build([str(i) for i in range(len(sentences))], sentences)
        return tmp.query_scores(query)

    def search(self, entity: str, aspect: str, k: int = 5) -> dict[str, Any]:
        from medrank.pipelines.passages.inference import bm25_query_text, split_sentences

        query = bm25_query_text(entity, aspect)
        scores = self.index.query_scores(query)
        idx = [i for i in topk_stable(scores, min(k, len(scores))) if scores[i] > 0]
        results, curve = [], None
        if idx:
            top_doc = self.passages[idx[0]]["doc_id"]
            members = set(idx) | set(self.by_doc[top_doc])
            sents = {i: [s for s, _ in split_sentences(self.passages[i]["text"])] for i in members}
            order = sorted(members)
            flat = [s for i in order for s in sents[i]]
            sscore = self._sentence_scores(f"{entity} {aspect}", flat)
            offsets, pos = {}, 0
            for i in order:
                offsets[i] = (pos, pos + len(sents[i]))
                pos += len(sents[i])
            for i in idx:
                a, b = offsets[i]
                p = self.passages[i]
                results.append({"passage_id": p["id"], "document": p.get("title", p["doc_id"]), "aspect": p.get("label"),
                                "score": round(float(scores[i]), 4), "text": p["text"],
                                "sentences": [{"text": t, "score": round(float(s), 4)}
                                              for t, s in zip(flat[a:b], sscore[a:b], strict=True)]})
            doc_members = self.by_doc[top_doc]
            a0 = offsets[doc_members[0]][0]
            spans = []
            for i in doc_members:
                a, b = offsets[i]
                seg = sscore[a:b]
                spans.append({"passage_id": self.passages[i]["id"], "aspect": self.passages[i].get("label"), "start": a - a0,
                              "end": b - a0, "score": round(float(seg.mean()) if len(seg) else 0.0, 4)})
            b_end = offsets[doc_members[-1]][1]
            curve = {"document": self.passages[idx[0]].get("title", top_doc),
                     "scores": [round(float(s), 4) for s in sscore[a0:b_end]], "passages": spans}
        return {"model": self._info.model, "trained": False, "sentence_scores": self.sentence_scores,
                "results": results, "curve": curve}

    def info(self) -> PipelineInfo:
        return self._info


# -- /next-questions ----------------------------------------------------------------------------------
FIRST_STAGE = "first-stage (re-ranker not trained)"


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


#: cosine at which two MiniLM question vectors count as one question (the history question bank's clustering threshold)
DISTINCT_COSINE = 0.80

#: per encoder name: (cosine threshold, compare the bank-centred vectors) at which two bank questions are one.
#: MiniLM: the history question bank's threshold on raw cosines. e5-small: its raw cosines are compressed (median
#: 0.90 between any two questions of the DXY bank), so its vectors are first centred on the bank's mean; 0.45 is
#: then the best-F1 threshold for "two DXY questions name the same symptom" over all pairs of the bank (precision
#: 0.85, recall 0.88, F1 0.864, and within 0.02 of it from 0.40 to 0.50). Raw cosines peak about as high (F1 0.852
#: at 0.964) but fall to 0.29 at 0.94 and 0.48 at 0.98 (`bench/service_next_questions.py`). "Same symptom" is the
#: only truth the DXY bank offers: it also counts two different questions about one symptom as one.
DISTINCT_BY_ENCODER: dict[str, tuple[float, bool]] = {"minilm": (DISTINCT_COSINE, False), "e5-small": (0.45, True)}


def distinct_questions(rows: list[dict[str, Any]], row_vectors: np.ndarray, asked_vectors: np.ndarray, threshold: float,
                       k: int) -> list[dict[str, Any]]:
    """The first ``k`` of ``rows`` (best first) that rephrase neither a row kept before them nor an asked question.

    ``row_vectors`` / ``asked_vectors``: unit vectors of the rows and of the questions the doctor
    already asked; two questions are one when their cosine is ``>= threshold`` — what merges
    phrasings in the history question bank (:mod:`medrank.pipelines.history.builders.question_bank`).
    """
    if len(row_vectors) != len(rows):
        raise ValueError(f"{len(row_vectors)} row vectors for {len(rows)} rows")
    seen = [np.asarray(v, dtype=np.float32) for v in asked_vectors]
    kept: list[dict[str, Any]] = []
    for row, vec in zip(rows, np.asarray(row_vectors, dtype=np.float32), strict=True):
        if len(kept) == k:
            break
        if seen and float(np.max(np.stack(seen) @ vec)) >= threshold - 1e-6:
            continue
        kept.append(row)
        seen.append(vec)
    return kept


class QuestionBank:
    """History-taking questions of one language behind a recall index (BM25 / dense / hybrid)."""

    def __init__(self, language: str, ids: Sequence[str], texts: Sequence[str], index: Any, retrieval: str, source: str,
                 vectors: np.ndarray | None = None, centre: bool = False) -> None:
        self.language = language
        self.ids = list(ids)
        self.texts = dict(zip(ids, texts, strict=True))
        self.index = index
        self.retrieval = retrieval
        self.source = source
        if vectors is not None and len(vectors) != len(self.ids):
            raise ValueError(f"{len(vectors)} vectors for {len(self.ids)} questions")
        if centre and vectors is None:
            raise ValueError("centre=True needs the bank's vectors (their mean is what is subtracted)")
        #: the bank's mean vector, subtracted before questions are compared (``centre=True``), else None
        self.mean = np.asarray(vectors, dtype=np.float32).mean(axis=0) if centre else None
        #: the questions' comparison vectors (rows in ``ids`` order, from the dense index's when it has one; unit
        #: length, centred when asked): rephrasings are found without encoding the bank at every request
        self.vectors = self.comparable(vectors) if vectors is not None else None
        self._row = {qid: n for n, qid in enumerate(self.ids)}

    def comparable(self, vectors: np.ndarray) -> np.ndarray:
        """Encoder vectors (the passage side) as this bank compares questions: centred if it centres, unit length."""
        vectors = np.asarray(vectors, dtype=np.float32)
        return unit_rows(vectors - self.mean if self.mean is not None else vectors)

    def vectors_of(self, ids: Sequence[str]) -> np.ndarray | None:
        """The stored comparison vectors of ``ids`` (None when the bank holds none)."""
        return None if self.vectors is None else self.vectors[[self._row[i] for i in ids]]


class NextQuestionService:
    """Dialogue so far → the next history-taking questions, best first (first stage: recall over a question bank).

    The query is the confirmed symptoms plus the patient's last turns; questions the
    doctor already asked are never proposed again. Given ``candidates``, only those are
    ranked (cosine with the query encoder, or BM25 without one).

    ``distinct`` (language → cosine): from that language's bank, a question is also dropped when it
    only rephrases a better-ranked one or one the doctor already asked, i.e. when the cosine of the
    language's encoder vectors reaches the threshold. A bank of real doctor questions holds many
    phrasings of one question ("Have you had a fever?", "Do you have any fever?"), and five of them
    are no list of next questions. The threshold belongs to the encoder (:data:`DISTINCT_BY_ENCODER`:
    MiniLM's raw cosines at 0.80, e5-small's bank-centred ones at 0.45, the bank built with
    ``centre=True``). Given ``candidates`` are ranked as given: the caller chose them.
    """

    def __init__(self, banks: dict[str, QuestionBank], encoders: dict[str, Encoder] | None = None,
                 model: str = FIRST_STAGE, trained: bool = False, history_turns: int = 3,
                 reranker: Any = None, rerank_depth: int = 30, distinct: dict[str, float] | None = None) -> None:
        if reranker is not None and not callable(getattr(reranker, "score", None)):
            raise ValueError("reranker must have score(dialogue: str, questions: list[str]) -> list[float]")
        for lang, threshold in (distinct or {}).items():
            if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.0 < threshold <= 1.0:
                raise ValueError(f"distinct[{lang!r}] must be a cosine in (0, 1], got {threshold!r}")
            if lang not in banks:
                raise ValueError(f"distinct[{lang!r}]: no question bank for {lang!r} (banks: {sorted(banks)})")
            if lang not in (encoders or {}):
                raise ValueError(f"distinct[{lang!r}] needs an encoder for {lang!r}")
            stored = banks[lang].vectors
            if DISTINCT_BY_ENCODER.get(encoders[lang].name, (0.0, False))[1] and banks[lang].mean is None:
                raise ValueError(f"distinct[{lang!r}]: {encoders[lang].name}'s threshold is for vectors centred on the bank, "
                                 "but the bank has no mean (build it with vectors= and centre=True)")
            if stored is not None and stored.shape[1] != encoders[lang].dim:
                raise ValueError(f"the {lang!r} bank's vectors have {stored.shape[1]} dimensions, its encoder "
                                 f"{encoders[lang].dim}: they must come from the same encoder")
        self.distinct = {lang: float(t) for lang, t in (distinct or {}).items()}
        self.banks = banks
        self.encoders = encoders or {}
        self.model = model
        self.trained = trained
        self.history_turns = history_turns
        self.reranker = reranker
        self.rerank_depth = rerank_depth

    def _rerank(self, dialogue: Sequence[dict[str, str]], rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
        """Issue 6's re-ranker over the first-stage candidates (dialogue rendered as ``speaker: text`` lines)."""
        if self.reranker is None or not rows:
            return rows[:k]
        text = "\n".join(f"{t['speaker']}: {t['text']}" for t in dialogue)
        scores = np.asarray(self.reranker.score(text, [r["text"] for r in rows]), dtype=np.float32)
        order = topk_stable(scores, min(k, len(rows)))
        return [{**rows[j], "score": round(float(scores[j]), 6)} for j in order]

    def _query(self, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str]) -> str:
        patient = [t["text"] for t in dialogue if t["speaker"] == "patient"][-self.history_turns:]
        return " ".join([*symptoms, *patient]) or dialogue[-1]["text"]

    def rank(self, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str] = (), candidates: Sequence[str] | None = None,
             language: str = "auto", k: int = 5) -> dict[str, Any]:
        query = self._query(dialogue, symptoms)
        lang = resolve_language(query, language)
        asked = {_norm(t["text"]) for t in dialogue if t["speaker"] == "doctor"}
        if candidates is not None:
            return self._rank_candidates(dialogue, query, lang, candidates, asked, k)
        bank = self.banks.get(lang)
        if bank is None:
            raise UnavailableError(f"no question bank for language {lang!r}; give candidates instead")
        threshold = self.distinct.get(lang)
        encoder = self.encoders.get(lang) if threshold is not None else None
        # rephrasings are dropped after ranking, so recall a deeper list than k when they are (a re-ranker
        # scores its trained depth; the first stage alone can go deeper at little cost)
        if self.reranker is not None:
            depth = max(k, self.rerank_depth)
        else:
            depth = max(3 * k, self.rerank_depth) if encoder is not None else k
        ranking = bank.index.search([query], k=depth + len(asked) + 5)[0]
        rows = [{"id": i, "text": bank.texts[i], "score": round(float(s), 6)}
                for i, s in zip(ranking.ids, ranking.scores, strict=True) if _norm(bank.texts[i]) not in asked][:depth]
        retrieval = f"{bank.retrieval} over {len(bank.ids):,} questions ({bank.source})"
        if encoder is None:
            return {"model": self.model, "trained": self.trained, "language": lang, "retrieval": retrieval,
                    "results": self._rerank(dialogue, rows, k)}
        doctor = [t["text"] for t in dialogue if t["speaker"] == "doctor"]
        return {"model": self.model, "trained": self.trained, "language": lang,
                "retrieval": f"{retrieval}; rephrasings dropped (cosine >= {threshold:.2f} of "
                             f"{'bank-centred ' if bank.mean is not None else ''}{encoder.name} vectors)",
                "results": self._distinct(bank, self._rerank(dialogue, rows, len(rows)), doctor, encoder, threshold, k)}

    @staticmethod
    def _distinct(bank: QuestionBank, rows: list[dict[str, Any]], doctor: list[str], encoder: Encoder, threshold: float,
                  k: int) -> list[dict[str, Any]]:
        if not rows:
            return []
        stored = bank.vectors_of([r["id"] for r in rows])
        to_encode = [r["text"] for r in rows] if stored is None else []  # one encoder call for rows and asked questions
        encoded = bank.comparable(encoder.encode(to_encode + doctor, kind="passage", show_progress=False)) \
            if to_encode or doctor else np.zeros((0, 0), np.float32)
        row_vectors = stored if stored is not None else encoded[: len(rows)]
        asked = encoded[len(to_encode):] if doctor else np.zeros((0, row_vectors.shape[1]), np.float32)
        return distinct_questions(rows, row_vectors, asked, threshold, k)

    def _rank_candidates(self, dialogue: Sequence[dict[str, str]], query: str, lang: str, candidates: Sequence[str],
                         asked: set[str], k: int) -> dict[str, Any]:
        keep = [(i, c) for i, c in enumerate(candidates) if _norm(c) not in asked]
        encoder = self.encoders.get(lang)
        texts = [c for _, c in keep]
        if not texts:
            scores = np.zeros(0, np.float32)
        elif encoder is not None:
            q = encoder.encode([query], kind="query", show_progress=False)[0]
            scores = encoder.encode(texts, kind="passage", show_progress=False) @ q
        else:
            scores = BM25Index(language=lang).build([str(i) for i in range(len(texts))], texts).query_scores(query)
        method = f"cosine({encoder.name}) over the given candidates" if encoder is not None else "BM25 over the given candidates"
        depth = max(k, self.rerank_depth if self.reranker is not None else k)
        order = topk_stable(np.asarray(scores, dtype=np.float32), min(depth, len(texts))) if texts else []
        rows = [{"id": f"candidate-{keep[j][0]}", "text": keep[j][1], "score": round(float(scores[j]), 6)} for j in order]
        return {"model": self.model, "trained": self.trained, "language": lang, "retrieval": method,
                "results": self._rerank(dialogue, rows, k)}

    def info(self) -> PipelineInfo:
        return PipelineInfo(self.model, "re-ranked" if self.reranker is not None else "first-stage", self.trained,
                            {lang: {"questions": len(b.ids), "retrieval": b.retrieval, "source": b.source,
                                    "rephrasings_dropped_at_cosine": self.distinct.get(lang)}
                             for lang, b in self.banks.items()})


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
    """Every adapter the app serves; ``None`` = the pipeline is not part of this deployment."""

    symptoms: SymptomService | None = None
    normalize: NormalizeService | TrainedNormalizeService | None = None
    passages: CDVPassageService | BM25PassageService | None = None
    next_questions: NextQuestionService | None = None
    similar: SimilarService | None = None

    def available(self) -> dict[str, bool]:
        return {name: getattr(self, attr) is not None for name, attr in PIPELINES.items()}

    def models(self) -> list[dict[str, Any]]:
        out = []
        for name, attr in PIPELINES.items():
            svc = getattr(self, attr)
            if svc is not None:
                info = svc.info()
                out.append({"pipeline": name, "model": info.model, "version": info.version, "trained": info.trained,
                            "details": info.details})
        return out


PIPELINES = {"symptoms": "symptoms", "normalize": "normalize", "passages": "passages",
             "next-questions": "next_questions", "similar-questions": "similar"}
