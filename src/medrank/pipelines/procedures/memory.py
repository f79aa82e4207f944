"""The mention memory: labelled training mentions as exemplars whose gold names vote for candidates.

Not in the paper (an extension; the normaliser runs without it unless a fusion run adds it). The
exact-set errors left by MTCG + KAR + FB are mostly annotation conventions — which of two close
names the annotators chose for a phrasing (``支撑喉镜下右声带切除术`` → ``内镜下声带切除术``, not
``内镜下声带病损切除术``) — and the nearest labelled mentions carry exactly that. For a mention
``m`` with its ``K`` most similar training mentions ``n_1..n_K`` (character 1-2-gram TF-IDF cosine
``sim``), every candidate name ``c`` gets three votes:

* ``vote_sum`` = Σ ``sim(m, n_j)`` over the neighbours labelled with ``c``;
* ``vote_max`` = max of the same (0 when none);
* ``vote_nn1`` = ``sim(m, n_1)`` when the nearest neighbour is labelled with ``c``, else 0.

:class:`~medrank.pipelines.procedures.fusion.LearnedFusion` combines them with ``s_c`` and ``s_r``.
The similarity is lexical on purpose: it is independent of MTCG (so the votes add information
the recall score does not already hold) and it costs well under a millisecond per mention.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

VOTES = ("vote_sum", "vote_max", "vote_nn1")


class MentionMemory:
    """Training mentions and their gold names; :meth:`votes` scores candidates by their labelled neighbours.

    Args:
        texts: the labelled mentions; labels: each mention's gold names; k: neighbours per query.
    """

    FILE = "memory.json"

    def __init__(self, texts: Sequence[str], labels: Sequence[Sequence[str]], k: int = 10) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} label sets")
        if not texts:
            raise ValueError("a mention memory needs at least one labelled mention")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        for i, (t, g) in enumerate(zip(texts, labels, strict=True)):
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"memory mention {i} is empty or not a string")
            if not g:
                raise ValueError(f"memory mention {i} has no gold name")
        self.texts, self.labels, self.k = list(texts), [tuple(g) for g in labels], int(k)
        self._label_sets = [frozenset(g) for g in self.labels]
        vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), sublinear_tf=True)
        # column-sliced per query (a mention has ~20 n-grams): ~10x faster than vectorizer.transform
        # for one mention, which is what the latency path sees
        self._matrix = vectorizer.fit_transform(self.texts).tocsc()
        self._analyzer, self._vocab, self._idf = vectorizer.build_analyzer(), vectorizer.vocabulary_, vectorizer.idf_

    def __len__(self) -> int:
        return len(self.texts)

    def _similarity_row(self, text: str) -> np.ndarray:
        """``(len(memory),)`` TF-IDF cosines of one mention (what ``TfidfVectorizer.transform`` + a dot product give)."""
        counts = Counter(g for g in self._analyzer(text) if g in self._vocab)
        if not counts:
            return np.zeros(len(self.texts))  # nothing in common with any memory mention
        cols = np.fromiter((self._vocab[g] for g in counts), dtype=np.int64, count=len(counts))
        weight = (1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))) * self._idf[cols]
        return self._matrix[:, cols] @ (weight / np.linalg.norm(weight))

    def similarities(self, mentions: Sequence[str]) -> np.ndarray:
        """``(n, len(memory))`` TF-IDF cosines (dense: for small ``n``; :meth:`neighbours` keeps one row at a time)."""
        return np.stack([self._similarity_row(t) for t in mentions]) if mentions else np.zeros((0, len(self.texts)))

    def neighbours(self, mentions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(n, K)`` indices of the most similar memory mentions (best first) and their cosines."""
        k = min(self.k, len(self.texts))
        idx = np.empty((len(mentions), k), dtype=np.int64)
        top_sims = np.empty((len(mentions), k))
        for i, text in enumerate(mentions):
            sims = self._similarity_row(text)
            top = np.argpartition(-sims, k - 1)[:k]
            order = np.argsort(-sims[top], kind="stable")
            idx[i], top_sims[i] = top[order], sims[top[order]]
        return idx, top_sims

    def votes(self, mentions: Sequence[str], candidates: Sequence[Sequence[str]]) -> np.ndarray:
        """``(n, k_c, 3)`` votes ``(vote_sum, vote_max, vote_nn1)`` of each mention's candidates."""
        if len(mentions) != len(candidates):
            raise ValueError(f"{len(mentions)} mentions but {len(candidates)} candidate lists")
        if not mentions:
            return np.zeros((0, 0, len(VOTES)), dtype=np.float64)
        width = max(len(c) for c in candidates)
        out = np.zeros((len(mentions), width, len(VOTES)), dtype=np.float64)
        idx, sims = self.neighbours(mentions)
        for i, cands in enumerate(candidates):
            for j, name in enumerate(cands):
                hits = [float(s) for n, s in zip(idx[i], sims[i], strict=True) if name in self._label_sets[n]]
                if hits:
                    out[i, j] = (sum(hits), max(hits), float(sims[i, 0]) if name in self._label_sets[idx[i, 0]] else 0.0)
        return out

    # -- persistence (plain JSON: the memory is text) ------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        from medrank.utils.io import atomic_write_json

        atomic_write_json(Path(directory) / self.FILE, {"k": self.k, "mentions": [{"text": t, "terms": list(g)} for t, g in zip(self.texts, self.labels, strict=True)]})

    @classmethod
    def load(cls, directory: str | Path) -> MentionMemory | None:
        path = Path(directory) / cls.FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
        return cls([m["text"] for m in raw["mentions"]], [m["terms"] for m in raw["mentions"]], k=int(raw["k"]))
