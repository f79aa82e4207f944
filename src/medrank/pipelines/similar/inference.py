"""What the similar-question pipeline serves: a saved matcher, the searcher over it and its corpora."""

from medrank.pipelines.similar.artefacts import MATCHER_MARKER
from medrank.pipelines.similar.corpus import (
    ANSWERS_VERSION,
    MAX_ANSWER_CHARS,
    language_corpus,
    load_medquad_answers,
)
from medrank.pipelines.similar.matchers import load_matcher
from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher
from medrank.pipelines.similar.zero_shot import (
    CosineCalibration,
    EncoderCosineMatcher,
    shipped_cosine_calibration,
)

__all__ = [
    "ANSWERS_VERSION",
    "CosineCalibration",
    "EncoderCosineMatcher",
    "MATCHER_MARKER",
    "MAX_ANSWER_CHARS",
    "SimilarQuestionSearcher",
    "language_corpus",
    "load_matcher",
    "load_medquad_answers",
    "shipped_cosine_calibration",
]
