"""The MTCG training loss: Euclidean triplet loss over k_n negatives + implication-count cross-entropy."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.symptom.losses.triplet import TripletLoss


class MultiTaskTripletLoss(nn.Module):
    r"""MTCG loss :math:`L = L_{tri} + \lambda\, L_{count}` (Liang et al., "Combined recall and rank
    framework for Chinese procedure terminology normalization", 2021, Sec. 3.1).

    * :math:`L_{tri} = \frac{1}{B k_n}\sum_{b,j}\max(0,\ \lVert m_b - t^+_b\rVert_2 - \lVert m_b - t^-_{bj}\rVert_2 + \epsilon)`
      — the mention must be closer (Euclidean) to its gold term than to each of its ``k_n``
      negative terms by the margin ``ε`` (1 in the paper); the triplet part is the shared
      :class:`~medrank.pipelines.symptom.losses.TripletLoss` with ``distance="euclidean"``.
    * :math:`L_{count}` — cross-entropy of the 3-class implication-count head (the mention maps
      to 1, 2 or ≥3 terms) on the mention's [CLS] state.

    Inputs:
        mention_emb: ``(B, d)`` mention embeddings (anchors).
        term_emb: ``(B, d)`` gold-term embeddings.
        negative_terms: ``(B, k_n, d)`` negative-term embeddings.
        count_logits: ``(M, 3)`` count-head logits of the batch's distinct mentions.
        count_labels: ``(M,)`` int64 classes 0 / 1 / 2.
        negatives_valid: optional ``(B, k_n)`` bool, False for padded slots.

    Args:
        margin: triplet margin ε (default 1.0 as in the paper).
        count_weight: λ (default 1.0: the paper sums the two losses).
        scale: embeddings are multiplied by ``scale`` before the distances. The paper's BERT
            vectors are unnormalised (norms of several units), where a margin of 1 is moderate;
            on unit vectors (distances in [0, 2]) the same margin asks for a gap of half the
            sphere's diameter and online hard negatives collapse every embedding to one point
            (loss stuck at the margin). ``scale = 5`` keeps "margin 1, Euclidean" while making the
            gap 0.2 on the unit sphere; the ranking (cosine order) does not depend on it.

    Returns: the scalar loss (``.parts`` holds the last triplet / count values for logging).
    """

    def __init__(self, margin: float = 1.0, count_weight: float = 1.0, scale: float = 1.0) -> None:
        super().__init__()
        if count_weight < 0:
            raise ValueError(f"count_weight must be >= 0, got {count_weight}")
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        self.scale = float(scale)
        self.triplet = TripletLoss(margin=margin, distance="euclidean")
        self.count_weight = float(count_weight)
        self.parts: dict[str, float] = {}

    def forward(
        self,
        mention_emb: torch.Tensor,
        term_emb: torch.Tensor,
        negative_terms: torch.Tensor,
        count_logits: torch.Tensor,
        count_labels: torch.Tensor,
        negatives_valid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if count_logits.ndim != 2 or count_labels.ndim != 1 or count_logits.shape[0] != count_labels.shape[0]:
            raise ValueError(
                f"count_logits (M, C) and count_labels (M,) expected, got {tuple(count_logits.shape)} "
                f"and {tuple(count_labels.shape)}"
            )
        s = self.scale
        tri = self.triplet(mention_emb * s, term_emb * s, negative_terms * s, negatives_valid)
        count = nn.functional.cross_entropy(count_logits, count_labels.long())
        self.parts = {"triplet": float(tri.detach()), "count": float(count.detach())}
        return tri + self.count_weight * count
