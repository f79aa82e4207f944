"""History re-rankers: the global re-ranker and the cross-encoder / bi-encoder baselines."""

from medrank.pipelines.history.models.bi_encoder import HistoryBiEncoder
from medrank.pipelines.history.models.cross_encoder import HistoryCrossEncoder
from medrank.pipelines.history.models.global_reranker import GlobalInputConfig, GlobalReranker

__all__ = ["GlobalInputConfig", "GlobalReranker", "HistoryBiEncoder", "HistoryCrossEncoder"]
