"""The inquiry engine: established findings -> next questions, differential and stopping rule.

State is the dialogue so far (free text turns, used by the optional re-ranker) plus the findings
established so far. The first stage ranks the open questions by expected information gain over the
naive-Bayes posterior (:mod:`.first_stage`); a trained re-ranker may reorder its top candidates
given the dialogue text. The differential is the posterior, sharpened or flattened by a
temperature; the engine stops when the top condition's probability reaches ``threshold`` or the
turn budget is spent. Temperature, differential cut-off and threshold are tuned by
:func:`medrank.pipelines.history.inquiry.simulate.tune` on a part of the training records held out
from the likelihood estimates (never on the validation carve-out the reports use).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.first_stage import InformationGain
from medrank.pipelines.history.inquiry.kb import InquiryInputError
from medrank.pipelines.history.inquiry.posterior import (
    ABSENT,
    PRESENT,
    UNSURE,
    AnyOf,
    NaiveBayes,
    Observation,
    alternative_groups,
)
from medrank.pipelines.history.inquiry.posterior import outside_probability as open_world_share

#: limits on what a caller may send
MAX_TURNS = 1000
MAX_TURN_CHARS = 20_000
MAX_FINDINGS = 1000
MAX_K = 100


def _takes_spoken(detector: Any) -> bool:
    """Whether a detector's ``detect`` reads a term with the patient's words it was decided on (``spoken``)."""
    return _detect_takes_spoken(type(detector))


@functools.lru_cache(maxsize=64)
def _detect_takes_spoken(kind: type) -> bool:
    # read once per detector class: a request asks for every confirmed symptom's name
    import inspect

    try:
        return "spoken" in inspect.signature(kind.detect).parameters
    except (TypeError, ValueError, AttributeError):
        return False


@dataclass(frozen=True)
class Finding:
    name: str  # evidence / symptom id in the engine's KB (e.g. "E_91" or "发热")
    value: str  # "present" | "absent" | "unsure" (categorical / multi-choice evidences: a value code)
    source: str = "self-report"  # or "question:<finding name>" / "doctor"
    #: read from the patient's words (:meth:`InquiryEngine.detect_findings`), not answered: the values of a
    #: multi-choice finding read so are taken as "one of these at least" (:class:`AnyOf`), never as an answer
    #: that also denies every other value
    read: bool = False


@dataclass(frozen=True)
class ProposedQuestion:
    finding: str
    text: str
    score: float
    stage: str  # "kb" (first stage) | "reranked"


@dataclass(frozen=True)
class RankedCondition:
    name: str
    probability: float
    supporting: tuple[str, ...]  # finding names that raise it
    #: (finding name, value) pairs established present that no training case of the condition shows
    unexplained: tuple[tuple[str, str], ...] = ()


@dataclass
class Calibration:
    """Settings tuned on held-out training records (see :func:`.simulate.tune`)."""

    threshold: float = 0.9  # stop when the top condition's probability reaches this
    temperature: float = 1.0  # differential probabilities = softmax(log posterior / temperature)
    cutoff: float = 0.01  # conditions at or above this probability form the differential set
    budget: int = 30  # turn budget
    text_weight: float = 0.0  # weight of the self-report prior (engines with a text prior)
    #: the open-world class (:mod:`.outside`): its prior (0: closed world), the least likelihood of a stated finding
    #: and how far its likelihoods are drawn from a listed condition's towards the mean (1: the product of the means)
    outside_prior: float = 0.0
    outside_leak: float = 0.0
    outside_shrink: float = 1.0
    tuned_on: dict[str, Any] = field(default_factory=dict)


#: reorders candidate question texts given the dialogue text: (dialogue, texts) -> scores
Reranker = Callable[[str, Sequence[str]], Sequence[float]]


class InquiryEngine:
    """Next questions, differential and stopping rule over one knowledge base."""

    def __init__(self, language: str, model: NaiveBayes, labels: dict[str, str], condition_labels: dict[str, str],
                 calibration: Calibration, *, demographics: bool = False, name: str = "",
                 detector: Any = None, detector_factory: Callable[[], Any] | None = None,
                 reranker: Reranker | None = None, rerank_k: int = 30,
                 value_meanings: dict[str, dict[str, str]] | None = None,
                 differential_model: Any = None, text_prior: Any = None, text_weight: float = 0.0,
                 presence_weight: float = 0.0, follow_ups: Mapping[str, tuple[str, str]] | None = None,
                 questions: Mapping[str, str] | None = None, questions_to_writer: Mapping[str, str] | None = None,
                 population: str | None = None) -> None:
        self.language = language
        self.model = model
        self.labels = labels
        self.condition_labels = condition_labels
        self.calibration = calibration
        self.gain = InformationGain(model, presence_weight)
        self.demographics = demographics
        self.name = name or f"{language}-kb"
        self._detector = detector
        self._detector_factory = detector_factory
        self.reranker = reranker
        #: which backend runs the re-ranker and why (set by :func:`.build.attach_reranker`)
        self.reranker_backend: dict[str, str] | None = None
        #: what reads the finding detector's queries, where it was chosen (:func:`.build.serve_detector_on_onnx`)
        self.detector_backend: dict[str, str] | None = None
        self.rerank_k = rerank_k
        self.value_meanings = value_meanings or {}
        self.differential_model = differential_model
        self.text_prior = text_prior
        self.text_weight = text_weight
        #: finding → (main finding, its question once the main finding is present): a question that says only what
        #: its main one says asks for what is left (:func:`.findings.follow_up_questions`)
        self.follow_ups = dict(follow_ups or {})
        #: finding → the question that asks about it where its label is no question (a DXY symptom's name, 过敏: "请问
        #: 孩子最近有过敏吗?"); a finding not here is asked in its label's words (DDXPlus's are questions)
        self.questions = dict(questions or {})
        #: finding → its question addressed to the one writing, where :attr:`questions` asks about a child (DXY's
        #: "请问孩子最近有过敏吗?": "请问您最近有过敏吗?"), asked when the patient writes of themself
        #: (:meth:`addresses_writer`)
        self.questions_to_writer = dict(questions_to_writer or {})
        #: whom the case collection's consultations are about, where not anyone ("children": DXY's)
        self.population = population
        self._order = {n: i for i, n in enumerate(self.finding_names())}
        #: a question's wording (lower case) -> its finding, built on first use (:meth:`asked_findings`)
        self._wording_of: dict[str, str] | None = None

    # ------------------------------------------------------------------ vocabulary
    def finding_names(self) -> list[str]:
        names = list(self.model.variables)
        return [*names, "age", "sex"] if self.demographics else names

    def finding_label(self, name: str) -> str:
        if name in self.labels:
            return self.labels[name]
        if self.demographics and name == "age":
            return "Age (years)"
        if self.demographics and name == "sex":
            return "Sex (M or F)"
        raise InquiryInputError(f"unknown finding {name!r}")

    def condition_label(self, name: str) -> str:
        return self.condition_labels.get(name, name)

    def finding_description(self, name: str) -> str:
        """What the finding is, short enough for a list ("a fever" for "Do you have a fever (...)?")."""
        from medrank.pipelines.history.inquiry.findings import finding_phrase

        return finding_phrase(self.finding_label(name))

    def refines(self, name: str, other: str) -> bool:
        """Whether finding ``name`` is ``other`` said more closely: its description is ``other``'s followed by what
        qualifies it ("a cough that produces colored or more abundant sputum than usual" refines "a cough"; "intense
        coughing fits" and "vomit after coughing" do not), or one of its wordings is one of ``other``'s followed by
        the blood it brings up or passes (HPO's "Vomiting blood", Hematemesis, refines "Vomiting"), or it is a finding
        of symptoms in general under a circumstance, which says when whatever symptom it is read beside comes on
        ("symptoms that are increased with physical exertion …" of "out of breath walking up stairs" says more of the
        shortness of breath; its name cannot say the stairs)."""
        if name == other or name not in self.labels or other not in self.labels:
            return False
        mine, theirs = self.finding_description(name).lower(), self.finding_description(other).lower()
        if re.match(rf"{re.escape(theirs)}\s+(?:that|which|with)\b", mine) is not None:
            return True
        if self._detector is None and self._detector_factory is None:
            return False  # no wordings beside the descriptions
        rows_of = getattr(self.detector, "rows_of", None)
        if rows_of is None or name not in rows_of or other not in rows_of:
            return False
        under = getattr(self.detector, "under_circumstance", {})
        if any(j in under for j in rows_of[name]) and not any(j in under for j in rows_of[other]):
            return True
        wordings = self.detector.descriptions
        return any(re.fullmatch(rf"{re.escape(wordings[j].lower())}\s+blood", wordings[i].lower()) is not None
                   for i in rows_of[name] for j in rows_of[other])

    def finding_options(self, name: str) -> list[tuple[str, str]]:
        """(value code, meaning) of a categorical or multi-choice finding; empty for a yes / no one."""
        var = self.model.variables.get(name)
        if var is None or var.kind == "B":
            return []
        meanings = self.value_meanings.get(name, {})
        return [(v, meanings.get(v, v)) for v in var.values]

    def asks_which(self, name: str) -> bool:
        """Whether the finding's answer is one of its values, never yes / no: a categorical or multi-choice member
        of a question group, asked only once the group's main finding is present ("Do you feel pain somewhere?"
        after pain is established asks where)."""
        var = self.model.variables.get(name)
        return var is not None and var.kind != "B" and var.group != var.name

    def value_label(self, name: str, value: str) -> str:
        """A finding's value as a person reads it: yes / no / not sure, or the meaning of a value code."""
        plain = {PRESENT: "yes", ABSENT: "no", UNSURE: "not sure"}
        if value in plain:
            return plain[value]
        return self.value_meanings.get(name, {}).get(value, value)

    # ------------------------------------------------------------------ validation
    def observed(self, findings: Sequence[Finding]) -> dict[str, Any]:
        """Findings as the model's observation map; raises :class:`InquiryInputError` on bad input."""
        if isinstance(findings, (str, bytes)) or not isinstance(findings, Sequence):
            raise InquiryInputError("findings must be a list of Finding")
        if len(findings) > MAX_FINDINGS:
            raise InquiryInputError(f"too many findings ({len(findings)}; at most {MAX_FINDINGS})")
        out: dict[str, Any] = {}
        multi: dict[str, set[str]] = {}
        answered_multi: set[str] = set()  # multi-choice findings with a value answered, not only read from text
        for f in findings:
            if not isinstance(f, Finding):
                raise InquiryInputError(f"findings must be Finding objects, got {type(f).__name__}")
            name, value = f.name, f.value
            if self.demographics and name in ("age", "sex"):
                value = self._demographic(name, value)
            elif name not in self.model.variables:
                raise InquiryInputError(f"unknown finding {name!r}; see finding_names()")
            else:
                var = self.model.variables[name]
                if var.kind == "M":
                    if value not in (PRESENT, ABSENT, UNSURE):
                        var.value_index(value)
                    multi.setdefault(name, set()).add(value)
                    if not f.read:
                        answered_multi.add(name)
                    continue
                if value not in (PRESENT, ABSENT, UNSURE) and (var.kind == "B" or value not in var.values):
                    allowed = "present, absent, unsure" + (f" or a value code ({', '.join(var.values[:12])})"
                                                           if var.kind == "C" else "")
                    raise InquiryInputError(f"finding {name!r}: value {value!r} not understood; use {allowed}")
            if name in out and out[name] != value:
                raise InquiryInputError(f"contradictory findings: {name!r} is both {out[name]!r} and {value!r}")
            out[name] = value
        for name, values in multi.items():
            var = self.model.variables[name]
            if len(values) > 1 and (values & {UNSURE, ABSENT, var.default}):
                raise InquiryInputError(f"contradictory findings: {name!r} is both {sorted(values)}")
            if values == {UNSURE}:
                out[name] = UNSURE
            elif values <= {ABSENT, var.default}:
                out[name] = ABSENT
            elif name not in answered_multi and PRESENT not in values:
                out[name] = AnyOf(sorted(values))
            else:
                out[name] = tuple(sorted(values))
        return Observation(out, alternatives=self._alternatives(findings, out))

    def _alternatives(self, findings: Sequence[Finding], out: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Pairs of findings read from the patient's words that are two codings of one complaint (the detector's
        ``alternative_codings``: a yes / no finding whose own words read as values of another, "a sore throat" as pain
        at the pharynx): the naive Bayes weighs them as one of them at least (:class:`.posterior.Observation`). Only
        for values read, never answered (an :class:`AnyOf`)."""
        codings = getattr(self._detector, "alternative_codings", None) if self._detector is not None else None
        if not codings:
            return []
        read = {f.name for f in findings if f.read and f.value == PRESENT}
        return [(name, other) for name, (other, values) in codings.items()
                if name in read and isinstance(out.get(other), AnyOf) and set(out[other]) & values]

    @staticmethod
    def _demographic(name: str, value: str) -> str:
        if name == "sex":
            v = str(value).strip().upper()
            if v not in ("M", "F"):
                raise InquiryInputError(f"finding 'sex' must be M or F, got {value!r}")
            return v
        try:
            age = int(float(value))
        except (TypeError, ValueError):
            raise InquiryInputError(f"finding 'age' must be a number of years, got {value!r}") from None
        if not 0 <= age <= 130:
            raise InquiryInputError(f"finding 'age' must be between 0 and 130, got {age}")
        return str(age)

    @staticmethod
    def check_dialogue(dialogue: Sequence[str]) -> list[str]:
        if isinstance(dialogue, (str, bytes)) or not isinstance(dialogue, Sequence):
            raise InquiryInputError("dialogue must be a list of turns (strings)")
        if len(dialogue) > MAX_TURNS:
            raise InquiryInputError(f"dialogue too long ({len(dialogue)} turns; at most {MAX_TURNS})")
        turns = []
        for t in dialogue:
            if not isinstance(t, str):
                raise InquiryInputError("every dialogue turn must be a string")
            if len(t) > MAX_TURN_CHARS:
                raise InquiryInputError(f"a dialogue turn is too long ({len(t)} characters; at most {MAX_TURN_CHARS})")
            turns.append(t)
        if not any(t.strip() for t in turns):
            raise InquiryInputError("the dialogue is empty: send at least the patient's first statement")
        return turns

    # ------------------------------------------------------------------ inference
    def log_posterior(self, findings: Sequence[Finding], dialogue: Sequence[str] | None = None) -> np.ndarray:
        """Log posterior over conditions given the findings (and the self-report, with a text prior)."""
        return self.log_posterior_observed(self.observed(findings), findings, dialogue)

    def log_posterior_observed(self, observed: dict[str, Any], findings: Sequence[Finding],
                       dialogue: Sequence[str] | None) -> np.ndarray:
        if self.text_prior is None or self.text_weight <= 0 or not dialogue:
            return self.model.log_posterior(observed)
        first = next((t for t in dialogue if t.strip()), "")
        if not first:
            return self.model.log_posterior(observed)
        # the text prior stands for the self-report and the findings read out of it
        reported = {f.name for f in findings if f.source == "self-report"}
        rest = Observation({k: v for k, v in observed.items() if k not in reported},
                           alternatives=getattr(observed, "alternatives", ()))
        return self.model.log_posterior(rest, base=self.text_weight * self.text_prior.log_proba(first))

    def probabilities(self, log_posterior: np.ndarray) -> np.ndarray:
        z = log_posterior / self.calibration.temperature
        return np.exp(z - np.logaddexp.reduce(z))

    def first_stage(self, observed: dict[str, Any], k: int, log_posterior: np.ndarray | None = None) -> list[tuple[str, float]]:
        logp = self.model.log_posterior(observed) if log_posterior is None else log_posterior
        return self.gain.rank(np.exp(logp), observed, k)

    def next_questions(self, dialogue: Sequence[str], findings: Sequence[Finding], k: int = 5,
                       *, rerank: bool = True, to_writer: bool = False) -> list[ProposedQuestion]:
        """The ``k`` questions to ask next (see the module); ``to_writer``: worded to the one writing
        (:attr:`questions_to_writer`, where :meth:`addresses_writer` says so of the patient's turns)."""
        turns = self.check_dialogue(dialogue)
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InquiryInputError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
        observed = self.observed(findings)
        use_reranker = rerank and self.reranker is not None
        logp = self.log_posterior_observed(observed, findings, turns)
        ranked = self.first_stage(observed, max(k, self.rerank_k) if use_reranker else k, logp)
        if not use_reranker or len(ranked) < 2:
            return [ProposedQuestion(n, self.question_text(n, observed, to_writer), round(s, 6), "kb")
                    for n, s in ranked[:k]]
        assert self.reranker is not None
        # the re-ranker reads the questions as it was trained on them: the knowledge base's words
        texts = [self.labels[n] for n, _ in ranked]
        scores = list(self.reranker(self.reranker_text(turns), texts))
        order = sorted(range(len(ranked)), key=lambda i: (-float(scores[i]), i))[:k]
        return [ProposedQuestion(ranked[i][0], self.question_text(ranked[i][0], observed, to_writer),
                                 round(float(scores[i]), 6), "reranked") for i in order]

    def asked_findings(self, question: str) -> list[str]:
        """The yes / no findings a doctor's question asks about: the finding whose question it is word for word (the
        engine's own, as ``/next-questions`` words it, or its label: "请问孩子最近有疱疹吗?", "疱疹"); else, for a
        question asked for a yes or a no (:func:`.findings.asks_yes_or_no`), those the detector reads in it past its
        interrogative opening ("Have you vomited?": vomiting; "有没有咳嗽？": 咳嗽), where (English) each word it names
        is a word of theirs; else none."""
        return self._question_reading(question)[0]

    def _question_reading(self, question: str) -> tuple[list[str], bool]:
        """:meth:`asked_findings`, and whether the question names where (a place read beside them: "Any back pain?")."""
        from medrank.pipelines.history.inquiry.findings import (
            EN_PAIN,
            asks_yes_or_no,
            evidence_description,
            question_words,
            shares_a_word,
        )

        if not isinstance(question, str):
            return [], False
        own = self._question_of(question)
        if own is not None:
            return ([own] if not self.finding_options(own) else []), False
        if not asks_yes_or_no(question, self.language):
            return [], False
        read = self.detect_findings(evidence_description(question) if self.language == "en" else question, term=True,
                                    question=True)
        asked = list(dict.fromkeys(f.name for f in read if not self.finding_options(f.name)))
        words_of = getattr(self.detector, "words_of", None)
        if self.language == "en" and callable(words_of):
            # a question that names more than its findings asks about something else too ("Have you applied anything
            # to the rash?", "Did you have any complications with the surgery?"): its yes / no is not theirs
            theirs = [w for name in asked for w in words_of(name)]
            pain = "pain" in theirs  # "hurt", "sore", "aching" are words of a finding of pain
            if any(not shares_a_word([w], theirs) and not (pain and EN_PAIN.fullmatch(w))
                   for w in question_words(question)):
                return [], False
        return asked, any(self.finding_options(f.name) for f in read)

    def answered_findings(self, question: str, text: str) -> list[tuple[str, str]]:
        """(finding, value) pairs a patient's turn answers to a doctor's question. The engine's own question about a
        categorical or multi-choice finding ("Where is the pain located?", "How intense is the pain?") is answered by
        the meanings of its values that the turn names, as the page words them ("lower chest, breast(R)"; "7": a
        categorical finding takes the first named, a multi-choice one each); a yes / no question by
        :meth:`answer_value`, a yes for each of :meth:`asked_findings`, a no for the first unless the question names
        a place."""
        if not isinstance(question, str) or not isinstance(text, str):
            return []
        own = self.choice_question(question)
        if own is not None:
            values = list(dict.fromkeys(v for _, _, v in self._named_values(own, text)))
            return [(own, v) for v in (values[:1] if self.model.variables[own].kind == "C" else values)]
        value = self.answer_value(text)
        if value is None:
            return []
        asked, placed = self._question_reading(question)
        # a yes says each finding the question reads (its pain with "Does it hurt when you breathe in?"); a no or a not
        # sure only the one it asks about first, and nothing of a finding asked about at one place: the patient who
        # does not hurt on breathing in, or has no back pain, may hurt all the same
        if value != PRESENT:
            asked = [] if placed else asked[:1]
        return [(name, value) for name in asked]

    def _named_values(self, own: str, text: str) -> list[tuple[int, int, str]]:
        """(start, end, value) of each value of choice finding ``own`` that ``text`` names by its meaning, in the
        order named: the longest meanings first, each on words no longer one took ("under the jaw" is not also
        "jaw")."""
        named: list[tuple[int, int, str]] = []
        taken = [False] * len(text)
        for value, meaning in sorted(self.finding_options(own), key=lambda vm: -len(vm[1])):
            for m in re.finditer(rf"(?<!\w){re.escape(meaning)}(?!\w)", text, re.IGNORECASE) if meaning.strip() else ():
                if not any(taken[m.start():m.end()]):
                    taken[m.start():m.end()] = [True] * (m.end() - m.start())
                    named.append((m.start(), m.end(), value))
        return sorted(named)

    def choice_remainder(self, question: str, text: str) -> str | None:
        """What a patient's turn says besides its choice, when ``question`` is the engine's own question of values:
        the turn with each value it names replaced by a clause break ("forehead, and I have a fever": ", , and I have
        a fever"), to be read as the patient's words; None for any other question."""
        own = self.choice_question(question) if isinstance(question, str) and isinstance(text, str) else None
        if own is None:
            return None
        out, at = [], 0
        for start, end, _ in self._named_values(own, text):
            out += [text[at:start], " , "]
            at = end
        return "".join([*out, text[at:]])

    def choice_question(self, question: str) -> str | None:
        """The categorical or multi-choice finding whose own question ``question`` is, word for word ("Where is the
        pain located?"), else None: its answer is chosen among the finding's values."""
        own = self._question_of(question) if isinstance(question, str) else None
        return own if own is not None and self.finding_options(own) else None

    def _question_of(self, question: str) -> str | None:
        """The finding whose question ``question`` is, word for word (any of :meth:`question_wordings`), or None."""
        if self._wording_of is None:
            self._wording_of = {w.strip().lower(): n for n in self.model.variables for w in self.question_wordings(n)}
        return self._wording_of.get(question.strip().lower())

    def answer_value(self, text: str) -> str | None:
        """What a patient's turn answers to a yes / no question (:func:`.findings.answer_value`)."""
        from medrank.pipelines.history.inquiry.findings import answer_value

        return answer_value(text, self.language) if isinstance(text, str) else None

    def question_wordings(self, name: str) -> tuple[str, ...]:
        """Every way the question about ``name`` is asked: the knowledge base's words and its follow-up wording."""
        follow_up = self.follow_ups.get(name)
        asked = [q for q in (self.questions.get(name), self.questions_to_writer.get(name)) if q]
        return (self.finding_label(name), *asked, *((follow_up[1],) if follow_up is not None else ()))

    def question_text(self, name: str, observed: Mapping[str, Any], to_writer: bool = False) -> str:
        """The question about ``name`` as asked now: the knowledge base's words, or its follow-up wording once its
        main finding is present (:attr:`follow_ups`: "Where is the pain located?", not "Do you feel pain
        somewhere?" to a patient who said where it hurts); ``to_writer``: addressed to the one writing where the
        collection's question asks about a child (:attr:`questions_to_writer`)."""
        follow_up = self.follow_ups.get(name)
        if follow_up is not None and observed.get(follow_up[0]) == PRESENT:
            return follow_up[1]
        return (to_writer and self.questions_to_writer.get(name)) or self.questions.get(name) or self.labels[name]

    def addresses_writer(self, patient_turns: Sequence[str]) -> bool:
        """Whether the questions are worded to the one writing: the collection asks about a child
        (:attr:`questions_to_writer`) and the patient's turns speak of themself, of no child
        (:func:`.kb.zh_speaks_of_self`)."""
        from medrank.pipelines.history.inquiry.kb import zh_speaks_of_self

        texts = [t for t in patient_turns if isinstance(t, str)]
        return bool(self.questions_to_writer) and self.language == "zh" and zh_speaks_of_self(texts)

    @staticmethod
    def reranker_text(turns: Sequence[str]) -> str:
        """The dialogue as the re-rankers read it: "speaker: text" lines, the patient opening, then
        question / answer turns (the format they were trained on)."""
        said = [t.strip() for t in turns if t.strip()]
        return "\n".join(f"{'patient' if i % 2 == 0 else 'doctor'}: {t}" for i, t in enumerate(said))

    def differential(self, findings: Sequence[Finding], k: int = 10,
                     dialogue: Sequence[str] | None = None) -> list[RankedCondition]:
        """Top ``k`` conditions with probabilities, the findings that raise each and those it leaves unexplained
        (no training case of it shows them); ``dialogue`` (optional)
        lets an engine with a text prior read the self-report."""
        if not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InquiryInputError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
        observed = self.observed(findings)
        turns = self.check_dialogue(dialogue) if dialogue else None
        probs = self.probabilities(self.log_posterior_observed(observed, findings, turns))
        # the conditions share what the outside class leaves (nothing in a closed world)
        probs = probs * (1.0 - (self.outside_observed(observed) or 0.0))
        top = np.argsort(-probs, kind="stable")[:k]
        prior = np.exp(self.model.log_prior)
        present = [(n, v) for n, v in observed.items() if v not in (UNSURE, ABSENT) and n not in ("age", "sex")]
        # per finding, over every condition at once: whether it raises the condition (likelier under it than on
        # average) and, per value, whether no training case of the condition shows it. Unshown findings stay
        # unexplained: the naive Bayes only lowers such a condition by a floor probability, so it can top a
        # differential that leaves the very complaint unexplained (a knee complaint among chest conditions), and
        # smoothing alone can make an unshown finding likelier than average, so it never "fits" either
        raises = {}
        for name, value in present:
            ll = self.model.log_likelihood(name, value)
            raises[name] = ll > float(np.log(np.exp(ll) @ prior))
        unshown = []
        for name, value in present:
            if isinstance(value, AnyOf):  # unexplained when no value read is shown: then each of them is listed
                missing = ~self.model.shown(name, value)
                unshown += [(name, v, missing) for v in value]
            else:
                unshown += [(name, v, ~self.model.shown(name, v))
                            for v in ((value,) if isinstance(value, str) else sorted(value))]
        # codings of one complaint (:class:`.posterior.Observation`): a condition that shows one of them explains each
        for group in alternative_groups(observed, self.model.states_present):
            missing = np.logical_and.reduce([m for name, _, m in unshown if name in group])
            unshown = [(name, v, missing if name in group else m) for name, v, m in unshown]
        out = []
        for ci in top:
            unexplained = tuple((name, v) for name, v, missing in unshown if missing[ci])
            left = {name for name, _ in unexplained}
            support = tuple(name for name, _ in present if raises[name][ci] and name not in left)
            out.append(RankedCondition(self.model.conditions[ci], round(float(probs[ci]), 6), support, unexplained))
        return out

    @property
    def open_world(self) -> bool:
        """Whether the engine weighs a condition outside its collection (:mod:`.outside`): a calibrated outside prior,
        and no self-report prior (the outside class compares likelihoods of the findings alone)."""
        return self.calibration.outside_prior > 0.0 and not (self.text_prior is not None and self.text_weight > 0)

    def outside_probability(self, findings: Sequence[Finding]) -> float | None:
        """P(the patient's condition is none of the collection's | the findings); None for a closed-world engine."""
        return self.outside_observed(self.observed(findings))

    def outside_observed(self, observed: dict[str, Any]) -> float | None:
        if not self.open_world:
            return None
        inside = float(np.logaddexp.reduce(self.model.log_joint(observed)))
        return open_world_share(inside, self.model.log_outside(observed, self.calibration.outside_leak,
                                                               self.calibration.outside_shrink),
                                self.calibration.outside_prior)

    def membership(self, observed: dict[str, Any]) -> np.ndarray | None:
        """P(condition belongs in the differential), when the engine has a differential model."""
        return None if self.differential_model is None else self.differential_model.membership(observed)

    def differential_set(self, findings: Sequence[Finding] | dict[str, Any]) -> list[str]:
        """The conditions the engine keeps in the differential: membership (or, without a differential
        model, calibrated probability) at or above ``calibration.cutoff``."""
        observed = findings if isinstance(findings, dict) else self.observed(findings)
        scores = self.membership(observed)
        if scores is None:
            scores = self.probabilities(self.model.log_posterior(observed))
        return [c for c, p in zip(self.model.conditions, scores, strict=True) if p >= self.calibration.cutoff]

    def should_stop(self, findings: Sequence[Finding], turns: int, dialogue: Sequence[str] | None = None) -> bool:
        if not isinstance(turns, int) or turns < 0:
            raise InquiryInputError(f"turns must be a non-negative integer, got {turns!r}")
        if turns >= self.calibration.budget:
            return True
        observed = self.observed(findings)
        logp = self.log_posterior_observed(observed, findings, self.check_dialogue(dialogue) if dialogue else None)
        if not self.gain.scores(np.exp(logp), observed):
            return True  # nothing left to ask
        return float(self.probabilities(logp).max()) >= self.calibration.threshold

    # ------------------------------------------------------------------ free text
    def when_detector_built(self, adapt: Callable[[Any], Any]) -> None:
        """Have the finding detector go through ``adapt(detector) -> detector`` when it is built (now, if it is)."""
        if self._detector is not None:
            self._detector = adapt(self._detector)
            return
        factory = self._detector_factory
        if factory is not None:
            self._detector_factory = lambda: adapt(factory())

    @property
    def detector(self) -> Any:
        if self._detector is None:
            if self._detector_factory is None:
                raise InquiryInputError("this engine has no finding detector")
            self._detector = self._detector_factory()
        return self._detector

    def detect_findings(self, text: str, term: bool = False, question: bool = False,
                        spoken: str | None = None) -> list[Finding]:
        """The findings read in a patient's words; ``term``: ``text`` is the name of a symptom term the patient
        confirmed, read as the detector reads a term's name (English: only into a finding whose description shares
        one of its words, an antecedent only if the name names each of its words, and, with ``spoken``, the
        patient's words the term was decided on, only if those name one of its words), or with ``question`` a doctor's
        question read so (its caller checks the question's words against the findings' instead). A detector that
        takes no ``spoken`` reads the term without it."""
        if not isinstance(text, str):
            raise InquiryInputError("text must be a string")
        if len(text) > MAX_TURN_CHARS:
            raise InquiryInputError(f"text too long ({len(text)} characters; at most {MAX_TURN_CHARS})")
        if not text.strip():
            return []
        if term and spoken is not None and _takes_spoken(self.detector):
            found = self.detector.detect(text, term=True, question=question, spoken=spoken)
        elif term:
            found = self.detector.detect(text, term=True, question=question)
        else:
            found = self.detector.detect(text)
        out = [Finding(name, value, "self-report", read=True) for name, value in found]
        if self.demographics and self.language == "en" and not term and not question:
            # the age and sex a patient states ("my 3 year old", "I'm a 45-year-old woman"): the tables weigh them
            from medrank.pipelines.history.inquiry.findings import read_age_sex

            age, sex = read_age_sex(text)
            out += [Finding(name, value, "self-report", read=True)
                    for name, value in (("age", None if age is None else str(age)), ("sex", sex)) if value is not None]
        return out
