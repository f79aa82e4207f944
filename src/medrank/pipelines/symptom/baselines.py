"""Baselines of the Bi-HardNCE comparison that are not a bi-encoder loss: the cross-encoder.

The bi-encoder baselines (Sent-BERT softmax, triplet, contrastive, NCE-forward with in-batch
negatives, each with random or mined hard negatives) are ordinary configs of
:class:`~medrank.pipelines.symptom.task.SymptomTask`: only the loss and the miner change.

The **cross-encoder** reads ``query: q`` and ``passage: t`` together and is trained with BCE on
gold pairs and random negative terms (Zhang et al., KDD 2022, Table 2). Scoring every one of
the ~4k (or 40k) terms for every query is out of reach on a CPU, so — as cross-encoders are
deployed — it **re-ranks the top ``rerank_depth`` terms of a first stage**, the zero-shot
bi-encoder of the same weights. Its reports include that first stage on the same queries,
so the re-ranker's own contribution is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.pipelines.symptom.config import SymptomConfig
from medrank.pipelines.symptom.task import SymptomTask, TaskData
from medrank.records import Query, Ranking


class RerankRetriever:
    """A first-stage :class:`~medrank.retrieval.concept.ConceptRetriever` re-ranked by a cross-encoder.

    Quacks like a ``ConceptRetriever`` (``search``, ``describe``, ``concepts``, ``index``), so
    :func:`~medrank.retrieval.concept.evaluate_retriever` scores it unchanged.
    """

    def __init__(self, first_stage: Any, cross: Any, depth: int = 20, batch_size: int = 64) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.first_stage = first_stage
        self.cross = cross
        self.depth = depth
        self.batch_size = batch_size
        self.concepts = first_stage.concepts
        self.index = first_stage.index

    def search(self, queries: Sequence[str | Query] | str | Query, k: int = 5) -> list[Ranking]:
        from medrank.index.base import query_texts

        ids, texts = query_texts(queries)
        first = self.first_stage.search([Query(i, t) for i, t in zip(ids, texts, strict=True)], k=max(k, self.depth))
        pair_q, pair_t = [], []
        for text, r in zip(texts, first, strict=True):
            for cid in r.ids[: self.depth]:
                pair_q.append(text)
                pair_t.append(self.concepts[cid].name if cid in self.concepts else cid)
        scores = self.cross.score(pair_q, pair_t, batch_size=self.batch_size) if pair_q else np.zeros(0)
        out, pos = [], 0
        for r in first:
            n = min(self.depth, len(r.ids))
            top = sorted(zip(r.ids[:n], scores[pos : pos + n], strict=True), key=lambda x: -float(x[1]))
            pos += n
            # below the re-ranked depth the first stage's order stands (scores shifted under the re-ranked ones)
            floor = min((float(s) for _, s in top), default=0.0)
            rest = [(cid, floor - 1.0 - j) for j, cid in enumerate(r.ids[n:])]
            out.append(Ranking.from_pairs(r.query_id, [*top, *rest][:k]))
        return out

    def describe(self, ranking: Ranking) -> list[dict[str, Any]]:
        return self.first_stage.describe(ranking)


class CrossEncoderTask(SymptomTask):
    """The cross-encoder baseline: BCE on gold pairs and random negatives, re-ranking a zero-shot first stage."""

    def __init__(self, cfg: SymptomConfig, output_dir: str | Path, data: TaskData | None = None) -> None:
        self._first_stage: dict[str, Any] = {}
        super().__init__(cfg, output_dir, data)

    def make_loss(self) -> nn.Module:
        from medrank.encoders import load_encoder
        from medrank.pipelines.symptom.losses import CrossEncoderBCELoss
        from medrank.pipelines.symptom.model import CrossEncoder

        # a second copy of the weights: the first stage (self.model) must stay zero-shot
        encoder = load_encoder(self.cfg.encoder, max_length=self.cfg.max_length, device=self.cfg.device)
        self.cross = CrossEncoder(encoder, train_layers=self.cfg.train_layers)
        return CrossEncoderBCELoss()

    def training_module(self) -> nn.Module:
        return nn.ModuleDict({"cross": self.cross.trainable})

    def loss_fn(self, batch: dict[str, np.ndarray]) -> torch.Tensor:
        q_idx, t_idx = batch["pairs"][:, 0], batch["pairs"][:, 1]
        neg, ok = batch["neg_terms"], batch["neg_terms_valid"]
        queries = [self.pairs.query_texts[q] for q in q_idx]
        terms = [self.pairs.term_texts[t] for t in t_idx]
        labels = [1.0] * len(queries)
        for q, row, valid in zip(q_idx, neg, ok, strict=True):
            for t in row[valid]:
                queries.append(self.pairs.query_texts[q])
                terms.append(self.pairs.term_texts[int(t)])
                labels.append(0.0)
        logits = self.cross(queries, terms)
        return self.loss(logits, torch.tensor(labels, device=logits.device))

    def first_stage(self, candidates: str) -> Any:
        if candidates not in self._first_stage:
            from medrank.retrieval.concept import ConceptRetriever

            self._first_stage[candidates] = ConceptRetriever.build(
                self.eval_concepts(candidates), method="dense", encoder=self.model.as_encoder("zero-shot")
            )
        return self._first_stage[candidates]

    def retriever(self, candidates: str) -> RerankRetriever:
        return RerankRetriever(self.first_stage(candidates), self.cross, depth=self.cfg.rerank_depth)
