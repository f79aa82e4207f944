"""Sent-BERT softmax-classifier loss (baseline): classify [u, v, |u - v|] as match / no match."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.symptom.losses._common import check_pairs


class SoftmaxClassifierLoss(nn.Module):
    r"""Siamese classification objective of Sentence-BERT (Reimers & Gurevych, EMNLP 2019).

    A linear classifier :math:`W \in \mathbb{R}^{3d \times C}` reads the concatenation
    ``[u, v, |u - v|]`` of the query embedding ``u`` and the term embedding ``v`` and is trained
    with cross-entropy on the pair label (``C = 2``: no match / match). The classifier is only
    a training device: retrieval ranks terms by ``cos(u, v)``, exactly as Sent-BERT is used in
    the "Sent-BERT" baseline of Zhang et al. (KDD 2022, Tables 2 and 4).

    The classifier's weights are parameters of this module, so the module must be part of the
    model the trainer optimises.

    Inputs:
        query_emb: ``(P, d)``, term_emb: ``(P, d)``, labels: ``(P,)`` integer class (0/1).

    Returns: the scalar mean cross-entropy.
    """

    def __init__(self, dim: int, num_labels: int = 2) -> None:
        super().__init__()
        if dim < 1 or num_labels < 2:
            raise ValueError(f"need dim >= 1 and num_labels >= 2, got {dim}, {num_labels}")
        self.classifier = nn.Linear(3 * dim, num_labels)

    def logits(self, query_emb: torch.Tensor, term_emb: torch.Tensor) -> torch.Tensor:
        features = torch.cat([query_emb, term_emb, (query_emb - term_emb).abs()], dim=-1)
        return self.classifier(features)

    def forward(self, query_emb: torch.Tensor, term_emb: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        p = check_pairs(query_emb, term_emb)
        if query_emb.shape[1] * 3 != self.classifier.in_features:
            raise ValueError(f"embedding dim {query_emb.shape[1]} does not match the classifier's {self.classifier.in_features // 3}")
        if labels.shape != (p,):
            raise ValueError(f"labels must have shape ({p},), got {tuple(labels.shape)}")
        return nn.functional.cross_entropy(self.logits(query_emb, term_emb), labels.long())
