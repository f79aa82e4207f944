"""First-stage retrieval of candidate questions (the paper's "expert system" baseline).

For a dialogue context the retriever scores every bank question with four components:

* ``knn`` — **what doctors asked next in similar situations**: the context tail (last
  ``tail_turns`` turns) is embedded with MiniLM and compared with the tails of the training
  samples (the memory); each of the ``knn_k`` nearest training contexts votes
  ``exp(cos / knn_temperature)`` for the bank questions asked there. Contexts from the same
  dialogue are never neighbours (so a training sample cannot retrieve its own answer);
* ``dense`` — cosine between the context tail and the canonical question (MiniLM);
* ``bm25`` — BM25 of the context tail against the question and its merged phrasings
  (:class:`medrank.index.BM25Index`);
* ``prior`` — ``log(1 + count)``, how often doctors asked the question in the training dialogues.

Each component is z-normalised over the bank for that context and the weighted sum ranks the
bank (default weights :data:`DEFAULT_WEIGHTS`, chosen on the validation split's first-stage
recall@30 — BM25 barely moves it but stays in the mix at a small weight). Questions already
asked earlier in the same dialogue are removed (an expert system does not ask twice), and the
top ``k`` (30) are the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from medrank.pipelines.history.data import BankQuestion, Turn

DEFAULT_WEIGHTS = {"knn": 1.0, "dense": 0.5, "bm25": 0.1, "prior": 0.5}


def context_tail(turns: Sequence[Turn], tail_turns: int = 2, max_words: int = 80) -> str:
    """The last turns of the context (at most ``max_words`` words, keeping the end)."""
    text = " ".join(f"{t.speaker}: {t.text}" for t in turns[-tail_turns:])
    words = text.split()
    return " ".join(words[-max_words:])


def _z(x: np.ndarray) -> np.ndarray:
    """Row-wise z-score (a constant row becomes zeros)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    sd = x.std(axis=1, keepdims=True)
    return np.where(sd > 1e-12, (x - x.mean(axis=1, keepdims=True)) / np.maximum(sd, 1e-12), 0.0)


@dataclass
class Memory:
    """Training contexts for the ``knn`` component: tail text, bank ids asked next, dialogue id."""

    tails: list[str]
    asked: list[list[str]]
    dialogues: list[str]


@dataclass
class FirstStage:
    """kNN-context + dense + BM25 + frequency-prior retriever over a question bank."""

    bank: list[BankQuestion]
    encoder: object
    weights: dict[str, float]
    memory: Memory | None = None
    tail_turns: int = 2
    knn_k: int = 200
    knn_temperature: float = 0.1
    #: keep each context tail's vector for the next call (training and benches see the same tails again and again);
    #: a service turns it off: its tails are users' words, each seen once, and the cache would grow without end
    remember_tails: bool = True
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from medrank.index import BM25Index

        unknown = set(self.weights) - set(DEFAULT_WEIGHTS)
        if unknown:
            raise ValueError(f"unknown first-stage weights {sorted(unknown)}; use {sorted(DEFAULT_WEIGHTS)}")
        if not self.bank:
            raise ValueError("empty question bank")
        if self.weights.get("knn") and self.memory is None:
            raise ValueError("the knn component needs a memory of training contexts")
        self.ids = [q.id for q in self.bank]
        self.position = {qid: i for i, qid in enumerate(self.ids)}
        self.bm25 = BM25Index(language="en")
        self.bm25.build(self.ids, [" ".join(dict.fromkeys([q.text, *q.members[:5]])) for q in self.bank])
        self.vectors = self.encoder.encode([q.text for q in self.bank], kind="passage", batch_size=128)
        self.prior = np.log1p(np.array([q.count for q in self.bank], dtype=np.float64))
        if self.memory is not None:
            self.memory_vectors = self._encode(self.memory.tails)
            self.memory_items = [[self.position[q] for q in qs if q in self.position] for qs in self.memory.asked]
            self.memory_dialogues = np.array(self.memory.dialogues, dtype=object)

    def _encode(self, tails: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not self.remember_tails:
            if not tails:
                return np.zeros((0, 1), dtype=np.float32)
            return np.asarray(self.encoder.encode(list(tails), kind="query", batch_size=32, show_progress=show_progress))
        todo = sorted({t for t in tails if t not in self._cache})
        if todo:
            vecs = self.encoder.encode(todo, kind="query", batch_size=32, show_progress=show_progress)
            self._cache.update(zip(todo, vecs, strict=True))
        return np.stack([self._cache[t] for t in tails]) if tails else np.zeros((0, 1), dtype=np.float32)

    def component_scores(
        self, tails: Sequence[str], dialogue_ids: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """``(n_contexts, bank)`` z-normalised scores of each component."""
        n = len(tails)
        vecs = self._encode(tails)
        out = {
            "dense": _z(vecs @ self.vectors.T),
            "bm25": _z(np.stack([self.bm25.query_scores(t) for t in tails])),
            "prior": np.broadcast_to(_z(self.prior[None]), (n, len(self.ids))),
        }
        if self.memory is not None:
            sims = vecs @ self.memory_vectors.T
            if dialogue_ids is not None:
                sims[np.asarray(dialogue_ids, dtype=object)[:, None] == self.memory_dialogues[None, :]] = -np.inf
            votes = np.zeros((n, len(self.ids)))
            k = min(self.knn_k, sims.shape[1])
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            for row in range(n):
                for j in top[row]:
                    if np.isfinite(sims[row, j]):
                        for b in self.memory_items[j]:
                            votes[row, b] += np.exp(sims[row, j] / self.knn_temperature)
            out["knn"] = _z(votes)
        return out

    def retrieve(
        self, contexts: Sequence[Sequence[Turn]], exclude: Sequence[set[str]] | None = None, k: int = 30,
        dialogue_ids: Sequence[str] | None = None, weights: dict[str, float] | None = None,
        show_progress: bool = False, chunk: int = 256,
    ) -> list[tuple[list[str], list[float]]]:
        """Top-``k`` bank ids (and fused scores) for each context, best first."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        w = {name: 0.0 for name in DEFAULT_WEIGHTS} | (weights or self.weights)
        out: list[tuple[list[str], list[float]]] = []
        bar = tqdm(total=len(contexts), desc="first stage", disable=not show_progress, unit="ctx")
        for start in range(0, len(contexts), chunk):
            part = contexts[start : start + chunk]
            dids = None if dialogue_ids is None else dialogue_ids[start : start + chunk]
            comps = self.component_scores([context_tail(c, self.tail_turns) for c in part], dids)
            fused = sum(w[name] * comps[name] for name in comps if w.get(name))
            for row in range(len(part)):
                scores = np.array(fused[row], dtype=np.float64)
                if exclude is not None:
                    for qid in exclude[start + row]:
                        if qid in self.position:
                            scores[self.position[qid]] = -np.inf
                top = [i for i in np.argsort(-scores, kind="stable")[:k] if np.isfinite(scores[i])]
                out.append(([self.ids[i] for i in top], [round(float(scores[i]), 4) for i in top]))
            bar.update(len(part))
        bar.close()
        return out
