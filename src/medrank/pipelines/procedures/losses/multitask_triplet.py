"""The MTCG training loss: Euclidean triplet loss over k_n negatives + implication-count cross-entropy."""

from __future__ import annotations

import torch
from torch import nn

from medrank.losses.triplet import TripletLoss


class MultiTaskTripletLoss(nn.Module):
    r"""MTCG loss :math:`L = L_{tri} + \lambda\, L_{count}` (Liang et al., "Combined recall and rank
    framework for Chinese procedure terminology normalization", 2021, Sec. 3.1).

    * :math:`L_{tri} = \frac{1}{B k_n}\sum_{b,j}\max(0,\ \lVert m_b - t^+_b\rVert_2 - \lVert m_b - t^-_{bj}\rVert_2 + \epsilon)`
      — the mention must be closer (Euclidean) to its gold term than to each of its ``k_n``
      negative terms by the margin ``ε`` (1 in the paper); the triplet part is the shared
      :class:`~medrank.losses.TripletLoss` with ``distance="euclidean"``.
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
        class_weight: optional ``(3,)`` per-class weights of the count cross-entropy (``None`` = the
            paper's unweighted CE). With 95 % one-term mentions the unweighted head predicts "1" for
            everything; :func:`count_class_weights` gives inverse-square-root-frequency weights.
        scale: embeddings are multiplied by ``scale`` before the distances. The paper's BERT
            vectors are unnormalised (norms of several units), where a margin of 1 is moderate;
            on unit vectors (distances in [0, 2]) the same margin asks for a gap of half the
            sphere's diameter and online hard negatives collapse every embedding to one point
            (loss stuck at the margin). ``scale = 5`` keeps "margin 1, Euclidean" while making the
            gap 0.2 on the unit sphere; the ranking (cosine order) does not depend on it.

    Returns: the scalar loss (``.parts`` holds the last triplet / count values for logging).
    """

    def __init__(
        self, margin: float = 1.0, count_weight: float = 1.0, scale: float = 1.0, class_weight: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        if class_weight is not None:
            class_weight = torch.as_tensor(class_weight, dtype=torch.float32)
            if class_weight.ndim != 1 or (class_weight <= 0).any():
                raise ValueError(f"class_weight must be a 1-D tensor of positive weights, got {class_weight}")
        self.register_buffer("class_weight", class_weight, persistent=False)
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
        count = nn.functional.cross_entropy(count_logits, count_labels.long(), weight=self.class_weight)
        self.parts = {"triplet": float(tri.detach()), "count": float(count.detach())}
        return tri + self.count_weight * count


def count_class_weights(labels: torch.Tensor | list[int], n_classes: int = 3, power: float = 0.5) -> torch.Tensor:
    """Per-class weights ``(n / n_c) ** power`` normalised to mean 1 over the classes present (absent classes: 1).

    ``power = 0.5`` (inverse square root of the frequency) is the usual compromise between the
    unweighted loss (the majority class wins) and full inverse frequency (the rare class wins).
    """
    counts = torch.bincount(torch.as_tensor(labels, dtype=torch.long), minlength=n_classes).float()
    if counts.sum() == 0:
        raise ValueError("no labels")
    present = counts > 0
    w = torch.ones(n_classes)
    raw = (counts.sum() / counts[present]) ** power
    w[present] = raw / raw.mean()
    return w
