"""Bi-HardNCE: Bi-NCE with mined hard-negative queries and terms in both denominators."""

from __future__ import annotations

import torch

from medrank.pipelines.symptom.losses.bi_nce import BiNCELoss


class BiHardNCELoss(BiNCELoss):
    r"""Bi-directional hard-negative NCE (Zhang et al., KDD 2022, Eq. 4).

    .. math::
        \mathcal{L} = -\frac{1}{B}\sum_i \Big[
          \log\frac{e^{s(q_i,t_i)/\tau}}{\sum_j e^{s(q_i,t_j)/\tau} + \sum_{k\le N_t} e^{s(q_i,t^-_{ik})/\tau}}
        + \log\frac{e^{s(t_i,q_i)/\tau}}{\sum_j e^{s(t_i,q_j)/\tau} + \sum_{k\le N_q} e^{s(t_i,q^-_{ik})/\tau}}
        \Big]

    Each pair carries ``N_t`` hard-negative terms for its query and ``N_q`` hard-negative
    queries for its term (the paper: ``N_q = 10``, ``N_t = 3``), mined every epoch by
    :mod:`medrank.training.miners` (HD-sampling) from the previous epoch's model, with
    likely false negatives removed by E-FN (:mod:`medrank.pipelines.symptom.efn`).

    Inputs:
        query_emb, term_emb: ``(B, d)`` L2-normalised embeddings of the positive pairs.
        hard_terms: ``(B, N_t, d)``, required, ``N_t >= 1``.
        hard_queries: ``(B, N_q, d)``, required, ``N_q >= 1``.
        false_negatives, hard_terms_valid, hard_queries_valid: as in :class:`BiNCELoss`.

    Returns: the scalar loss.

    Reference: S. Zhang, J. Sun, Y. Huang, X. Ding, Y. Zheng. "Medical Symptom Detection in
    Intelligent Pre-Consultation using Bi-directional Hard-Negative Noise Contrastive
    Estimation." KDD 2022.
    """

    def forward(
        self,
        query_emb: torch.Tensor,
        term_emb: torch.Tensor,
        hard_terms: torch.Tensor | None = None,
        hard_queries: torch.Tensor | None = None,
        false_negatives: torch.Tensor | None = None,
        hard_terms_valid: torch.Tensor | None = None,
        hard_queries_valid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if hard_terms is None or hard_queries is None or hard_terms.shape[1] == 0 or hard_queries.shape[1] == 0:
            raise ValueError(
                "BiHardNCELoss needs hard-negative terms and queries (shapes (B, N, d), N >= 1); "
                "use BiNCELoss for in-batch negatives only"
            )
        return super().forward(
            query_emb, term_emb, hard_terms, hard_queries, false_negatives, hard_terms_valid, hard_queries_valid
        )
