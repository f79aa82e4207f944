"""Listwise softmax cross-entropy for re-rankers trained on (query; passage) groups.

Each row holds the scores of one query's group: the relevant passage first,
then ``G − 1`` non-relevant ones (other aspects of the same document, BM25
neighbours, random passages). The loss is the cross-entropy of a softmax over
the group with the relevant passage as the class — the training objective of
the cross-encoder, DSSM and KNRM baselines (the "softmax over one positive and
sampled negatives" of DSSM, Huang et al. CIKM 2013; KNRM, Xiong et al. SIGIR 2017
train pairwise, which this generalises).
"""

from __future__ import annotations

import torch
from torch import nn


class ListwiseSoftmaxLoss(nn.Module):
    r"""Cross-entropy of ``softmax(scores / temperature)`` against column 0.

    :math:`L = -\frac1B\sum_b \log \frac{\exp(s_{b,0}/T)}{\sum_g \exp(s_{b,g}/T)}`
    (DSSM, Huang et al. CIKM 2013). Used by the passage re-rankers and the history bi-encoder.

    Inputs:
        scores: ``(batch, group)`` float tensor, the relevant item in column 0.

    Returns:
        the mean over the batch of ``−log softmax(scores / T)[:, 0]``.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or scores.shape[1] < 2:
            raise ValueError(f"scores must be (batch, group >= 2), got {tuple(scores.shape)}")
        logits = scores / self.temperature
        return -torch.log_softmax(logits, dim=1)[:, 0].mean()
