"""Hard-negative mining for Bi-HardNCE and the hard-negative baselines.

Mining runs at the start of every epoch with the previous epoch's model (epoch 1 uses the
untrained model: the paper's "global negatives") over the **whole** term set and query set:

1. encode every training query and every term (one batched pass each);
2. :func:`mine_candidates` — for every query, the ``pool`` most similar terms that are *not*
   one of its gold terms (siblings included) and not excluded by E-FN; for every gold term,
   the ``pool`` most similar queries that do not have it as a gold term. One matrix product
   per chunk of anchors, ``argpartition`` for the top ``pool``;
3. a :class:`Miner` draws each pair's ``n`` negatives from its anchor's pool:

* :class:`TopKMiner` — the ``k`` highest-scoring incorrect candidates (``n`` of them drawn
  uniformly when ``k > n``);
* :class:`HigherThanTrueMiner` — incorrect candidates the model scores *above the gold term*
  of the pair, drawn uniformly; when there are fewer than ``n``, the slots are filled with the
  next highest-scoring incorrect candidates;
* :class:`HDSamplingMiner` — the paper's HD-sampling: draw ``n`` incorrect candidates without
  replacement with probability ``∝ exp(s / τ)``, ``s`` the cosine and ``τ`` the loss
  temperature, i.e. the model's own softmax over its incorrect predictions (Gumbel top-k);
* :class:`RandomMiner` — uniform over every incorrect term (the random-negative baselines;
  needs no model).

Sampling is vectorised over all pairs and seeded per epoch, so a resumed run draws the same
negatives as an uninterrupted one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

NEG_INF = np.float32(-np.inf)


@dataclass
class Candidates:
    """Per anchor, the highest-scoring incorrect candidates, best first.

    Attributes:
        index: ``(n_anchors, pool)`` candidate indices, ``-1`` where the pool ran out.
        score: ``(n_anchors, pool)`` cosine similarities, ``-inf`` where ``index == -1``.
        efn_excluded: how many (anchor, candidate) pairs E-FN removed (candidates scoring
            ``>= beta`` that were not gold).
    """

    index: np.ndarray
    score: np.ndarray
    efn_excluded: int = 0

    @property
    def valid(self) -> np.ndarray:
        return self.index >= 0


def mine_candidates(
    anchors: np.ndarray,
    candidates: np.ndarray,
    exclude: Sequence[np.ndarray],
    pool: int = 100,
    beta: float | None = None,
    chunk_size: int = 1024,
    show_progress: bool = False,
) -> Candidates:
    """The ``pool`` most similar candidates of every anchor, minus ``exclude[i]`` and anything scoring ``>= beta``.

    Args:
        anchors: ``(n, d)`` unit vectors; candidates: ``(m, d)`` unit vectors.
        exclude: per anchor, indices that may never be its negative (its gold set).
        pool: how many incorrect candidates to keep per anchor.
        beta: E-FN threshold (``None`` = no false-negative elimination).
    """
    anchors = np.ascontiguousarray(anchors, dtype=np.float32)
    candidates = np.ascontiguousarray(candidates, dtype=np.float32)
    if anchors.ndim != 2 or candidates.ndim != 2 or anchors.shape[1] != candidates.shape[1]:
        raise ValueError(f"need (n, d) anchors and (m, d) candidates, got {anchors.shape} and {candidates.shape}")
    if len(exclude) != len(anchors):
        raise ValueError(f"{len(exclude)} exclusion sets for {len(anchors)} anchors")
    if pool < 1:
        raise ValueError(f"pool must be >= 1, got {pool}")
    n, m = len(anchors), len(candidates)
    width = min(pool, m)
    index = np.full((n, width), -1, dtype=np.int64)
    score = np.full((n, width), NEG_INF, dtype=np.float32)
    excluded = 0
    for start in tqdm(range(0, n, chunk_size), desc="mine", disable=not show_progress):
        stop = min(n, start + chunk_size)
        sims = anchors[start:stop] @ candidates.T  # (c, m)
        for r in range(stop - start):
            ex = exclude[start + r]
            if len(ex):
                sims[r, ex] = NEG_INF
        if beta is not None:
            over = sims >= beta
            excluded += int(over.sum())
            sims[over] = NEG_INF
        if width < m:
            part = np.argpartition(-sims, width - 1, axis=1)[:, :width]
        else:
            part = np.broadcast_to(np.arange(m), (stop - start, m)).copy()
        part_scores = np.take_along_axis(sims, part, axis=1)
        order = np.argsort(-part_scores, axis=1, kind="stable")
        idx = np.take_along_axis(part, order, axis=1)
        sc = np.take_along_axis(part_scores, order, axis=1)
        idx[~np.isfinite(sc)] = -1
        index[start:stop], score[start:stop] = idx, sc
    return Candidates(index, score, excluded)


def _gumbel(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    u = rng.random(shape, dtype=np.float64)
    return -np.log(-np.log(np.clip(u, 1e-12, 1.0 - 1e-12)))


def _take_top(keys: np.ndarray, cands: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` columns with the largest keys per row; slots whose key is -inf are invalid."""
    order = np.argsort(-keys, axis=1, kind="stable")[:, :n]
    picked = np.take_along_axis(cands, order, axis=1)
    ok = np.isfinite(np.take_along_axis(keys, order, axis=1)) & (picked >= 0)
    if picked.shape[1] < n:  # the pool is narrower than n
        pad = n - picked.shape[1]
        picked = np.concatenate([picked, np.full((len(picked), pad), -1, dtype=np.int64)], axis=1)
        ok = np.concatenate([ok, np.zeros((len(ok), pad), dtype=bool)], axis=1)
    return np.where(ok, picked, -1), ok


class Miner(ABC):
    """Draws ``n`` negatives per pair from the pair's anchor pool."""

    name: str = "miner"
    #: whether the miner needs mined :class:`Candidates` (False: it samples from the whole set)
    needs_candidates: bool = True

    @abstractmethod
    def sample(
        self,
        cands: Candidates,
        rows: np.ndarray,
        positive_scores: np.ndarray,
        n: int,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Negatives for each pair: ``(P, n)`` candidate indices (``-1`` = none) and a ``(P, n)`` validity mask.

        Args:
            cands: the mined pools.
            rows: ``(P,)`` the pool row (anchor) of every pair.
            positive_scores: ``(P,)`` the similarity of each pair's own positive.
            n: negatives per pair.
        """


class TopKMiner(Miner):
    """The top-``k`` incorrect candidates (``k = None``: exactly the ``n`` best)."""

    name = "topk"

    def __init__(self, k: int | None = None) -> None:
        if k is not None and k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k

    def sample(
        self, cands: Candidates, rows: np.ndarray, positive_scores: np.ndarray, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        idx, sc = cands.index[rows], cands.score[rows]
        k = n if self.k is None else max(self.k, n)
        col = np.arange(idx.shape[1])[None, :]
        # inside the top k: random order; beyond it (only if the top k runs short): by score
        keys = np.where(col < k, 1e6 + _gumbel(idx.shape, rng), sc.astype(np.float64))
        keys[~np.isfinite(sc)] = -np.inf
        return _take_top(keys, idx, n)


class HigherThanTrueMiner(Miner):
    """Incorrect candidates scored above the pair's gold term, uniformly; topped up by the next best."""

    name = "higher-than-true"

    def sample(
        self, cands: Candidates, rows: np.ndarray, positive_scores: np.ndarray, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        idx, sc = cands.index[rows], cands.score[rows]
        above = sc > positive_scores[:, None]
        keys = np.where(above, 1e6 + _gumbel(idx.shape, rng), sc.astype(np.float64))
        keys[~np.isfinite(sc)] = -np.inf
        return _take_top(keys, idx, n)


class HDSamplingMiner(Miner):
    """HD-sampling: ``n`` incorrect candidates without replacement, ``P(c) ∝ exp(s(a, c) / τ)``."""

    name = "hd-sampling"

    def __init__(self, temperature: float = 0.05) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def sample(
        self, cands: Candidates, rows: np.ndarray, positive_scores: np.ndarray, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        idx, sc = cands.index[rows], cands.score[rows]
        keys = sc.astype(np.float64) / self.temperature + _gumbel(idx.shape, rng)  # Gumbel top-k
        keys[~np.isfinite(sc)] = -np.inf
        return _take_top(keys, idx, n)


class RandomMiner(Miner):
    """Uniform negatives over the whole candidate set, never one in the anchor's gold set."""

    name = "random"
    needs_candidates = False

    def __init__(self, n_candidates: int, exclude: Sequence[np.ndarray]) -> None:
        self.n_candidates = int(n_candidates)
        self.exclude = [set(map(int, e)) for e in exclude]

    def sample(
        self, cands: Candidates, rows: np.ndarray, positive_scores: np.ndarray, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        out = np.full((len(rows), n), -1, dtype=np.int64)
        for p, r in enumerate(rows):
            ex = self.exclude[int(r)]
            if len(ex) >= self.n_candidates:
                continue
            chosen: list[int] = []
            while len(chosen) < min(n, self.n_candidates - len(ex)):
                c = int(rng.integers(self.n_candidates))
                if c not in ex and c not in chosen:
                    chosen.append(c)
            out[p, : len(chosen)] = chosen
        return out, out >= 0


MINERS = ("none", "random", "topk", "higher-than-true", "hd-sampling")


def make_miner(name: str, temperature: float = 0.05, topk: int | None = None) -> Miner | None:
    """A miner by name (``random`` is built by the training loop, which knows the gold sets)."""
    if name == "none":
        return None
    if name == "topk":
        return TopKMiner(topk)
    if name == "higher-than-true":
        return HigherThanTrueMiner()
    if name == "hd-sampling":
        return HDSamplingMiner(temperature)
    raise ValueError(f"miner must be one of {MINERS}, got {name!r}")
