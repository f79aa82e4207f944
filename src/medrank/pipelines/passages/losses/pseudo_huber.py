"""Pseudo-Huber regression loss of CDV (Arnold et al., WWW 2020, Eq. 17).

For a prediction ``ŷ`` and a target ``y`` (one vector per sentence)::

    L_δ(y, ŷ) = Σ_d δ² · (sqrt(1 + ((y_d − ŷ_d) / δ)²) − 1)

It is quadratic (≈ ½ (y − ŷ)²) for small errors and linear (≈ δ |y − ŷ|) for
large ones, so sentences whose label vector is a poor target (a generic
sentence inside a specific section) pull less on the model than under a
squared loss. The loss sums over vector dimensions and averages over the
sentences that carry a label (``mask``).
"""

from __future__ import annotations

import torch
from torch import nn


class PseudoHuberLoss(nn.Module):
    """Masked pseudo-Huber loss.

    Args:
        delta: transition point δ > 0 between the quadratic and linear regimes.

    Inputs:
        prediction: ``(..., D)`` float tensor (e.g. ``(batch, sentences, D)``).
        target: same shape as ``prediction``.
        mask: optional ``(...)`` bool/float tensor (e.g. ``(batch, sentences)``);
            ``0`` marks padding or unlabelled sentences, which contribute nothing.

    Returns:
        a scalar: the mean over unmasked positions of the per-position sum over ``D``
        (``0`` when every position is masked).
    """

    def __init__(self, delta: float = 1.0) -> None:
        super().__init__()
        if not delta > 0:
            raise ValueError(f"delta must be > 0, got {delta}")
        self.delta = float(delta)

    def forward(self, prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if prediction.shape != target.shape:
            raise ValueError(f"prediction {tuple(prediction.shape)} and target {tuple(target.shape)} differ in shape")
        x2 = ((target - prediction) / self.delta) ** 2
        # δ²(√(1+x²) − 1) written as δ²x² / (√(1+x²) + 1): no cancellation for small errors in float32
        per_dim = self.delta**2 * x2 / (torch.sqrt(1.0 + x2) + 1.0)
        per_position = per_dim.sum(-1)
        if mask is None:
            return per_position.mean()
        if mask.shape != per_position.shape:
            raise ValueError(f"mask {tuple(mask.shape)} must match the positions {tuple(per_position.shape)}")
        weights = mask.to(per_position.dtype)
        return (per_position * weights).sum() / weights.sum().clamp(min=1.0)
