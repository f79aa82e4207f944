"""Request and response models of the HTTP API (they define the OpenAPI schema).

The hard caps here (text length, list lengths, ``k``) are the largest any
deployment accepts; :class:`~medrank.service.settings.ServiceSettings` may set
lower ones, checked by the app with the same 422 error shape.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

MAX_TEXT_CHARS = 2000
MAX_LIST_ITEMS = 50
MAX_K = 50
#: findings of one inquiry (answers and detected ones)
MAX_FINDINGS = 200


def _encodable(text: str) -> str:
    if "\x00" in text:
        raise ValueError("text must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return text


Text = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(_encodable)
]
ShortText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), AfterValidator(_encodable)
]
# strict: JSON true, "3" and 3.0 are not counts (lax pydantic would take them as 1 and 3)
K = Annotated[int, Field(ge=1, le=MAX_K, strict=True, description="How many results to return.")]
Language = Literal["auto", "en", "zh"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    model: str = Field(description="The model (and version) that served this response.")
    trained: bool = Field(description="False when the pipeline serves its zero-shot / first-stage form.")


# -- /symptoms ----------------------------------------------------------------------------------------
class SymptomsRequest(_Request):
    query: Text = Field(description="What the patient says, in English or Chinese.", examples=["I have a bad headache and feel sick"])
    language: Language = "auto"
    kb: str = Field("auto", max_length=32, pattern=r"^[a-z0-9\-]+$",
                    description="Knowledge base: 'auto' (HPO for English, CHIP-CDN ICD-10 for Chinese) or a name from /models.")
    k: K = 5


class ConceptResult(BaseModel):
    id: str
    name: str
    score: float
    codes: list[str] = []


class DetectedTermOut(BaseModel):
    id: str
    name: str
    probability: float = Field(description="Calibrated probability that the text mentions this term.")
    span: list[int] | None = Field(None, description="[start, end) character offsets of the text it covers.")
    source: str | None = Field(None, description="The knowledge base that decided it, where the set of the one asked "
                                                 "for is completed by another's terms on words it leaves uncovered "
                                                 "(kb 'auto': CHIP-CDN completed by dxy; the Chinese words of an "
                                                 "English text read by the Chinese list, and the other way round); "
                                                 "null otherwise.")


class UrgentNotice(BaseModel):
    kind: Literal["crisis", "emergency"] = Field(description="'crisis': thoughts of suicide or self-harm; "
                                                            "'emergency': a sign to call the emergency number for.")
    signs: list[str] = Field(description="The signs read, as a person reads them, in the response's language.")
    terms: list[str] = Field(description="The ids of the decided terms that raised the notice.")
    message: str = Field(description="What to tell the patient now, in the response's language.")
    source: str = Field(description="The public guidance the advice follows (a URL); the shipped signs file is not "
                                    "reviewed by a clinician: a deployment passes its own (medrank serve --urgent-signs).")
    spans: list[list[int]] = Field([], description="[start, end) of the patient's words that raised a sign by "
                                                  "themselves (no term decided for them: an overdose, 吐血), in the text "
                                                  "/symptoms read; empty otherwise.")


class UnreadPart(BaseModel):
    span: list[int] = Field(description="[start, end) character offsets of words no knowledge base read.")
    reason: str = Field(description="Why they were not read.")


class SymptomsResponse(_Response):
    language: str
    kb: str
    results: list[ConceptResult]
    terms: list[DetectedTermOut] | None = Field(None, description="The decided set of terms, where a set detector serves "
                                                               "the knowledge base; null otherwise.")
    alternatives: list[DetectedTermOut] | None = Field(None, description="Ranked alternatives to tick (set detector only).")
    urgent: list[UrgentNotice] | None = Field(None, description="Notices to show before anything else when a decided "
                                                                "term is a sign to act on now (chest pain, a face "
                                                                "drooping, blue lips, a fit, vomiting blood; thoughts "
                                                                "of suicide): crisis first, then emergency; empty when "
                                                                "none is; null when no set was decided.")
    unread: list[UnreadPart] | None = Field(None, description="Under kb 'auto', the words of the other served language "
                                                              "(Chinese words in an English text, English words in a "
                                                              "Chinese one) that could not be read (no list of that "
                                                              "language is ready yet); null when every word was read.")
    still_building: list[str] | None = Field(None, description="Under kb 'auto', the knowledge bases 'auto' prefers for "
                                                             "the language that are still being built: until they are "
                                                             "ready, 'kb' answers in their place (e.g. dxy's 41 symptoms "
                                                             "for CHIP-CDN); empty when the preferred one answered, null "
                                                             "for a named kb.")


# -- /normalize ---------------------------------------------------------------------------------------
class NormalizeRequest(_Request):
    mention: Text = Field(description="A procedure as written in a record.", examples=["腹腔镜下胆囊切除术"])
    k: Annotated[int, Field(ge=1, le=MAX_K, strict=True, description="How many candidates to return; a trained normaliser "
                            "scores only its k_c = 10 recalled candidates, so it returns at most 10.")] = 5


class NormalizeResponse(_Response):
    kb: str
    results: list[ConceptResult]
    predicted: list[str] | None = Field(None, description="The standard names the normaliser decides on: a trained "
                                                          "normaliser's term-count rule, else the top name.")
    confidence: float | None = Field(None, description="Calibrated probability that the decision is right: a trained "
                                                       "normaliser's lowest probability among the predicted names; the "
                                                       "zero-shot form's Platt-scaled P(top name is right), fit on a "
                                                       "fixed-seed carve-out of the CHIP 2019 training mentions.")
    low_confidence: bool | None = Field(None, description="True when the decision is more likely wrong than right "
                                                          "(confidence < 0.5).")


# -- /passages ----------------------------------------------------------------------------------------
class PassagesRequest(_Request):
    entity: ShortText = Field(examples=["IgA nephropathy"])
    aspect: ShortText = Field(examples=["symptoms"])
    k: K = 5


class SentenceScore(BaseModel):
    text: str
    score: float


class PassageResult(BaseModel):
    passage_id: str
    document: str
    aspect: str | None
    score: float
    text: str
    sentences: list[SentenceScore]


class CurveSpan(BaseModel):
    passage_id: str
    aspect: str | None
    start: int
    end: int
    score: float


class ScoreCurve(BaseModel):
    document: str
    scores: list[float]
    passages: list[CurveSpan]


class PassagesResponse(_Response):
    sentence_scores: str = Field(description="How the per-sentence scores were computed.")
    results: list[PassageResult]
    curve: ScoreCurve | None = Field(None, description="Per-sentence scores over the best passage's whole document.")


# -- /next-questions ----------------------------------------------------------------------------------
class DialogueTurnIn(_Request):
    speaker: Literal["patient", "doctor"]
    text: Text


class FindingIn(_Request):
    name: ShortText = Field(description="A finding (evidence / symptom) name of the engine's knowledge base, as "
                                        "/next-questions returns it (e.g. 'E_91' in English, '发烧' in Chinese).")
    value: Literal["present", "absent", "unsure"] | ShortText = Field(
        "present", description="present / absent / unsure, or a value code of a categorical finding (its options).")
    source: Literal["self-report", "answer", "doctor"] = Field(
        "answer", description="Where it comes from: the patient's answer to the question about it (default), the "
                              "self-report, or the doctor.")


class NextQuestionsRequest(_Request):
    dialogue: list[DialogueTurnIn] = Field(min_length=1, max_length=MAX_LIST_ITEMS, description="The conversation so far, oldest first.")
    findings: list[FindingIn] = Field([], max_length=MAX_FINDINGS, description="Findings established so far (answers to "
                                    "earlier questions); findings in the patient's own words are detected as well, and a "
                                    "patient's yes / no to a doctor's yes / no question in the dialogue answers it.")
    symptoms: list[ShortText] | None = Field(
        None, max_length=MAX_LIST_ITEMS,
        description="Symptoms the patient confirmed (names of /symptoms terms, as the page ticks them). Not sent: in "
                    "English the first patient turn is read by /symptoms' detector and the terms it decides at or above its "
                    "threshold count as confirmed (listed in symptoms_read); an empty list confirms none. The words a "
                    "confirmed symptom covers are read through its name, not also as other findings.")
    candidates: list[Text] | None = Field(None, min_length=1, max_length=MAX_LIST_ITEMS,
                                          description="Questions to rank (the question bank ranks them); default: the "
                                                      "inquiry engine's questions.")
    language: Language = "auto"
    k: K = 5


class Option(BaseModel):
    value: str = Field(description="The value code to send back as the finding's value.")
    label: str


class QuestionResult(BaseModel):
    id: str
    text: str
    score: float
    finding: str | None = Field(None, description="The finding the question asks about (inquiry engine); null for "
                                                  "a question-bank question.")
    label: str | None = Field(None, description="What that finding is, in a few words.")
    options: list[Option] = Field([], description="The answers of a categorical / multi-choice finding (yes / no / "
                                                  "not sure fit every question but a choice_only one).")
    choice_only: bool = Field(False, description="The answer is one of the options, not yes / no: the finding "
                                                 "details a main finding already present (where the pain is, once "
                                                 "pain is established).")


class FindingState(BaseModel):
    name: str
    label: str
    value: str
    value_label: str = Field(description="yes / no / not sure, or the meaning of a value code.")
    source: str = Field(description="'self-report' (detected in the first statement), 'patient' (detected in a later "
                                    "turn), 'question:<finding>' (an answer) or 'doctor'.")


SYMPTOMS_READ = ("The symptom terms /symptoms decided in the first patient turn, used as confirmed because the request "
                 "sent no symptoms (null when it sent them, or nothing read them).")
NOT_WEIGHED = ("The symptoms (confirmed, or read as symptoms_read) from which the engine reads none of its findings, "
               "neither from the name nor from the words the symptom covers: its conditions are weighed without them. "
               "Empty when every one is weighed; null when the question bank answered.")


URGENT_BY_NAME = ("As /symptoms' urgent notices, for the symptoms confirmed (or, when none were sent, those read from "
                  "the first patient turn, symptoms_read): show them before the questions; empty when none is a sign "
                  "to act on now; null while no symptom list is served.")


class NextQuestionsResponse(_Response):
    language: str
    engine: str = Field(description="What chose the questions: 'ddxplus-kb' (English), 'dxy-kb' (Chinese) or "
                                    "'question-bank' (no finding of the engine's knowledge base in the complaint, "
                                    "given candidates, or no engine for the language).")
    retrieval: str
    results: list[QuestionResult]
    findings: list[FindingState] = Field([], description="Every finding the engine used: the answered ones, then "
                                                         "those detected in the patient's words.")
    should_stop: bool | None = Field(None, description="True when the engine's stopping rule says enough is known "
                                                       "(null for the question bank).")
    symptoms_read: list[str] | None = Field(None, description=SYMPTOMS_READ)
    symptoms_not_weighed: list[str] | None = Field(None, description=NOT_WEIGHED)
    urgent: list[UrgentNotice] | None = Field(None, description=URGENT_BY_NAME)
    note: str | None = Field(None, description="Why the question bank answered though an engine serves the language "
                                               "(nothing in the words is a finding it asks about), and that no "
                                               "list of possible conditions follows yet; null otherwise.")


# -- /similar-questions -------------------------------------------------------------------------------
class SimilarRequest(_Request):
    question: Text = Field(examples=["What are the side effects of metformin?"])
    language: Language = "auto"
    k: K = 5


class SimilarResult(BaseModel):
    id: str
    text: str
    recall_score: float
    match_score: float | None
    probability: float | None = Field(None, description="How likely the solved question asks the same thing: the "
                                      "ordering cosine of a pretrained encoder, calibrated on labelled question pairs "
                                      "of the language (medical-question-pairs, CHIP-STS); null where no calibration "
                                      "reads the score (a trained matcher, BM25).")
    answer: str | None = Field(None, description="The solved question's answer where the corpus has one (MedQuAD, "
                                                 "English; at most 1,200 characters), else null.")
    answer_url: str | None = Field(None, description="The page the answer comes from.")


class SimilarResponse(_Response):
    language: str
    recall: str
    results: list[SimilarResult]


# -- /differential -----------------------------------------------------------------------------------
class DifferentialRequest(_Request):
    findings: list[FindingIn] = Field([], max_length=MAX_FINDINGS, description="What is known so far (answers).")
    dialogue: list[DialogueTurnIn] = Field([], max_length=MAX_LIST_ITEMS, description="The conversation so far: findings in the "
                                 "patient's words are detected, and the engine may read the first statement.")
    symptoms: list[ShortText] | None = Field(None, max_length=MAX_LIST_ITEMS, description="Symptoms the patient "
                                             "confirmed (as for /next-questions: their findings count as self-reported; "
                                             "not sent: read from the first patient turn in English).")
    language: Language = Field("auto", description="Which engine: 'en' (DDXPlus) or 'zh' (DXY); 'auto' (default): the "
                               "language of the first patient turn, else the engine that knows every finding sent.")
    k: K = 10


class RankedConditionOut(BaseModel):
    name: str
    label: str = Field(description="The condition's name as a person reads it.")
    probability: float
    supporting: list[str] = Field(description="The findings that raise it (names).")
    supporting_labels: list[str] = Field([], description="The same findings in a few words.")
    unexplained: list[str] = Field([], description="Findings established present that no training case of the "
                                   "condition shows (names; 'name=value' for a value of a multiple-choice finding).")
    unexplained_labels: list[str] = Field([], description="The same findings in a few words.")


class DifferentialResponse(_Response):
    language: str
    engine: str
    note: str = Field(description="A plain statement that this is not a diagnosis.")
    results: list[RankedConditionOut]
    outside_probability: float | None = Field(None, description="How likely the condition is none of the engine's "
                                              "(an outside class fitted by leaving conditions out; the results' "
                                              "probabilities share the rest); null for an engine that weighs its "
                                              "own conditions only.")
    findings: list[FindingState] = []
    should_stop: bool = Field(description="True when the engine's stopping rule says the inquiry can stop.")
    symptoms_read: list[str] | None = Field(None, description=SYMPTOMS_READ)
    symptoms_not_weighed: list[str] = Field([], description=NOT_WEIGHED)
    urgent: list[UrgentNotice] | None = Field(None, description=URGENT_BY_NAME)


# -- /health, /models ---------------------------------------------------------------------------------
class BuildState(BaseModel):
    state: Literal["waiting", "building", "ready", "failed"]
    detail: str = Field(description="'waiting', 'building 45 %', 'ready' or 'failed: reason'.")
    progress: float | None = Field(description="Fraction done (0-1) of the current phase; null before it starts.")
    done: int
    total: int
    unit: str
    eta_s: float | None = Field(description="Seconds left at the rate so far; null when unknown.")
    seconds: float | None = Field(description="Seconds spent building so far (or in all, once done).")


class HealthResponse(BaseModel):
    status: Literal["ok"]
    ready: bool = Field(description="True once every build step is done (ready or failed).")
    pipelines: dict[str, bool] = Field(description="Which pipelines answer now.")
    states: dict[str, str] = Field({}, description="Per pipeline: 'ready', 'building 45 %', 'waiting' or 'failed: reason'.")
    builds: dict[str, BuildState] = Field({}, description="Each background build step (knowledge bases, indexes).")
    uptime_s: float


class PipelineModel(BaseModel):
    pipeline: str
    state: str = Field("ready", description="'ready', 'building 45 %', 'waiting' or 'failed: reason'.")
    model: str
    version: str
    trained: bool
    form: str = Field("", description="'trained', 'zero-shot / first-stage', or 'not ready yet'.")
    train_command: str | None = Field(None, description="How to get (or retrain) the trained form of this pipeline.")
    details: dict[str, object] = {}
    encoders: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Language → the encoder loaded for it, its backend (torch | torch-bf16 | onnx | "
                                          "onnx-int8) and why that backend (the start-up agreement check); "
                                          "'vectors': what encoded the knowledge bases' entries, and why.")


class ModelsResponse(BaseModel):
    pipelines: list[PipelineModel]
