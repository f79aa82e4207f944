"""Negative-term strategies for MTCG's triplet loss (each selectable, compared in the paper's Table 6).

Every strategy returns, for each training pair (mention, gold term), ``n`` negative *term texts*;
no strategy ever returns one of the mention's gold terms (``exclude``).

* :class:`RandomNegatives` — uniform over the knowledge base.
* :class:`TfidfNegatives` — drawn from the ``pool`` names most similar to the mention under a
  character 1-2-gram TF-IDF (computed once).
* :class:`TreeCodingNegatives` — names whose ICD code shares the gold code's prefix (same
  ``xx.y`` category, then same ``xx`` chapter, then random).
* :class:`KeywordReplacingNegatives` — the gold term with one procedure-site or procedure-type
  keyword swapped for another keyword of the same list (synthetic strings, e.g.
  肾上腺病损切除术 → 甲状腺病损切除术); random names when the term has no keyword.
* :class:`OnlineNegatives` — Algorithm 1 of the paper: after each epoch, re-encode every mention
  and name with the current model and take each mention's ``k_n`` nearest wrong names (the
  shared :func:`~medrank.training.miners.mine_candidates`). The first epoch
  mines with the untrained encoder.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from medrank.pipelines.procedures.data import Keywords, Mention, TermBase

if TYPE_CHECKING:
    from medrank.pipelines.procedures.mtcg import MTCG

STRATEGIES = ("random", "tfidf", "tree-coding", "keyword-replacing", "online")


class NegativeStrategy(ABC):
    """Negatives for pairs ``(mentions[q], gold term)``; ``prepare`` runs before each epoch."""

    name = "base"

    def __init__(self, mentions: Sequence[Mention], terms: TermBase) -> None:
        self.mentions = list(mentions)
        self.terms = terms
        self.gold_rows = [np.array(sorted(terms.index(t) for t in m.terms), dtype=np.int64) for m in self.mentions]

    def prepare(self, epoch: int, model: MTCG | None = None) -> None:  # noqa: B027 - optional hook
        """Called at the start of every epoch (online mining re-encodes here)."""

    @abstractmethod
    def sample(self, mention_rows: np.ndarray, gold_terms: Sequence[str], n: int, rng: np.random.Generator) -> list[list[str]]:
        """``n`` negative texts for each pair ``(self.mentions[mention_rows[p]], gold_terms[p])``."""

    def _random_fill(self, row: int, have: list[str], n: int, rng: np.random.Generator) -> list[str]:
        gold = set(self.mentions[row].terms)
        seen = set(have)
        while len(have) < n:
            cand = self.terms.names[int(rng.integers(len(self.terms)))]
            if cand not in gold and cand not in seen:
                have.append(cand)
                seen.add(cand)
        return have


class RandomNegatives(NegativeStrategy):
    name = "random"

    def sample(self, mention_rows: np.ndarray, gold_terms: Sequence[str], n: int, rng: np.random.Generator) -> list[list[str]]:
        return [self._random_fill(int(r), [], n, rng) for r in mention_rows]


class _PoolNegatives(NegativeStrategy):
    """Draws ``n`` of the mention's precomputed ``pool`` (best first) without replacement."""

    pool: np.ndarray  # (n_mentions, pool) term rows, -1 = empty

    def __init__(self, mentions: Sequence[Mention], terms: TermBase, draw_from: int | None = None) -> None:
        super().__init__(mentions, terms)
        self.draw_from = draw_from

    def sample(self, mention_rows: np.ndarray, gold_terms: Sequence[str], n: int, rng: np.random.Generator) -> list[list[str]]:
        out = []
        for r in mention_rows:
            row = [int(i) for i in self.pool[int(r)] if i >= 0]
            if self.draw_from is not None and len(row) > self.draw_from:
                row = row[: self.draw_from]
            if len(row) > n:
                row = sorted(rng.choice(row, n, replace=False).tolist(), key=row.index)
            out.append(self._random_fill(int(r), [self.terms.names[i] for i in row], n, rng))
        return out


class TfidfNegatives(_PoolNegatives):
    """``n`` drawn from the ``pool`` nearest names under character 1-2-gram TF-IDF cosine."""

    name = "tfidf"

    def __init__(self, mentions: Sequence[Mention], terms: TermBase, pool: int = 20) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        super().__init__(mentions, terms)
        vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), sublinear_tf=True)
        term_m = vec.fit_transform(terms.names)
        ment_m = vec.transform([m.text for m in self.mentions])
        self.pool = np.full((len(self.mentions), pool), -1, dtype=np.int64)
        for start in range(0, len(self.mentions), 512):
            sims = (ment_m[start : start + 512] @ term_m.T).toarray()
            for r in range(sims.shape[0]):
                sims[r, self.gold_rows[start + r]] = -np.inf
            top = np.argsort(-sims, axis=1, kind="stable")[:, :pool]
            self.pool[start : start + len(top), : top.shape[1]] = top


class TreeCodingNegatives(NegativeStrategy):
    """Names in the gold code's category (``xx.y``), then chapter (``xx``), then random."""

    name = "tree-coding"

    def __init__(self, mentions: Sequence[Mention], terms: TermBase) -> None:
        super().__init__(mentions, terms)
        self.groups: dict[str, list[int]] = {}
        for i, codes in enumerate(terms.codes):
            for key in {p for c in codes for p in code_prefixes(c)}:
                self.groups.setdefault(key, []).append(i)

    def sample(self, mention_rows: np.ndarray, gold_terms: Sequence[str], n: int, rng: np.random.Generator) -> list[list[str]]:
        out = []
        for r, gold_term in zip(mention_rows, gold_terms, strict=True):
            gold = set(self.mentions[int(r)].terms)
            have: list[str] = []
            for key in _ordered_prefixes(self.terms.codes[self.terms.index(gold_term)]):
                group = [self.terms.names[i] for i in self.groups.get(key, []) if self.terms.names[i] not in gold]
                group = [g for g in group if g not in have]
                take = min(n - len(have), len(group))
                if take > 0:
                    have.extend(rng.choice(group, take, replace=False).tolist())
                if len(have) >= n:
                    break
            out.append(self._random_fill(int(r), have, n, rng))
        return out


def code_prefixes(code: str) -> list[str]:
    """Category keys of an ICD-9-CM-3 code: ``01.3100`` → ``["01.3", "01"]``."""
    head = code.split(".")[0]
    out = []
    if "." in code and len(code) > len(head) + 1:
        out.append(code[: len(head) + 2])
    out.append(head)
    return out


def _ordered_prefixes(codes: Sequence[str]) -> list[str]:
    fine = [p for c in codes for p in code_prefixes(c)[:-1]]
    coarse = [code_prefixes(c)[-1] for c in codes]
    return list(dict.fromkeys(fine + coarse))


class KeywordReplacingNegatives(NegativeStrategy):
    """The gold term with one site or type keyword replaced by another of the same list."""

    name = "keyword-replacing"

    def __init__(self, mentions: Sequence[Mention], terms: TermBase, keywords: Keywords, attempts: int = 20) -> None:
        from medrank.pipelines.procedures.kar import KeywordMatcher

        super().__init__(mentions, terms)
        self.lists = [list(keywords.sites), list(keywords.types)]
        self.matchers = [KeywordMatcher(keywords.sites), KeywordMatcher(keywords.types)]
        self.attempts = attempts

    def replacements(self, term: str, rng: np.random.Generator) -> str | None:
        spans = [(k, s, e) for k, m in enumerate(self.matchers) for s, e in m.spans(term)]
        if not spans:
            return None
        k, s, e = spans[int(rng.integers(len(spans)))]
        words = self.lists[k]
        new = words[int(rng.integers(len(words)))]
        if new == term[s:e]:
            return None
        return term[:s] + new + term[e:]

    def sample(self, mention_rows: np.ndarray, gold_terms: Sequence[str], n: int, rng: np.random.Generator) -> list[list[str]]:
        out = []
        for r, gold_term in zip(mention_rows, gold_terms, strict=True):
            gold = set(self.mentions[int(r)].terms)
            have: list[str] = []
            for _ in range(self.attempts * n):
                if len(have) >= n:
                    break
                cand = self.replacements(gold_term, rng)
                if cand is not None and cand not in gold and cand not in have:
                    have.append(cand)
            out.append(self._random_fill(int(r), have, n, rng))
        return out


class OnlineNegatives(_PoolNegatives):
    """The ``pool`` nearest wrong names under the current model, re-mined before every epoch."""

    name = "online"

    def __init__(self, mentions: Sequence[Mention], terms: TermBase, pool: int = 4) -> None:
        super().__init__(mentions, terms)
        self.pool_size = pool
        self.pool = np.full((len(self.mentions), pool), -1, dtype=np.int64)
        self.mined_epoch: int | None = None

    def prepare(self, epoch: int, model: MTCG | None = None) -> None:
        from medrank.training.miners import mine_candidates

        if model is None:
            raise ValueError("online negatives need the current model")
        ment_emb, _ = model.encode_mentions([m.text for m in self.mentions])
        term_emb = model.encode_terms(self.terms.names)
        self.pool = mine_candidates(ment_emb, term_emb, self.gold_rows, pool=self.pool_size).index
        self.mined_epoch = epoch


def make_strategy(
    name: str, mentions: Sequence[Mention], terms: TermBase, keywords: Keywords | None = None, pool: int | None = None
) -> NegativeStrategy:
    if name == "random":
        return RandomNegatives(mentions, terms)
    if name == "tfidf":
        return TfidfNegatives(mentions, terms, pool=pool or 20)
    if name == "tree-coding":
        return TreeCodingNegatives(mentions, terms)
    if name == "keyword-replacing":
        if keywords is None:
            raise ValueError("keyword-replacing negatives need the keyword lists")
        return KeywordReplacingNegatives(mentions, terms, keywords)
    if name == "online":
        return OnlineNegatives(mentions, terms, pool=pool or 4)
    raise ValueError(f"unknown negative strategy {name!r}; choose from {STRATEGIES}")
