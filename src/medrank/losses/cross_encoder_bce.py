"""Binary cross-entropy for a cross-encoder (baseline): score (query, term) jointly as match / no match."""

from __future__ import annotations

import torch
from torch import nn


class CrossEncoderBCELoss(nn.Module):
    r"""Pointwise BCE over cross-encoder logits (Nogueira & Cho, 2019, "Passage Re-ranking with BERT").

    The cross-encoder reads ``[CLS] query [SEP] term [SEP]`` and outputs one logit per pair;
    the loss is :math:`-\frac1P\sum_p y_p\log\sigma(z_p) + (1-y_p)\log(1-\sigma(z_p))`.
    The "cross-encoder" baseline of Zhang et al. (KDD 2022) with random negatives.

    Inputs:
        logits: ``(P,)`` or ``(P, 1)`` raw scores; labels: ``(P,)`` 1 for a gold pair, 0 otherwise.
        pos_weight: optional weight of the positive class (e.g. the negative:positive ratio).

    Returns: the scalar mean loss.
    """

    def __init__(self, pos_weight: float | None = None) -> None:
        super().__init__()
        if pos_weight is not None and pos_weight <= 0:
            raise ValueError(f"pos_weight must be > 0, got {pos_weight}")
        self.pos_weight = pos_weight

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if logits.ndim == 2 and logits.shape[1] == 1:
            logits = logits[:, 0]
        if logits.ndim != 1 or labels.shape != logits.shape:
            raise ValueError(f"logits (P,) and labels (P,) expected, got {tuple(logits.shape)} and {tuple(labels.shape)}")
        pw = None if self.pos_weight is None else torch.tensor(self.pos_weight, dtype=logits.dtype, device=logits.device)
        return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype), pos_weight=pw)
