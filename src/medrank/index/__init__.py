"""Indexes with one interface: BM25 (bm25s), character TF-IDF, dense (faiss), hybrid (score or rank fusion)
and sparse + dense (BioSyn's weighted sum)."""

from medrank.index.base import FORMAT_VERSION, Index, IndexFormatError, load_index
from medrank.index.bm25 import BM25Index
from medrank.index.char_tfidf import CharTfidfIndex
from medrank.index.dense import DenseIndex
from medrank.index.hybrid import HybridIndex, fuse_rankings
from medrank.index.sparse_dense import SparseDenseIndex
from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig

__all__ = [
    "FORMAT_VERSION",
    "BM25Index",
    "CharTfidfIndex",
    "DenseIndex",
    "HybridIndex",
    "Index",
    "IndexFormatError",
    "LexicalTokenizer",
    "SparseDenseIndex",
    "TokenizerConfig",
    "fuse_rankings",
    "load_index",
]
