"""Synonym marginalisation: the BioSyn objective (Sung et al., "Biomedical Entity Representations
with Synonym Marginalization", ACL 2020, eq. 6).

A mention's candidates are dictionary entries (names and synonyms); several of them may carry the
gold concept. Instead of picking one of them as *the* positive, the loss maximises the summed
probability of all of them, so the model is free to rank whichever synonym it finds closest first.
"""

from __future__ import annotations

import torch
from torch import nn


class SynonymMarginalizationLoss(nn.Module):
    r"""Negative log of the marginal probability of the candidates that carry a gold id.

    :math:`L = -\frac{1}{|B'|}\sum_{b \in B'} \log \sum_{c:\ \mathrm{id}(c) \in \mathrm{gold}(b)}
    \mathrm{softmax}(s_b / T)_c` (Sung et al., ACL 2020, eq. 6), where :math:`s_b` are the scores of
    mention :math:`b`'s candidates and :math:`B'` the mentions with at least one positive candidate
    (a mention whose candidates miss every gold id carries no signal, as in BioSyn's code).

    Inputs:
        scores: ``(batch, candidates)`` float tensor.
        positives: ``(batch, candidates)`` bool tensor, true where the candidate carries a gold id.

    Returns:
        the mean over :math:`B'` (a zero that keeps the graph when :math:`B'` is empty).
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def forward(self, scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or scores.shape[1] < 1:
            raise ValueError(f"scores must be (batch, candidates), got {tuple(scores.shape)}")
        if positives.shape != scores.shape:
            raise ValueError(f"positives {tuple(positives.shape)} must match scores {tuple(scores.shape)}")
        positives = positives.to(torch.bool)
        log_probs = torch.log_softmax(scores / self.temperature, dim=1)
        has = positives.any(dim=1)
        if not bool(has.any()):
            return scores.sum() * 0.0
        marginal = torch.logsumexp(log_probs.masked_fill(~positives, float("-inf")), dim=1)
        return -marginal[has].mean()
