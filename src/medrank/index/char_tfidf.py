"""Character n-gram TF-IDF index: the sparse score of BioSyn (Sung et al., ACL 2020).

Every entry and every query is a TF-IDF vector over the character uni- and bigrams inside word
boundaries (scikit-learn ``TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 2))``, lower-cased,
L2-normalised), fitted on the entries; an entry's score is the cosine of the two vectors. It
matches spelling variants ("tumour" / "tumor", "Alzheimer's" / "Alzheimers") that a word index
misses.

The vectoriser is a deterministic function of the entry texts, so a saved index holds only its
settings and entries, and loading fits it again (no pickled scikit-learn object on disk).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.index.base import Index, register, top_items
from medrank.records import Ranking, is_integer

ANALYZERS = ("char_wb", "char", "word")
#: up to this many texts per call are scored through their postings, a larger batch by a matrix product
POSTINGS_BATCH = 16


@register
class CharTfidfIndex(Index):
    """TF-IDF over character n-grams of the entries; a query scores every entry by cosine."""

    kind: ClassVar[str] = "char-tfidf"

    def __init__(self, analyzer: str = "char_wb", ngram_min: int = 1, ngram_max: int = 2, sublinear_tf: bool = False) -> None:
        super().__init__()
        if analyzer not in ANALYZERS:
            raise ValueError(f"analyzer must be one of {ANALYZERS}, got {analyzer!r}")
        if not (is_integer(ngram_min) and is_integer(ngram_max) and 1 <= ngram_min <= ngram_max):
            raise ValueError(f"ngram range must be integers 1 <= min <= max, got ({ngram_min!r}, {ngram_max!r})")
        self.analyzer, self.ngram_min, self.ngram_max = analyzer, int(ngram_min), int(ngram_max)
        self.sublinear_tf = bool(sublinear_tf)
        self.vectorizer: Any = None
        self.matrix: Any = None  # (entries, features) CSR, rows L2-normalised
        self.matrix_t: Any = None  # its transpose, CSR: a query reads only the rows of its own n-grams
        self._items = np.array([], dtype=object)

    def _fit(self) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(
            analyzer=self.analyzer, ngram_range=(self.ngram_min, self.ngram_max), sublinear_tf=self.sublinear_tf,
            dtype=np.float32,
        )
        self.matrix = self.vectorizer.fit_transform(self.entry_texts).tocsr()
        # kept transposed: `q @ matrix.T` would convert the whole matrix on every call
        self.matrix_t = self.matrix.T.tocsr()
        self._items = np.array(self.entry_items, dtype=object)

    def _build(self) -> None:
        self._fit()

    def _add(self, start: int) -> None:
        # the idf weights depend on every entry: refit
        self._fit()

    def transform(self, texts: list[str]) -> Any:
        """Sparse ``(n, features)`` TF-IDF rows of ``texts`` (L2-normalised), in this index's feature space."""
        if self.vectorizer is None:
            raise RuntimeError("the index is empty: call build() first")
        return self.vectorizer.transform(texts)

    def entry_scores(self, texts: list[str]) -> np.ndarray:
        """Dense ``(n, entries)`` cosine scores of ``texts`` against every entry.

        A few texts are scored through the postings of their own n-grams (:meth:`postings_scores`);
        a larger batch by one sparse matrix product, which amortises its overhead over the rows.
        """
        q = self.transform(texts)
        if q.shape[0] > POSTINGS_BATCH:
            return np.asarray((q @ self.matrix_t).toarray(), dtype=np.float32)
        out = np.empty((q.shape[0], self.matrix.shape[0]), dtype=np.float32)
        for i in range(q.shape[0]):
            out[i] = self.postings_scores(q.indices[q.indptr[i] : q.indptr[i + 1]], q.data[q.indptr[i] : q.indptr[i + 1]])
        return out

    def postings_scores(self, features: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The cosine of one query (its non-zero ``features`` and their ``weights``) against every entry.

        Only the postings of the query's own n-grams are read: their rows of the transposed matrix are
        gathered and summed with the query's weights in one sparse matrix-vector product. The product
        ``q @ matrix.T`` gives the same numbers but builds a sparse result over every entry first.
        """
        if len(features) == 0:
            return np.zeros(self.matrix.shape[0], dtype=np.float32)
        postings = self.matrix_t[features]
        return np.asarray(postings.T @ np.asarray(weights, dtype=np.float32), dtype=np.float32)

    def pair_scores(self, texts: list[str], entry_idx: np.ndarray) -> np.ndarray:
        """``(n, m)`` scores of text ``i`` against entries ``entry_idx[i]`` (one row of entry positions per text)."""
        q = self.transform(texts)
        entry_idx = np.asarray(entry_idx)
        out = np.zeros(entry_idx.shape, dtype=np.float32)
        for i in range(len(texts)):
            out[i] = (self.matrix[entry_idx[i]] @ q[i].T).toarray().ravel()
        return out

    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        return [rank_entries(qid, row, self._items, k) for qid, row in zip(qids, self.entry_scores(texts), strict=True)]

    def _save(self, path: Path) -> None:
        pass  # settings in the manifest, entries beside it: enough to fit the same vectoriser again

    def config(self) -> dict[str, Any]:
        return {"analyzer": self.analyzer, "ngram_min": self.ngram_min, "ngram_max": self.ngram_max,
                "sublinear_tf": self.sublinear_tf}

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> CharTfidfIndex:
        return cls(**config)

    def _load_entries(self, path: Path) -> None:
        super()._load_entries(path)
        self._fit()


def rank_entries(qid: str, scores: np.ndarray, items: np.ndarray, k: int) -> Ranking:
    """The top ``k`` distinct items of one query from its scores over every entry (an item scores its best entry)."""
    n = len(scores)
    depth = min(n, k * 8)
    while True:
        # sorted positions before the stable sort: entries with equal scores rank by position, whatever the
        # order argpartition left them in (it changes with every other score)
        idx = np.sort(np.argpartition(-scores, depth - 1)[:depth]) if depth < n else np.arange(n)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        ids, sc = top_items(items, idx, scores[idx], k)
        if len(ids) >= k or depth >= n:
            return Ranking(qid, tuple(ids), tuple(sc))
        depth = min(n, depth * 4)
