"""Bi-HardNCE: Bi-NCE with mined hard-negative queries and terms in both denominators."""

from __future__ import annotations

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

    requires_hard_negatives = True
