"""Logistic-regression baselines on pair features: TF-IDF and mean word vectors.

* **LR on TF-IDF**: each question is an L2-normalised TF-IDF vector over
  token n-grams (Chinese characters uni+bigrams, English word uni+bigrams;
  sublinear tf, smoothed idf fitted on the training questions). Pair features
  are ``[x_q ⊙ x_c, |x_q - x_c|, cos(x_q, x_c)]`` (sparse).
* **LR on mean word vectors**: each question is the mean of its word2vec
  vectors; pair features ``[|a - b|, a ⊙ b, cos(a, b)]``.

The logistic regression is a linear layer ``z = w·f + b`` trained with the
same trainer, loss (its logits are ``[0, z]``, so the pair softmax is
``sigmoid(z)``) and weight decay as every other matcher.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn


class TfidfFeaturizer:
    """TF-IDF over token n-grams with a fixed vocabulary and idf (no pickles: plain lists/arrays)."""

    def __init__(self, terms: Sequence[str], idf: np.ndarray, ngram: tuple[int, ...] = (1, 2)) -> None:
        if len(terms) != len(idf):
            raise ValueError(f"{len(terms)} terms but {len(idf)} idf values")
        self.terms = list(terms)
        self.index = {t: i for i, t in enumerate(self.terms)}
        self.idf = np.asarray(idf, dtype=np.float32)
        self.ngram = tuple(ngram)

    @staticmethod
    def ngrams(tokens: Sequence[str], ngram: tuple[int, ...]) -> list[str]:
        out: list[str] = []
        for n in ngram:
            out.extend("\u0001".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        return out

    @classmethod
    def fit(cls, token_lists: Sequence[Sequence[str]], ngram: tuple[int, ...] = (1, 2), min_df: int = 1) -> TfidfFeaturizer:
        """Vocabulary and smoothed idf ``ln((1 + N) / (1 + df)) + 1`` from training questions."""
        df: Counter[str] = Counter()
        for toks in token_lists:
            df.update(set(cls.ngrams(toks, ngram)))
        terms = sorted(t for t, c in df.items() if c >= min_df)
        n = len(token_lists)
        idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in terms], dtype=np.float32)
        return cls(terms, idf, ngram)

    @property
    def dim(self) -> int:
        return len(self.terms)

    def transform(self, token_lists: Sequence[Sequence[str]]) -> sp.csr_matrix:
        rows, cols, vals = [], [], []
        for r, toks in enumerate(token_lists):
            counts = Counter(self.index[g] for g in self.ngrams(toks, self.ngram) if g in self.index)
            if not counts:
                continue
            idx = np.fromiter(counts.keys(), dtype=np.int64)
            tf = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float32))
            w = tf * self.idf[idx]
            w /= np.linalg.norm(w)
            rows.extend([r] * len(idx))
            cols.extend(idx.tolist())
            vals.extend(w.tolist())
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(token_lists), self.dim), dtype=np.float32)


def tfidf_pair_features(x1: sp.csr_matrix, x2: sp.csr_matrix) -> sp.csr_matrix:
    """``[x1 ⊙ x2, |x1 - x2|, cos]`` for L2-normalised rows; shape ``(n, 2 * dim + 1)``."""
    prod = x1.multiply(x2).tocsr()
    cos = np.asarray(prod.sum(axis=1)).reshape(-1, 1)
    return sp.hstack([prod, abs(x1 - x2), sp.csr_matrix(cos)], format="csr", dtype=np.float32)


def dense_pair_features(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[|a - b|, a ⊙ b, cos(a, b)]`` for mean word vectors; shape ``(n, 2 * dim + 1)``."""
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nb = np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1, keepdims=True) / np.maximum(na * nb, 1e-8)
    return np.hstack([np.abs(a - b), a * b, cos]).astype(np.float32)


class LogisticRegression(nn.Module):
    """``z = x·w + b`` on dense or sparse (COO) features; returns logits ``[0, z]`` of shape ``(B, 2)``."""

    def __init__(self, n_features: int) -> None:
        super().__init__()
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        self.weight = nn.Parameter(torch.zeros(n_features, 1))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (torch.sparse.mm(x, self.weight) if x.is_sparse else x @ self.weight).squeeze(-1) + self.bias
        return torch.stack([torch.zeros_like(z), z], dim=-1)


def csr_to_torch(x: sp.csr_matrix) -> torch.Tensor:
    coo = x.tocoo()
    indices = torch.from_numpy(np.vstack([coo.row, coo.col]).astype(np.int64))
    return torch.sparse_coo_tensor(indices, torch.from_numpy(coo.data.astype(np.float32)), coo.shape, check_invariants=False).coalesce()
