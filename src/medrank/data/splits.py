"""Deterministic train/validation splits of a :class:`ConceptDataset`.

The held-out official splits are reserved for independent evaluation, so
model selection needs a split of the shipped file. Splits are deterministic:
the group keys (query ids, or the grouping value) are sorted, then permuted
with ``numpy.random.default_rng(seed)``, and whole groups are assigned to the
validation side in permuted order until it holds ``round(valid_fraction * n)``
queries (it may overshoot by less than one group).

For CHIP-CDN (dataset names starting with ``chip-cdn``) the default groups
queries by their text, so an identical diagnosis string never sits on both
sides of the split.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from medrank.records import ConceptDataset, Qrels, Query

GroupBy = str | Callable[[Query], str] | None


def _group_key(group_by: GroupBy, dataset: ConceptDataset) -> Callable[[Query], str]:
    if group_by == "auto":
        group_by = "text" if dataset.name.startswith("chip-cdn") else None
    if group_by is None:
        return lambda q: q.id
    if group_by == "text":
        return lambda q: q.text
    if isinstance(group_by, str):
        key = group_by

        def from_meta(q: Query) -> str:
            if key not in q.meta:
                raise KeyError(f"query {q.id!r} has no meta[{key!r}] to group by")
            return str(q.meta[key])

        return from_meta
    return group_by


def subset(dataset: ConceptDataset, query_ids: Iterable[str], name: str | None = None) -> ConceptDataset:
    """The queries in ``query_ids`` (kept in the dataset's order) with their qrels and the full vocabulary.

    ``unmapped`` is recomputed from ``query.meta["n_unmapped"]`` (gold labels of
    that query not in the vocabulary). Mentions a loader dropped are in no
    subset, so they are not counted.
    """
    wanted = set(query_ids)
    known = {q.id for q in dataset.queries}
    missing = wanted - known
    if missing:
        raise KeyError(f"{len(missing)} query id(s) not in {dataset.name}: {sorted(missing)[:5]}")
    queries = tuple(q for q in dataset.queries if q.id in wanted)
    qrels = Qrels({q.id: dataset.qrels[q.id] for q in queries if q.id in dataset.qrels})
    unmapped = sum(int(q.meta.get("n_unmapped", 0)) for q in queries)
    return ConceptDataset(
        name=name or f"{dataset.name}:subset",
        queries=queries,
        qrels=qrels,
        vocabulary=dataset.vocabulary,
        unmapped=unmapped,
    )


def split_queries(
    dataset: ConceptDataset, valid_fraction: float = 0.2, seed: int = 13, group_by: GroupBy = "auto"
) -> tuple[ConceptDataset, ConceptDataset]:
    """Split into ``(train, valid)``, deterministic in ``seed``.

    ``group_by``: ``"auto"`` (query text for CHIP-CDN, otherwise one group per
    query), ``None`` (one group per query), ``"text"``, the name of a
    ``query.meta`` key (e.g. ``"pmid"`` for a document-level split), or a
    function ``Query -> str``. Queries of one group always land on the same side.
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    key = _group_key(group_by, dataset)
    groups: dict[str, list[str]] = {}
    for q in dataset.queries:
        groups.setdefault(key(q), []).append(q.id)
    keys = sorted(groups)
    order = np.random.default_rng(seed).permutation(len(keys))
    target = round(valid_fraction * len(dataset.queries))
    valid_ids: list[str] = []
    for i in order:
        if len(valid_ids) >= target:
            break
        valid_ids.extend(groups[keys[int(i)]])
    valid_set = set(valid_ids)
    train_ids = [q.id for q in dataset.queries if q.id not in valid_set]
    return (
        subset(dataset, train_ids, name=f"{dataset.name}:train"),
        subset(dataset, valid_ids, name=f"{dataset.name}:valid"),
    )
