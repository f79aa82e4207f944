"""Training data for symptom / concept detection: queries, terms, positive pairs, clean batches.

A query with several gold terms becomes several positive pairs ``(query, term)``. Queries
are identified by their **text**: records that repeat a text are merged and their gold sets
united, so a text is never its own negative.

:func:`no_duplicate_batches` packs pairs into batches in which no two pairs share a query
text or a gold term *of either query*: for pairs ``(q_i, t_i)`` and ``(q_j, t_j)`` in one batch,
``gold(q_i) ∩ gold(q_j) = ∅``. That is the condition under which every in-batch negative is a
true negative in both directions (term ``t_j`` is not gold for ``q_i``, and ``q_j`` is not a
query of ``t_i``); sentence-transformers' ``NoDuplicatesBatchSampler`` only rules out equal
texts, which still lets a sibling gold term of a multi-term query act as its negative.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from medrank.records import Concept, ConceptDataset
from medrank.retrieval.concept import concept_texts


@dataclass
class PairData:
    """Query texts, the term set, the positive pairs and every query's gold set.

    Terms are vocabulary *entries*: a concept's name and (optionally) each synonym is one term,
    ``term_items[i]`` being the concept it belongs to (for CHIP-CDN a concept is a name, so
    terms and concepts coincide).

    Attributes:
        query_texts: distinct query texts (index = query id inside training).
        term_texts: the term set negatives are mined from; it contains every gold term.
        term_items: the concept id of every term.
        pairs: ``(P, 2)`` int array of ``(query index, term index)`` positive pairs.
        gold: per query, the sorted array of the indices of *every* term of its gold concepts
            (none of them may ever be a negative of that query).
    """

    query_texts: list[str]
    term_texts: list[str]
    term_items: list[str]
    pairs: np.ndarray
    gold: list[np.ndarray]

    def __post_init__(self) -> None:
        if self.pairs.ndim != 2 or self.pairs.shape[1] != 2:
            raise ValueError(f"pairs must be (P, 2), got {self.pairs.shape}")
        if len(self.gold) != len(self.query_texts):
            raise ValueError(f"{len(self.gold)} gold sets for {len(self.query_texts)} queries")
        if len(self.term_items) != len(self.term_texts):
            raise ValueError(f"{len(self.term_items)} term items for {len(self.term_texts)} terms")

    @property
    def n_queries(self) -> int:
        return len(self.query_texts)

    @property
    def n_terms(self) -> int:
        return len(self.term_texts)

    def queries_of_term(self) -> list[np.ndarray]:
        """Per term, the sorted array of queries that have it as a gold term."""
        out: list[list[int]] = [[] for _ in range(self.n_terms)]
        for q, g in enumerate(self.gold):
            for t in g:
                out[int(t)].append(q)
        return [np.asarray(x, dtype=np.int64) for x in out]


def build_pair_data(
    dataset: ConceptDataset,
    concepts: Sequence[Concept] = (),
    use_synonyms: bool = True,
    positives: str = "name",
    drop_labels: Iterable[str] = ("O",),
    use_definitions: bool = False,
) -> PairData:
    """Positive pairs of ``dataset`` over the entries of ``concepts`` (plus any gold concept missing from it).

    Args:
        dataset: queries and qrels (gold concept ids).
        concepts: the term set to mine negatives from (e.g. the candidate vocabulary).
        use_synonyms: every synonym is a term (else only preferred names).
        positives: ``"name"`` — one pair per gold concept, with its preferred name;
            ``"all"`` — one pair per entry (name and synonyms) of each gold concept.
        drop_labels: gold ids that are not concepts (CHIP-CDN's ``O`` placeholder); they never
            form a pair. Queries left with no gold concept are skipped.
        use_definitions: a concept's definition (first sentence) is one more of its terms, after its names
            (:func:`medrank.retrieval.concept.concept_texts`), as in an index built with ``use_definitions``.
    """
    if positives not in ("name", "all"):
        raise ValueError(f"positives must be 'name' or 'all', got {positives!r}")
    drop = set(drop_labels)
    by_id: dict[str, Concept] = {}
    for c in concepts:
        if c.id not in drop:
            by_id.setdefault(c.id, c)
    vocab = {c.id: c for c in dataset.vocabulary}
    term_texts: list[str] = []
    term_items: list[str] = []
    entries_of: dict[str, list[int]] = {}

    def add_concept(c: Concept) -> list[int]:
        if c.id not in entries_of:
            names = concept_texts(c, use_synonyms, use_definitions)
            entries_of[c.id] = list(range(len(term_texts), len(term_texts) + len(names)))
            term_texts.extend(names)
            term_items.extend([c.id] * len(names))
        return entries_of[c.id]

    for c in by_id.values():
        add_concept(c)
    gold_by_text: dict[str, set[int]] = {}
    pos_by_text: dict[str, set[int]] = {}
    for q in dataset.queries:
        items = sorted(i for i in dataset.qrels.relevant(q.id) if i not in drop)
        if not items:
            continue
        for item in items:
            # CHIP-CDN gold names outside the vocabulary are still valid terms (id == name)
            entries = add_concept(by_id.get(item) or vocab.get(item) or Concept(item, item))
            gold_by_text.setdefault(q.text, set()).update(entries)
            pos_by_text.setdefault(q.text, set()).update(entries if positives == "all" else entries[:1])
    if not gold_by_text:
        raise ValueError(f"{dataset.name}: no query has a gold concept")
    query_texts = list(gold_by_text)
    gold = [np.array(sorted(gold_by_text[t]), dtype=np.int64) for t in query_texts]
    pairs = np.array(
        [(qi, t) for qi, text in enumerate(query_texts) for t in sorted(pos_by_text[text])], dtype=np.int64
    )
    return PairData(query_texts, term_texts, term_items, pairs, gold)


def no_duplicate_batches(
    data: PairData, pair_ids: np.ndarray, batch_size: int, rng: np.random.Generator, min_size: int = 2
) -> list[np.ndarray]:
    """Shuffle ``pair_ids`` and pack them greedily into batches whose queries have disjoint gold sets.

    A pair that conflicts with the batch being filled waits for a later batch (the
    sentence-transformers ``NoDuplicatesBatchSampler`` strategy), so every pair is used once
    per epoch unless it conflicts with everything left. The first batch that cannot reach
    ``min_size`` ends the epoch (only the tail is affected: pairs of terms gold for more queries
    than there are batches can never all be placed); its pairs are dropped for this epoch.
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 for in-batch negatives, got {batch_size}")
    remaining = list(rng.permutation(np.asarray(pair_ids, dtype=np.int64)))
    batches: list[np.ndarray] = []
    while remaining:
        batch: list[int] = []
        used_terms: set[int] = set()
        used_queries: set[int] = set()
        left: list[int] = []
        for pos, p in enumerate(remaining):
            if len(batch) == batch_size:
                left.extend(remaining[pos:])
                break
            q = int(data.pairs[p, 0])
            g = data.gold[q]
            if q in used_queries or any(int(t) in used_terms for t in g):
                left.append(p)
                continue
            batch.append(int(p))
            used_queries.add(q)
            used_terms.update(int(t) for t in g)
        if len(batch) >= min_size:
            batches.append(np.asarray(batch, dtype=np.int64))
        if len(batch) < min_size or len(left) == len(remaining):
            break
        remaining = left
    return batches
