"""Pointwise binary cross-entropy over candidate scores."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs


class BCELoss(nn.Module):
    r"""Pointwise BCE: every candidate is a separate relevant / not-relevant decision.

    :math:`L = -\frac{1}{|V|}\sum_{(b,i)\in V} y_{bi}\log\sigma(s_{bi}) + (1-y_{bi})\log(1-\sigma(s_{bi}))`
    over the valid (unpadded) candidates ``V``; labels above 1 are clipped to 1. The pointwise
    baseline of the monoBERT cross-encoder (Nogueira & Cho, 2019, "Passage Re-ranking with BERT")
    and of Zhu et al. (2023), "Dialogue-Contextualized Re-ranking for Medical History-Taking".

    Inputs: ``scores`` ``(B, N)`` logits, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    Returns: scalar mean over valid candidates.
    """

    def __init__(self, pos_weight: float | None = None) -> None:
        super().__init__()
        if pos_weight is not None and pos_weight <= 0:
            raise ValueError(f"pos_weight must be > 0, got {pos_weight}")
        self.pos_weight = pos_weight

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        pw = None if self.pos_weight is None else torch.tensor(self.pos_weight, dtype=scores.dtype)
        per = nn.functional.binary_cross_entropy_with_logits(
            scores, labels.clamp(0.0, 1.0), pos_weight=pw, reduction="none"
        )
        return per[mask].mean()
