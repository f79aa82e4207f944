"""Qrels + run flattened into per-hit arrays, vectorised over every (query, relevant retrieved item) pair.

Every ranking metric of :mod:`medrank.metrics` reads a :class:`Flat`: one ``(nq,)`` score array
per metric comes out of a few ``bincount`` calls, with no per-query Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from numbers import Integral

import numpy as np

from medrank.records import Qrels, Ranking


@dataclass(frozen=True, slots=True)
class Flat:
    """All (query, relevant retrieved item) hits of the evaluated queries, in rank order.

    ``hit_q`` is sorted (query-major), and within a query ``hit_pos`` increases.
    """

    qids: list[str]
    n_rel: np.ndarray  # (nq,) number of relevant items R
    length: np.ndarray  # (nq,) ranking length
    hit_q: np.ndarray  # (H,) query index of each hit
    hit_pos: np.ndarray  # (H,) 0-based rank of each hit
    hit_gain: np.ndarray  # (H,) grade of each hit
    hit_count: np.ndarray  # (H,) 1-based number of hits up to and including this one
    first_hit: np.ndarray  # (nq,) 0-based rank of the first hit, -1 if none
    ideal_q: np.ndarray  # (M,) query index of each relevant item
    ideal_pos: np.ndarray  # (M,) 0-based rank in the ideal ranking
    ideal_gain: np.ndarray  # (M,) grades sorted descending within each query


def _relevant_grades(qrels: Qrels | Mapping[str, Mapping[str, int]]) -> Iterator[tuple[str, dict[str, int]]]:
    """Yield ``(query_id, {item: grade >= 1})`` for every qrels query (validated)."""
    if not isinstance(qrels, Mapping):
        raise TypeError(
            f"qrels must be a Qrels or a mapping query_id -> {{item_id: grade}}, got {type(qrels).__name__}"
        )
    trusted = isinstance(qrels, Qrels)  # grades validated on construction
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise TypeError(f"qrels[{qid!r}] must be a mapping item_id -> grade, got {type(judged).__name__}")
        if not trusted:
            for iid, grade in judged.items():
                if not isinstance(grade, Integral) or isinstance(grade, bool):
                    raise TypeError(f"relevance grade for ({qid!r}, {iid!r}) must be an int, got {grade!r}")
        yield qid, {iid: int(g) for iid, g in judged.items() if g >= 1}


def _hit_positions(qid: str, ranked: object, rel: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Return (0-based ranks of relevant items, their grades, ranking length) for one query."""
    if isinstance(ranked, Ranking):
        ids = ranked.ids
        try:
            scores = np.asarray(ranked.scores, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"run[{qid!r}]: scores must be numbers ({exc})") from None
        if np.isnan(scores).any():
            raise ValueError(f"run[{qid!r}]: NaN score(s) in the ranking")
        if len(set(ids)) != len(ids):
            raise ValueError(f"run[{qid!r}]: the ranking lists an item id more than once")
        gains = np.fromiter((rel.get(i, 0) for i in ids), dtype=np.float64, count=len(ids))
        pos = np.flatnonzero(gains)
        return pos, gains[pos], len(ids)
    if isinstance(ranked, Mapping):
        ids = list(ranked.keys())
        try:
            scores = np.fromiter(ranked.values(), dtype=np.float64, count=len(ids))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"run[{qid!r}]: scores must be numbers ({exc})") from None
        if np.isnan(scores).any():
            bad = [i for i, s in zip(ids, scores, strict=True) if math.isnan(s)][:5]
            raise ValueError(f"run[{qid!r}]: NaN score for item(s) {bad}")
        gains = np.fromiter((rel.get(i, 0) for i in ids), dtype=np.float64, count=len(ids))
        if not gains.any():
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), len(ids)
        # Stable sort: equal scores keep the mapping's insertion order.
        gains = gains[np.argsort(-scores, kind="stable")]
        pos = np.flatnonzero(gains)
        return pos, gains[pos], len(ids)
    raise TypeError(
        f"run[{qid!r}] must be a Ranking or a mapping item_id -> score, got {type(ranked).__name__}"
    )


def flatten(qrels: Qrels | Mapping[str, Mapping[str, int]], run: Mapping[str, object]) -> Flat:
    if not isinstance(run, Mapping):
        raise TypeError(
            f"run must be a mapping query_id -> Ranking or {{item_id: score}}, got {type(run).__name__}"
        )
    qids: list[str] = []
    n_rel: list[int] = []
    lengths: list[int] = []
    pos_chunks: list[np.ndarray] = []
    gain_chunks: list[np.ndarray] = []
    ideal_chunks: list[list[int]] = []
    for qid, rel in _relevant_grades(qrels):
        if not rel:
            continue
        ranked = run.get(qid)
        if ranked is None:
            pos, gain, length = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 0
        else:
            pos, gain, length = _hit_positions(qid, ranked, rel)
        qids.append(qid)
        n_rel.append(len(rel))
        lengths.append(length)
        pos_chunks.append(pos)
        gain_chunks.append(gain)
        ideal_chunks.append(sorted(rel.values(), reverse=True))
    if not qids:
        raise ValueError("no query in qrels has a relevant item (grade >= 1); ranking metrics are undefined")
    nq = len(qids)
    hits_per_q = np.fromiter((len(p) for p in pos_chunks), dtype=np.int64, count=nq)
    hit_q = np.repeat(np.arange(nq), hits_per_q)
    hit_pos = np.concatenate(pos_chunks).astype(np.int64, copy=False)
    hit_gain = np.concatenate(gain_chunks)
    starts = np.concatenate(([0], np.cumsum(hits_per_q)[:-1]))
    hit_count = np.arange(len(hit_q)) - starts[hit_q] + 1
    first_hit = np.full(nq, -1, dtype=np.int64)
    has = hits_per_q > 0
    first_hit[has] = hit_pos[starts[has]]
    n_rel_arr = np.asarray(n_rel, dtype=np.int64)
    ideal_q = np.repeat(np.arange(nq), n_rel_arr)
    ideal_starts = np.concatenate(([0], np.cumsum(n_rel_arr)[:-1]))
    ideal_pos = np.arange(len(ideal_q)) - ideal_starts[ideal_q]
    ideal_gain = np.fromiter(
        (g for chunk in ideal_chunks for g in chunk), dtype=np.float64, count=len(ideal_q)
    )
    return Flat(
        qids=qids,
        n_rel=n_rel_arr,
        length=np.asarray(lengths, dtype=np.int64),
        hit_q=hit_q,
        hit_pos=hit_pos,
        hit_gain=hit_gain,
        hit_count=hit_count,
        first_hit=first_hit,
        ideal_q=ideal_q,
        ideal_pos=ideal_pos,
        ideal_gain=ideal_gain,
    )


def discount(pos: np.ndarray) -> np.ndarray:
    """1 / log2(rank + 1) for 0-based positions (rank = pos + 1)."""
    return 1.0 / np.log2(pos + 2.0)


def at_most(flat: Flat, k: int | None) -> np.ndarray:
    """Which hits lie in the top ``k`` (all of them for ``k=None``)."""
    if k is None:
        return np.ones(len(flat.hit_q), dtype=bool)
    return flat.hit_pos < k


def per_query(flat: Flat, mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``(nq,)`` count (or weighted sum) of the masked hits of each query."""
    return np.bincount(flat.hit_q[mask], weights=weights, minlength=len(flat.qids)).astype(np.float64, copy=False)
