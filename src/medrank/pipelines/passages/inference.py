"""What the passage pipeline serves: a trained CDV model, its sentence index, and the query text helpers."""

from medrank.pipelines.passages.artefacts import CDV_INDEX_FORMAT, CDV_MODEL_MARKER
from medrank.pipelines.passages.cdv import TrainedCDV
from medrank.pipelines.passages.index import CDVIndex
from medrank.pipelines.passages.protocol import bm25_query_text
from medrank.pipelines.passages.text import split_sentences

__all__ = ["CDV_INDEX_FORMAT", "CDV_MODEL_MARKER", "CDVIndex", "TrainedCDV", "bm25_query_text", "split_sentences"]
