"""NeuralNDCG: nDCG through a differentiable (NeuralSort + Sinkhorn) sorting relaxation."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.history.losses._common import check_inputs, discounts, gains, ideal_dcg


def neural_sort(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    r"""NeuralSort relaxed permutation matrix (Grover et al., ICLR 2019) of a 1-D score vector.

    Row :math:`r` (rank ``r``, 1-based) is
    :math:`\mathrm{softmax}\big(((n + 1 - 2r)\,s - A_s \mathbf{1}) / \tau\big)` with
    :math:`A_s = |s_i - s_j|`; returns ``(n, n)`` (rank x candidate).
    """
    n = scores.shape[0]
    a = (scores[:, None] - scores[None, :]).abs().sum(dim=1)  # A_s 1
    scaling = (n + 1 - 2 * torch.arange(1, n + 1, dtype=scores.dtype, device=scores.device))
    return torch.softmax((scaling[:, None] * scores[None, :] - a[None, :]) / temperature, dim=1)


def sinkhorn(p: torch.Tensor, max_iter: int = 50, tol: float = 1e-6) -> torch.Tensor:
    """Alternate row and column normalisation until ``p`` is (nearly) doubly stochastic."""
    for _ in range(max_iter):
        p = p / p.sum(dim=1, keepdim=True).clamp(min=1e-10)
        p = p / p.sum(dim=0, keepdim=True).clamp(min=1e-10)
        if (p.sum(dim=1) - 1).abs().max() < tol:
            break
    return p


class NeuralNDCGLoss(nn.Module):
    r"""NeuralNDCG (Pobrotyn & Białobrzeski, SIGIR 2021 workshop / arXiv:2102.07831, "NeuralNDCG:
    Direct Optimisation of a Ranking Metric via Differentiable Relaxation of Sorting").

    For each list (valid candidates only) the NeuralSort matrix :math:`\hat P` (temperature
    ``temperature``), made doubly stochastic by Sinkhorn scaling, turns the gains into expected
    gains per rank, :math:`\hat g = \hat P\,(2^{y}-1)`, and
    :math:`L = -\frac{1}{\mathrm{maxDCG}}\sum_r \hat g_r / \log_2(r+1)`; the result is the mean over
    lists with a positive. Lists are processed one at a time on their valid candidates, so
    padding never enters the relaxation.

    Inputs: ``scores`` ``(B, N)``, ``labels`` ``(B, N)``, ``mask`` ``(B, N)`` bool (True = real).
    """

    def __init__(self, temperature: float = 1.0, sinkhorn_iter: int = 50) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature
        self.sinkhorn_iter = sinkhorn_iter

    def forward(self, scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        scores, labels, mask = check_inputs(scores, labels, mask)
        losses = []
        for b in range(scores.shape[0]):
            y = labels[b][mask[b]]
            if not (y > 0).any():
                continue
            s = scores[b][mask[b]]
            p = sinkhorn(neural_sort(s, self.temperature), self.sinkhorn_iter)
            expected_gains = p @ gains(y)
            dcg = (expected_gains * discounts(len(y), s.dtype, s.device)).sum()
            losses.append(-dcg / ideal_dcg(y[None])[0])
        if not losses:
            return scores.sum() * 0.0
        return torch.stack(losses).mean()
