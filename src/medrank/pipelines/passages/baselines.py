"""Lexical and dense baselines under the CDV protocol: BM25, TF-IDF and a MiniLM bi-encoder.

Each is a re-ranker (``score(queries, candidates)``) for the 64-candidate
protocol and a full-corpus ranker (``rank_all(queries, k)``). Query text is
``entity aspect``; passages are whole answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from medrank.data.medquad import PassageCorpus
from medrank.encoders.base import Encoder
from medrank.index import BM25Index
from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig
from medrank.index.topk import topk_stable
from medrank.pipelines.passages.protocol import bm25_query_text, query_fields
from medrank.records import Query, Ranking, Run

if TYPE_CHECKING:
    from medrank.pipelines.passages.index import CDVIndex


def _rank_matrix(qids: Sequence[str], scores: np.ndarray, ids: Sequence[str], k: int) -> Run:
    run: Run = {}
    for qid, row in zip(qids, scores, strict=True):
        idx = topk_stable(row, min(k, len(row)))
        run[qid] = Ranking(qid, tuple(ids[i] for i in idx), tuple(float(row[i]) for i in idx))
    return run


class _CorpusRanker:
    name = "base"

    def __init__(self, corpus: PassageCorpus) -> None:
        self.ids = [p.id for p in corpus.passages]
        self.position = {p: i for i, p in enumerate(self.ids)}

    def query_scores(self, queries: Sequence[Query]) -> np.ndarray:  # (n_queries, n_passages)
        raise NotImplementedError

    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        full = self.query_scores(queries)
        return {
            q.id: full[i, [self.position[c] for c in candidates[q.id]]].astype(np.float32) for i, q in enumerate(queries)
        }

    def rank_all(self, queries: Sequence[Query], k: int = 100) -> Run:
        return _rank_matrix([q.id for q in queries], self.query_scores(queries), self.ids, k)


class BM25Ranker(_CorpusRanker):
    """Okapi BM25 (Lucene variant, k1 = 1.2, b = 0.75; English stemming and stop words) over passages."""

    name = "BM25"

    def __init__(self, corpus: PassageCorpus, index: BM25Index | None = None) -> None:
        super().__init__(corpus)
        self.index = index or BM25Index(language="en").build(self.ids, [p.text for p in corpus.passages])

    def query_scores(self, queries: Sequence[Query]) -> np.ndarray:
        return np.stack([self.index.query_scores(bm25_query_text(*query_fields(q))) for q in queries])


class TfidfRanker(_CorpusRanker):
    """TF-IDF cosine (sublinear tf, smoothed idf, l2-normalised) with the BM25 tokenizer (stemmed words)."""

    name = "TF-IDF"

    def __init__(self, corpus: PassageCorpus) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        super().__init__(corpus)
        tok = LexicalTokenizer(TokenizerConfig(language="en"))
        self.vectorizer = TfidfVectorizer(tokenizer=tok, lowercase=False, sublinear_tf=True, token_pattern=None)
        self.matrix = self.vectorizer.fit_transform([p.text for p in corpus.passages])

    def query_scores(self, queries: Sequence[Query]) -> np.ndarray:
        q = self.vectorizer.transform([bm25_query_text(*query_fields(x)) for x in queries])
        return np.asarray((q @ self.matrix.T).todense(), dtype=np.float32)


class DenseRanker(_CorpusRanker):
    """Bi-encoder: cosine between the encoded query ``"entity aspect"`` and each encoded passage."""

    name = "Dense (MiniLM)"

    def __init__(self, corpus: PassageCorpus, encoder: Encoder, batch_size: int = 32, show_progress: bool = True) -> None:
        super().__init__(corpus)
        self.encoder = encoder
        self.passage_vectors = encoder.encode(
            [p.text for p in corpus.passages], kind="passage", batch_size=batch_size, show_progress=show_progress
        )

    def query_scores(self, queries: Sequence[Query]) -> np.ndarray:
        texts = [" ".join(query_fields(q)) for q in queries]
        qv = self.encoder.encode(texts, kind="query", batch_size=64, show_progress=False)
        return qv @ self.passage_vectors.T


class CDVRanker:
    """CDV as a re-ranker / full-corpus ranker over a :class:`~medrank.pipelines.passages.index.CDVIndex`."""

    def __init__(self, index: CDVIndex, entity_weight: float | None = None, name: str = "CDV") -> None:
        self.index = index
        self.entity_weight = entity_weight
        self.name = name

    def _qvecs(self, queries: Sequence[Query]) -> np.ndarray:
        fields = [query_fields(q) for q in queries]
        return self.index.query_vectors([f[0] for f in fields], [f[1] for f in fields], self.entity_weight)

    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        qv = self._qvecs(queries)
        return {q.id: self.index.score_candidates(qv[i], candidates[q.id]) for i, q in enumerate(queries)}

    def rank_all(self, queries: Sequence[Query], k: int = 100) -> Run:
        qv = self._qvecs(queries)
        run: Run = {}
        ids = [p["id"] for p in self.index.passages]
        for i, q in enumerate(queries):
            s = self.index.passage_scores(qv[i])
            idx = topk_stable(s, min(k, len(s)))
            run[q.id] = Ranking(q.id, tuple(ids[j] for j in idx), tuple(float(s[j]) for j in idx))
        return run
