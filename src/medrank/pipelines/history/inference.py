"""What the history pipeline serves: a saved re-ranker (global, cross-encoder or bi-encoder) and the
next-question ranker over a question bank."""

from medrank.pipelines.history.artefacts import RERANKER_MARKERS
from medrank.pipelines.history.evaluation import load_reranker
from medrank.pipelines.history.question_bank import (
    DISTINCT_BY_ENCODER,
    FIRST_STAGE,
    NextQuestionRanker,
    NoQuestionBankError,
    QuestionBank,
)

__all__ = ["DISTINCT_BY_ENCODER", "FIRST_STAGE", "RERANKER_MARKERS", "NextQuestionRanker", "NoQuestionBankError",
           "QuestionBank", "load_reranker"]
