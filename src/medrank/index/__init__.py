"""Indexes with one interface: BM25 (bm25s), dense (faiss) and hybrid (score or rank fusion)."""

from medrank.index.base import FORMAT_VERSION, Index, IndexFormatError, load_index
from medrank.index.bm25 import BM25Index
from medrank.index.dense import DenseIndex
from medrank.index.hybrid import HybridIndex, fuse_rankings
from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig

__all__ = [
    "FORMAT_VERSION",
    "BM25Index",
    "DenseIndex",
    "HybridIndex",
    "Index",
    "IndexFormatError",
    "LexicalTokenizer",
    "TokenizerConfig",
    "fuse_rankings",
    "load_index",
]
