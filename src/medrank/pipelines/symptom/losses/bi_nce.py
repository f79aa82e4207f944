"""Bi-NCE: NCE-forward + NCE-backward over in-batch negatives."""

from __future__ import annotations

import torch
from torch import nn

from medrank.pipelines.symptom.losses.nce_backward import NCEBackwardLoss
from medrank.pipelines.symptom.losses.nce_forward import NCEForwardLoss


class BiNCELoss(nn.Module):
    r"""Bi-directional NCE: :math:`\mathcal{L} = \mathcal{L}_{fwd} + \lambda\,\mathcal{L}_{bwd}` (Zhang et al., KDD 2022).

    The forward term makes each query pick its gold term among the batch's terms, the backward
    term makes each gold term pick its query among the batch's queries. Hard negatives are
    optional here (``Bi-NCE + TopK`` / ``+ HigherThanTrue`` in the paper's Table 3 pass mined
    ones); :class:`~medrank.pipelines.symptom.losses.BiHardNCELoss` requires them.

    Inputs:
        query_emb, term_emb: ``(B, d)`` L2-normalised embeddings of the positive pairs.
        hard_terms: optional ``(B, N_t, d)``; hard_queries: optional ``(B, N_q, d)``.
        false_negatives: optional ``(B, B)`` bool, ``[i, j]`` True where term ``j`` is gold for
            query ``i``; the backward direction uses its transpose.
        hard_terms_valid / hard_queries_valid: optional ``(B, N)`` bool, False = padding.

    Returns: the scalar loss (forward mean + ``backward_weight`` × backward mean).

    Reference: S. Zhang et al. "Medical Symptom Detection in Intelligent Pre-Consultation
    using Bi-directional Hard-Negative Noise Contrastive Estimation." KDD 2022.
    """

    #: refuse a batch without hard-negative terms and queries (:class:`BiHardNCELoss`)
    requires_hard_negatives = False

    def __init__(self, temperature: float = 0.05, backward_weight: float = 1.0) -> None:
        super().__init__()
        if backward_weight < 0:
            raise ValueError(f"backward_weight must be >= 0, got {backward_weight}")
        self.forward_loss = NCEForwardLoss(temperature)
        self.backward_loss = NCEBackwardLoss(temperature)
        self.backward_weight = float(backward_weight)

    @property
    def temperature(self) -> float:
        return self.forward_loss.temperature

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
        if self.requires_hard_negatives and (
            hard_terms is None or hard_queries is None or hard_terms.shape[1] == 0 or hard_queries.shape[1] == 0
        ):
            raise ValueError(
                f"{type(self).__name__} needs hard-negative terms and queries (shapes (B, N, d), N >= 1); "
                "use BiNCELoss for in-batch negatives only"
            )
        fwd = self.forward_loss(query_emb, term_emb, hard_terms, false_negatives, hard_terms_valid)
        bwd = self.backward_loss(
            query_emb,
            term_emb,
            hard_queries,
            false_negatives.T if false_negatives is not None else None,
            hard_queries_valid,
        )
        return fwd + self.backward_weight * bwd
