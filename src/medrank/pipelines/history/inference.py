"""What the history pipeline serves: a saved re-ranker (global, cross-encoder or bi-encoder)."""

from medrank.pipelines.history.artefacts import RERANKER_MARKERS
from medrank.pipelines.history.evaluation import load_reranker

__all__ = ["RERANKER_MARKERS", "load_reranker"]
