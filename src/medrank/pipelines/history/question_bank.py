"""Next history-taking questions from a question bank: recall, the asked-question filter, rephrasings dropped.

The first stage of the history pipeline as served: the query is the confirmed symptoms plus the
patient's last turns; a :class:`QuestionBank` (one language's doctor questions behind a BM25 /
dense / hybrid index) recalls candidates; questions the doctor already asked are never proposed
again, and, where a cosine threshold was chosen for the encoder (:data:`DISTINCT_BY_ENCODER`), a
question that only rephrases a better-ranked or an already asked one is dropped
(:func:`distinct_questions`). An optional trained re-ranker re-scores the recalled list.

A bank built on the history pipeline's first stage (:meth:`QuestionBank.from_first_stage`: what doctors asked next
after similar turns of the training dialogues, the question's own similarity to them, BM25 and how often it is
asked; :mod:`medrank.pipelines.history.first_stage`) ranks its questions from the dialogue itself rather than
from the query text: the first stage the trained re-rankers were trained over, and the one
``bench/history_first_stage.py`` measures.

:class:`NextQuestionRanker` is what a caller (the service, a script) holds; it is thread-safe
(no per-request state).
"""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index import BM25Index
from medrank.index.topk import topk_stable
from medrank.text import EN_PERSON
from medrank.utils.vectors import unit_rows


class NoQuestionBankError(LookupError):
    """No question bank is held for the requested language (give candidates instead)."""


FIRST_STAGE = "first-stage (re-ranker not trained)"


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


_PRONOUN_I = re.compile(r"\bi(?=\b|')")


def display_question(text: str) -> str:
    """A normalised (lower-case) bank question as a person reads it: its first letter and the pronoun "I" upper-case."""
    text = _PRONOUN_I.sub("I", text.strip())
    return text[:1].upper() + text[1:]


#: the words that open a question asking the patient something (an auxiliary, a wh-word, "any …", "tell me …")
_ASKING = frozenset("are is am was were do does did have has had can could would will should shall may might how what "
                    "when where which who whom whose why any anything anyone anybody tell".split())
#: a confirmation tag closing a statement ("… okay?", "… correct?", "… is that right?")
_TAG = re.compile(r"\b(?:okay|ok|correct|right|alright|all right)\?$")


def is_tagged_statement(question: str) -> bool:
    """Whether a bank question is a statement with a confirmation tag, not a question that asks for something: the
    plan announced ("i'm gon na prescribe you some meloxicam … okay?") or what the record says confirmed ("you're
    seventy eight years old correct?", "here it says you had severe sinusitis … correct?"). A pre-consultation has
    neither a plan nor a record to confirm. A question opened by an auxiliary or a wh-word stays one, whatever its last
    word ("are you doing okay?", "which side left or right?")."""
    words = question.lower().split()
    return len(words) >= 2 and words[0] not in _ASKING and _TAG.search(" ".join(words)) is not None


#: a definite reference ("the pain", "your asthma", "the worst pain"): the one or two words after it
_DEFINITE = re.compile(r"\b(?:the|your|this|that|these|those)\s+([a-z]+)(?:\s+([a-z]+))?", re.IGNORECASE)


@functools.cache
def finding_words() -> frozenset[str]:
    """Words that name a finding by themselves: the one-word names and synonyms of HPO terms, lower case, four
    letters or more ("pain", "dizziness", "rash", "asthma"; the Human Phenotype Ontology of
    :func:`medrank.data.hpo.load_hpo`). Empty when HPO cannot be read."""
    from medrank.data.hpo import load_hpo

    try:
        concepts = load_hpo()
    except (OSError, ImportError, ValueError):
        return frozenset()
    return frozenset(w.lower() for c in concepts for w in (c.name, *c.synonyms)
                     if len(w) >= 4 and re.fullmatch(r"[A-Za-z]+", w))


def presupposed_findings(question: str) -> frozenset[str]:
    """The findings an English question takes as said: a finding word (:func:`finding_words`) right after "the" /
    "your" ("What have you taken for the pain?", "Does the dizziness make you nauseous?", "How is your asthma?").
    Asked of a patient who said none of it ("my voice is hoarse"), it tells them they said what they did not."""
    words = finding_words()
    return frozenset(w for m in _DEFINITE.finditer(question.lower()) for w in m.groups() if w and w in words)


def mentions_pain(texts: Sequence[str]) -> bool:
    """Whether any of ``texts`` speaks of pain: "pain", "hurts", "sore", "aching", "headache"
    (:data:`~medrank.pipelines.history.inquiry.findings.EN_PAIN`)."""
    from medrank.pipelines.history.inquiry.findings import EN_PAIN

    return any(EN_PAIN.search(t) for t in texts)


def said(finding: str, texts: Sequence[str]) -> bool:
    """Whether ``texts`` (the dialogue's turns, the confirmed symptoms' names) say ``finding``: its first four letters
    in them ("dizz" in "I feel dizzy", "feve" in "feverish"), or, for pain, any word of pain (:func:`mentions_pain`)."""
    if finding in ("pain", "pains"):
        return mentions_pain(texts)
    stem = finding[:4]
    return any(stem in t.lower() for t in texts)


_EN_THIRD_PERSON = r"he|she|him|his|her|hers|himself|herself"
#: a question about a third person ("Did he have a fever?", "What is his living status?")
_THIRD_PERSON = re.compile(rf"\b(?:{_EN_THIRD_PERSON})\b", re.I)
#: a dialogue that speaks of someone or something else than the one speaking: a pronoun of the third person, or a
#: person ("my son", "our 2 year old")
_ANOTHER = re.compile(rf"\b(?:{_EN_THIRD_PERSON}|they|them|their|{EN_PERSON})\b", re.I)


#: a question that asks after a state the doctor already knows of: "Are you still taking that?", "Are you still having
#: a lot of reflux symptoms …?" (follow-up visits in MTS-Dialog)
_STILL = re.compile(r"\bstill\b", re.I)


def asks_after_the_known(question: str, doctor: Sequence[str]) -> bool:
    """Whether an English question asks whether something is *still* so before the doctor has asked anything: at a
    pre-consultation's opening nothing is known yet for it to go on."""
    return not doctor and _STILL.search(question) is not None


def asks_of_another(question: str, texts: Sequence[str]) -> bool:
    """Whether an English question speaks of a third person that none of ``texts`` (the dialogue's turns, the confirmed
    symptoms) speaks of: MTS-Dialog's doctors often talk to a parent or a carer ("What is his living status?"), which
    a patient who speaks of themselves ("I keep forgetting things") is not."""
    return _THIRD_PERSON.search(question) is not None and not any(_ANOTHER.search(t) for t in texts)


#: a question that asks why the patient came: "What brings you here today?", "What seems to be the problem?", "How can I
#: help you?" (MTS-Dialog's doctors open with them; "What happened?" asks after an event and stays)
_WHY_HERE = re.compile(r"\bwhat\s+(?:brings|brought)\s+you\b|\bwhat\s+seems\s+to\s+be\s+the\s+(?:problem|trouble|issue)\b"
                       r"|\breason\s+for\s+(?:your|the|today's)\s+visit\b|\bhow\s+can\s+i\s+help\b"
                       r"|\bwhat\s+can\s+i\s+do\s+for\s+you\b|\bwhat\s+(?:is|'s)\s+going\s+on\s+with\s+you\b"
                       r"|\bwhat\s+are\s+you\s+here\s+for\b", re.I)


def asks_for_the_complaint(question: str) -> bool:
    """Whether an English question asks why the patient came: once the patient has named a symptom, it asks again
    what they just said."""
    return _WHY_HERE.search(question) is not None


#: cosine at which two MiniLM question vectors count as one question (the history question bank's clustering threshold)
DISTINCT_COSINE = 0.80

#: per encoder name: (cosine threshold, compare the bank-centred vectors) at which two bank questions are one.
#: MiniLM: the history question bank's clustering threshold on raw cosines. e5-small compresses its raw cosines
#: (any two DXY questions sit close together), so its vectors are first centred on the bank's mean, and the
#: threshold is the best-F1 one for "two DXY questions name the same symptom" over all pairs of the bank
#: (`bench/service_next_questions.py` calibrates it and writes the figures to `bench/results/`).
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
                 vectors: np.ndarray | None = None, centre: bool = False, first_stage: Any = None) -> None:
        self.language = language
        #: a :class:`~medrank.pipelines.history.first_stage.FirstStage` over these questions (ids ``<language>-<its
        #: id>``) that ranks them from the dialogue; None: ``index`` ranks them from the query text
        self.first_stage = first_stage
        if first_stage is not None:
            # every phrasing merged into a question → its id: a question the doctor asked in any of them is asked
            self._phrasing = {_norm(m): f"{language}-{q.id}" for q in first_stage.bank for m in (q.text, *q.members)}
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
        #: first-stage question ids (without the language prefix) never proposed (:meth:`from_first_stage`)
        self.never_asked: frozenset[str] = frozenset()

    @classmethod
    def from_first_stage(cls, language: str, stage: Any, source: str, leave_out_statements: bool = True) -> QuestionBank:
        """The canonical questions of a history first stage (:func:`~medrank.pipelines.history.builders.load_first_stage`),
        ranked by it; its vectors (the encoder's, unit length) find rephrasings. With ``leave_out_statements``, the
        statements with a confirmation tag (:func:`is_tagged_statement`) are never proposed."""
        ids = [f"{language}-{q.id}" for q in stage.bank]
        weights = ", ".join(f"{k} {v:g}" for k, v in stage.weights.items() if v)
        retrieval = (f"history first stage (what doctors asked next after the {stage.knn_k} most similar of "
                     f"{len(stage.memory.tails):,} training turns, question similarity, BM25, how often asked; "
                     f"weights {weights})"
                     if stage.memory is not None else f"history first stage (weights {weights})")
        bank = cls(language, ids, [display_question(q.text) for q in stage.bank], None, retrieval, source,
                   vectors=np.asarray(stage.vectors, dtype=np.float32), first_stage=stage)
        bank.never_asked = frozenset(q.id for q in stage.bank if is_tagged_statement(q.text)) if leave_out_statements \
            else frozenset()
        return bank

    def asked_ids(self, dialogue: Sequence[dict[str, str]]) -> set[str]:
        """Ids of the bank questions the doctor already asked in ``dialogue`` (any merged phrasing of them;
        first-stage banks only)."""
        from medrank.pipelines.history.builders.mts_aci import questions_in

        out = set()
        for t in dialogue:
            if t["speaker"] == "doctor":
                for q in questions_in(t["text"]) or [t["text"]]:
                    if (qid := self._phrasing.get(_norm(q))) is not None:
                        out.add(qid)
        return out

    def rank_dialogue(self, dialogue: Sequence[dict[str, str]], k: int) -> list[tuple[str, float]]:
        """The first stage's top ``k`` (id, score) for ``dialogue``, questions already asked left out."""
        from medrank.pipelines.history.data import Turn

        stage = self.first_stage
        turns = [Turn(t["speaker"], t["text"]) for t in dialogue]
        asked = {i.removeprefix(f"{self.language}-") for i in self.asked_ids(dialogue)} | self.never_asked
        ids, scores = stage.retrieve([turns], [asked], k=k)[0]
        return [(f"{self.language}-{i}", s) for i, s in zip(ids, scores, strict=True)]

    def comparable(self, vectors: np.ndarray) -> np.ndarray:
        """Encoder vectors (the passage side) as this bank compares questions: centred if it centres, unit length."""
        vectors = np.asarray(vectors, dtype=np.float32)
        return unit_rows(vectors - self.mean if self.mean is not None else vectors)

    def vectors_of(self, ids: Sequence[str]) -> np.ndarray | None:
        """The stored comparison vectors of ``ids`` (None when the bank holds none)."""
        return None if self.vectors is None else self.vectors[[self._row[i] for i in ids]]


class NextQuestionRanker:
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
        """The trained re-ranker over the first-stage candidates (dialogue rendered as ``speaker: text`` lines)."""
        if self.reranker is None or not rows:
            return rows[:k]
        text = "\n".join(f"{t['speaker']}: {t['text']}" for t in dialogue)
        scores = np.asarray(self.reranker.score(text, [r["text"] for r in rows]), dtype=np.float32)
        order = topk_stable(scores, min(k, len(rows)))
        return [{**rows[j], "score": round(float(scores[j]), 6)} for j in order]

    def warm(self) -> None:
        """Read now what the first English request would otherwise read: the finding words (:func:`finding_words`)."""
        if "en" in self.banks:
            finding_words()

    def query(self, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str]) -> str:
        patient = [t["text"] for t in dialogue if t["speaker"] == "patient"][-self.history_turns:]
        return " ".join([*symptoms, *patient]) or dialogue[-1]["text"]

    def rank(self, dialogue: Sequence[dict[str, str]], symptoms: Sequence[str] = (), candidates: Sequence[str] | None = None,
             language: str = "en", k: int = 5) -> dict[str, Any]:
        """The ``k`` next questions for ``dialogue`` (``[{"speaker": "patient"|"doctor", "text"}]``) in ``language``
        (``en`` | ``zh``; the caller decides it, e.g. with :func:`medrank.text.detect_language` on :meth:`query`)."""
        query = self.query(dialogue, symptoms)
        lang = language
        asked = {_norm(t["text"]) for t in dialogue if t["speaker"] == "doctor"}
        if candidates is not None:
            return self._rank_candidates(dialogue, query, lang, candidates, asked, k)
        bank = self.banks.get(lang)
        if bank is None:
            raise NoQuestionBankError(f"no question bank for language {lang!r}; give candidates instead")
        threshold = self.distinct.get(lang)
        encoder = self.encoders.get(lang) if threshold is not None else None
        # rephrasings are dropped after ranking, so recall a deeper list than k when they are (a re-ranker
        # scores its trained depth; the first stage alone can go deeper at little cost)
        if self.reranker is not None:
            depth = max(k, self.rerank_depth)
        else:
            depth = max(3 * k, self.rerank_depth) if encoder is not None else k
        if bank.first_stage is not None:
            ranked = bank.rank_dialogue(dialogue, depth + len(asked) + 5)
        else:
            ranking = bank.index.search([query], k=depth + len(asked) + 5)[0]
            ranked = list(zip(ranking.ids, ranking.scores, strict=True))
        # an English question that takes a finding as said is not asked before it is ("What have you taken for the
        # pain?" after "my voice is hoarse")
        texts = [t["text"] for t in dialogue] + list(symptoms)
        # nor one about a third person of whom nobody spoke ("What is his living status?" after "I keep forgetting"),
        # nor one whether something is still so before the doctor asked anything ("Are you still taking that?"), nor,
        # once the patient has named a symptom, why they came ("What brings you here today?" after "my eyes are dry")
        rows = [{"id": i, "text": bank.texts[i], "score": round(float(s), 6)}
                for i, s in ranked if _norm(bank.texts[i]) not in asked
                and not (lang == "en" and (not all(said(f, texts) for f in presupposed_findings(bank.texts[i]))
                                           or asks_of_another(bank.texts[i], texts)
                                           or asks_after_the_known(bank.texts[i], asked)
                                           or (bool(symptoms) and asks_for_the_complaint(bank.texts[i]))))][:depth]
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
