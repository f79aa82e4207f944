"""Hybrid retrieval: fuse the rankings of several indexes over the same entries.

Three fusion rules:

* ``"rrf"`` — reciprocal rank fusion (Cormack et al., SIGIR 2009):
  ``score(d) = Σ_i w_i / (rrf_k + rank_i(d))`` with ranks from 1; robust to
  score scales, the usual default.
* ``"linear"`` — min-max normalise each ranking's scores to [0, 1] over its
  top-``depth`` list, then ``Σ_i w_i · s_i(d)`` (items absent from a list get 0).
* ``"mean"`` — the weighted mean of the raw scores, ``Σ_i w_i · s_i(d) / Σ_i w_i``, for components that score on
  one scale: an ensemble of dense encoders, whose cosines it averages (Lakshminarayanan et al., NeurIPS 2017, average
  the members of a deep ensemble). An item absent from a component's top-``depth`` list takes that list's last
  score, the most it could have scored there.

Each component retrieves ``depth`` items per query before fusion.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from medrank.index.base import Index, check_k, load_index, register
from medrank.records import Ranking

FUSION_METHODS = ("rrf", "linear", "mean")


def fuse_rankings(
    rankings: Sequence[Ranking], method: str = "rrf", weights: Sequence[float] | None = None, rrf_k: int = 60
) -> list[tuple[str, float]]:
    """Fuse rankings of one query into ``[(item, score)]`` sorted by descending score.

    Ties are broken by first appearance (earlier component, then higher rank).
    """
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    if method == "mean":
        return _mean_scores(rankings, weights)
    fused: dict[str, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        if method == "rrf":
            for rank, item in enumerate(ranking.ids, 1):
                fused[item] = fused.get(item, 0.0) + w / (rrf_k + rank)
        elif method == "linear":
            if not ranking.ids:
                continue
            lo, hi = min(ranking.scores), max(ranking.scores)
            span = hi - lo
            for item, s in zip(ranking.ids, ranking.scores, strict=True):
                norm = (s - lo) / span if span > 0 else 1.0
                fused[item] = fused.get(item, 0.0) + w * norm
        else:
            raise ValueError(f"fusion method must be one of {FUSION_METHODS}, got {method!r}")
    order = {item: i for i, item in enumerate(fused)}
    return sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def _mean_scores(rankings: Sequence[Ranking], weights: Sequence[float]) -> list[tuple[str, float]]:
    total = sum(weights)
    if total <= 0:
        raise ValueError(f"mean fusion needs weights with a positive sum, got {list(weights)}")
    order: dict[str, int] = {}
    for ranking in rankings:
        for item in ranking.ids:
            order.setdefault(item, len(order))
    fused = dict.fromkeys(order, 0.0)
    for ranking, w in zip(rankings, weights, strict=True):
        own = dict(zip(ranking.ids, ranking.scores, strict=True))
        floor = ranking.scores[-1] if ranking.scores else 0.0
        for item in fused:
            fused[item] += w * own.get(item, floor)
    return sorted(((item, score / total) for item, score in fused.items()), key=lambda kv: (-kv[1], order[kv[0]]))


@register
class HybridIndex(Index):
    """Several indexes (e.g. BM25 + dense) over the same entries, fused per query."""

    kind: ClassVar[str] = "hybrid"

    def __init__(
        self,
        components: Sequence[Index],
        method: str = "rrf",
        weights: Sequence[float] | None = None,
        depth: int = 100,
        rrf_k: int = 60,
    ) -> None:
        super().__init__()
        if len(components) < 2:
            raise ValueError("a hybrid index needs at least two component indexes")
        if method not in FUSION_METHODS:
            raise ValueError(f"fusion method must be one of {FUSION_METHODS}, got {method!r}")
        self.components = list(components)
        self.method = method
        if weights is not None and (isinstance(weights, (str, bytes)) or not all(
                isinstance(w, numbers.Real) and not isinstance(w, bool) and math.isfinite(w) for w in weights)):
            raise ValueError(f"weights must be a list of finite numbers, got {weights!r}")
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(self.components)
        if len(self.weights) != len(self.components):
            raise ValueError(f"{len(self.components)} components but {len(self.weights)} weights")
        self.depth = check_k(depth, "depth")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, numbers.Real) or not 0 <= rrf_k < math.inf:
            raise ValueError(f"rrf_k must be a non-negative number, got {rrf_k!r}")
        self.rrf_k = rrf_k

    @classmethod
    def from_built(cls, components: Sequence[Index], **kwargs: Any) -> HybridIndex:
        """Fuse indexes that are already built over the same entries (no re-encoding)."""
        if len(components) < 2:
            raise ValueError("a hybrid index needs at least two component indexes")
        first = components[0]
        for c in components[1:]:
            if c.entry_ids != first.entry_ids or c.entry_items != first.entry_items:
                raise ValueError("hybrid components must index the same entries in the same order")
        index = cls(components, **kwargs)
        index.entry_ids = list(first.entry_ids)
        index.entry_texts = list(first.entry_texts)
        index.entry_items = list(first.entry_items)
        return index

    def _build(self) -> None:
        for c in self.components:
            c.build(self.entry_ids, self.entry_texts, self.entry_items)

    def _add(self, start: int) -> None:
        for c in self.components:
            c.add(self.entry_ids[start:], self.entry_texts[start:], self.entry_items[start:])

    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        from medrank.records import Query

        # components see positional ids: callers' ids may repeat within a batch (Index.search has
        # already answered blank queries, so every text here is searchable)
        queries = [Query(str(i), t) for i, t in enumerate(texts)]
        per_component = [{r.query_id: r for r in c.search(queries, k=max(k, self.depth))} for c in self.components]
        out = []
        for i, qid in enumerate(qids):
            parts = [comp[str(i)] for comp in per_component]
            fused = fuse_rankings(parts, self.method, self.weights, self.rrf_k)[:k]
            out.append(Ranking.from_pairs(qid, fused))
        return out

    def _save(self, path: Path) -> None:
        for i, c in enumerate(self.components):
            c.save(path / f"component{i}")

    def config(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "weights": self.weights,
            "depth": self.depth,
            "rrf_k": self.rrf_k,
            "n_components": len(self.components),
        }

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> HybridIndex:
        components = [load_index(path / f"component{i}", **kwargs) for i in range(config["n_components"])]
        return cls(components, config["method"], config["weights"], config["depth"], config["rrf_k"])
