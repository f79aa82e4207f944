"""NCE-backward: InfoNCE from terms to queries over in-batch and hard-negative queries."""

from __future__ import annotations

import torch

from medrank.pipelines.symptom.losses._common import DirectionalNCE


class NCEBackwardLoss(DirectionalNCE):
    r"""InfoNCE in the term → query direction (Zhang et al., KDD 2022, Eq. 3).

    The mirror image of :class:`~medrank.pipelines.symptom.losses.NCEForwardLoss`: each gold
    term must pick its own query out of the batch's queries and its hard-negative queries,

    .. math::
        \mathcal{L}_{bwd} = -\frac{1}{B}\sum_i \log
        \frac{e^{s(t_i, q_i)/\tau}}{\sum_{j=1}^{B} e^{s(t_i, q_j)/\tau} + \sum_{k=1}^{N} e^{s(t_i, q^-_{ik})/\tau}}

    so the model also learns to tell a term's true query from queries that merely look alike
    (e.g. "head ache after a fall" vs. "migraine").

    Inputs:
        query_emb: ``(B, d)`` query embeddings (L2-normalised).
        term_emb: ``(B, d)`` gold-term embeddings (same row = positive pair).
        hard_queries: optional ``(B, N, d)`` hard-negative queries of each pair's term.
        false_negatives: optional ``(B, B)`` bool, True where term ``i`` is also gold for
            query ``j`` (indexed ``[i, j]``: anchor term ``i``, candidate query ``j``).
        hard_queries_valid: optional ``(B, N)`` bool, False for padded slots.

    Returns: the scalar mean loss.

    Reference: S. Zhang et al. "Medical Symptom Detection in Intelligent Pre-Consultation
    using Bi-directional Hard-Negative Noise Contrastive Estimation." KDD 2022.
    """

    def forward(self, query_emb: torch.Tensor, term_emb: torch.Tensor, hard_queries: torch.Tensor | None = None,
                false_negatives: torch.Tensor | None = None, hard_queries_valid: torch.Tensor | None = None) -> torch.Tensor:
        return self.directional(query_emb, term_emb, hard_queries, false_negatives, hard_queries_valid, backward=True)
