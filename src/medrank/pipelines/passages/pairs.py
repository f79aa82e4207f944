"""Self-supervised (entity; aspect) → passage training groups for the neural re-rankers.

Like CDV, the cross-encoder, DSSM and KNRM baselines learn from document
structure only: the query of a training passage is its document's focus
entity and its question type, and the passage is the positive. Negatives mix
the three confusions the protocol contains: other passages of the same
documents (right entity, wrong aspect), BM25 neighbours of the query among
all training passages (lexically close) and random passages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medrank.data.medquad import PassageCorpus
from medrank.index.topk import topk_stable
from medrank.pipelines.passages.protocol import bm25_query_text, passage_bm25, query_fields


def query_text(entity: str, aspect: str) -> str:
    """The text form of an (entity, aspect) query for text-pair models (the paper's MatchZoo export)."""
    return f"{entity} ; {aspect}"


@dataclass(frozen=True)
class TrainingGroup:
    query: str
    passages: tuple[str, ...]  # texts; the positive first


def training_groups(
    corpus: PassageCorpus, group_size: int = 8, seed: int = 13, bm25_depth: int = 30, same_doc_share: float = 0.4
) -> list[TrainingGroup]:
    """One group per (query, relevant passage): the positive then ``group_size − 1`` negatives."""
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2, got {group_size}")
    rng = np.random.default_rng(seed)
    passages = corpus.passages
    texts = {p.id: p.text for p in passages}
    ids = [p.id for p in passages]
    by_doc: dict[str, list[str]] = {}
    for p in passages:
        by_doc.setdefault(p.doc_id or "", []).append(p.id)
    bm25 = passage_bm25(corpus)
    groups: list[TrainingGroup] = []
    n_neg = group_size - 1
    for q in corpus.queries:
        entity, aspect = query_fields(q)
        relevant = corpus.qrels.relevant(q.id)
        if not relevant:
            continue
        scores = bm25.query_scores(bm25_query_text(entity, aspect))
        lexical = [ids[i] for i in topk_stable(scores, min(bm25_depth, len(ids))) if ids[i] not in relevant]
        same_doc = [pid for d in q.meta.get("doc_ids", ()) for pid in by_doc.get(d, []) if pid not in relevant]
        for pos in sorted(relevant):
            chosen: list[str] = []
            n_same = min(len(same_doc), int(round(same_doc_share * n_neg)))
            if n_same:
                chosen.extend(rng.choice(same_doc, size=n_same, replace=False).tolist())
            pool = [p for p in lexical if p not in chosen]
            n_lex = min(len(pool), (n_neg - len(chosen) + 1) // 2 + (n_neg - len(chosen)) // 4)
            if n_lex:
                chosen.extend(rng.choice(pool, size=n_lex, replace=False).tolist())
            while len(chosen) < n_neg:
                cand = ids[int(rng.integers(len(ids)))]
                if cand not in relevant and cand not in chosen:
                    chosen.append(cand)
            groups.append(TrainingGroup(query_text(entity, aspect), (texts[pos], *(texts[c] for c in chosen))))
    order = rng.permutation(len(groups))
    return [groups[i] for i in order]
