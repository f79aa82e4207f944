"""What the history pipeline serves: a saved re-ranker (global, cross-encoder or bi-encoder), the
next-question ranker over a question bank (the English one on the first stage: ``build_first_stage`` /
``load_first_stage``), and the symptom inquiry engine (next questions about findings,
differential, stopping rule)."""

from medrank.pipelines.history.artefacts import RERANKER_MARKERS
from medrank.pipelines.history.builders import build_first_stage, load_first_stage
from medrank.pipelines.history.evaluation import load_reranker
from medrank.pipelines.history.inquiry import (
    EN_YES_NO_QUESTION,
    Finding,
    InquiryEngine,
    InquiryInputError,
    ProposedQuestion,
    RankedCondition,
    engine_prepared,
    load_engine,
    prepare_engines,
)
from medrank.pipelines.history.question_bank import (
    DISTINCT_BY_ENCODER,
    FIRST_STAGE,
    NextQuestionRanker,
    NoQuestionBankError,
    QuestionBank,
)
from medrank.pipelines.history.question_sources import dxy_doctor_questions, mts_doctor_questions

__all__ = ["DISTINCT_BY_ENCODER", "EN_YES_NO_QUESTION", "FIRST_STAGE", "RERANKER_MARKERS", "Finding", "InquiryEngine", "InquiryInputError",
           "NextQuestionRanker", "NoQuestionBankError", "ProposedQuestion", "QuestionBank", "RankedCondition",
           "build_first_stage", "dxy_doctor_questions", "engine_prepared", "load_engine", "load_first_stage", "load_reranker", "mts_doctor_questions", "prepare_engines"]
