"""NCE-forward: InfoNCE from queries to terms over in-batch and hard-negative terms."""

from __future__ import annotations

import torch

from medrank.pipelines.symptom.losses._common import DirectionalNCE


class NCEForwardLoss(DirectionalNCE):
    r"""InfoNCE in the query → term direction (van den Oord et al., 2018; Zhang et al., KDD 2022, Eq. 2).

    For a batch of ``B`` positive pairs :math:`(q_i, t_i)` with unit-vector embeddings,

    .. math::
        \mathcal{L}_{fwd} = -\frac{1}{B}\sum_i \log
        \frac{e^{s(q_i, t_i)/\tau}}{\sum_{j=1}^{B} e^{s(q_i, t_j)/\tau} + \sum_{k=1}^{N} e^{s(q_i, t^-_{ik})/\tau}}

    where :math:`s` is the cosine similarity, the :math:`t_j` (``j != i``) are the other pairs'
    terms (in-batch negatives) and the :math:`t^-_{ik}` are the ``N`` hard-negative terms mined
    for pair ``i``. Without hard negatives this is sentence-transformers'
    ``MultipleNegativesRankingLoss`` with a ``1/τ`` scale.

    Inputs:
        query_emb: ``(B, d)`` query embeddings (L2-normalised).
        term_emb: ``(B, d)`` embeddings of each query's gold term (same row = positive pair).
        hard_terms: optional ``(B, N, d)`` hard-negative terms of each pair.
        false_negatives: optional ``(B, B)`` bool, True where term ``j`` is also gold for
            query ``i`` (dropped from the denominator; the diagonal is ignored).
        hard_terms_valid: optional ``(B, N)`` bool, False for padded hard-negative slots.

    Returns: the scalar mean loss.

    Reference: S. Zhang, J. Sun, Y. Huang, X. Ding, Y. Zheng. "Medical Symptom Detection in
    Intelligent Pre-Consultation using Bi-directional Hard-Negative Noise Contrastive
    Estimation." KDD 2022.
    """

    def forward(self, query_emb: torch.Tensor, term_emb: torch.Tensor, hard_terms: torch.Tensor | None = None,
                false_negatives: torch.Tensor | None = None, hard_terms_valid: torch.Tensor | None = None) -> torch.Tensor:
        return self.directional(query_emb, term_emb, hard_terms, false_negatives, hard_terms_valid, backward=False)
