"""Shape checks and masking shared by the symptom-detection losses."""

from __future__ import annotations

import torch
from torch import nn

from medrank.losses.checks import check_hard, check_mask, check_pairs

__all__ = ["MASK_VALUE", "check_hard", "check_mask", "check_pairs", "check_temperature", "contrastive_logits", "directional_info_nce", "DirectionalNCE"]

#: added to logits that must not count (a false negative or padding); large but finite so an
#: all-masked row still gives a finite loss instead of NaN
MASK_VALUE = -1e4


def contrastive_logits(
    anchor: torch.Tensor,
    positives: torch.Tensor,
    hard: torch.Tensor | None,
    temperature: float,
    in_batch_false_negatives: torch.Tensor | None = None,
    hard_valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits ``(B, B + n_hard)`` of anchor ``i`` against every in-batch positive and its own hard negatives.

    Column ``i`` of the first ``B`` columns is the target. In-batch columns flagged in
    ``in_batch_false_negatives`` (``(B, B)``, diagonal ignored) and hard-negative slots flagged
    invalid in ``hard_valid`` (``(B, n_hard)``, False = padding) are pushed to ``MASK_VALUE``.
    """
    logits = anchor @ positives.T  # (B, B) cosine for unit vectors
    if in_batch_false_negatives is not None:
        drop = in_batch_false_negatives.clone()
        drop.fill_diagonal_(False)  # the positive itself always counts
        logits = logits.masked_fill(drop, MASK_VALUE * temperature)
    if hard is not None and hard.shape[1] > 0:
        hard_logits = torch.einsum("bd,bnd->bn", anchor, hard)  # (B, n_hard)
        if hard_valid is not None:
            hard_logits = hard_logits.masked_fill(~hard_valid, MASK_VALUE * temperature)
        logits = torch.cat([logits, hard_logits], dim=1)
    return logits / temperature


def check_temperature(temperature: float) -> float:
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return float(temperature)


def directional_info_nce(
    anchor: torch.Tensor,
    positives: torch.Tensor,
    hard: torch.Tensor | None,
    temperature: float,
    false_negatives: torch.Tensor | None,
    hard_valid: torch.Tensor | None,
    hard_name: str,
) -> torch.Tensor:
    """InfoNCE of ``anchor[i]`` → ``positives[i]`` over in-batch + hard negatives (one NCE direction).

    Shapes are those of :func:`contrastive_logits`; ``hard_name`` names the hard negatives in errors.
    The caller validates the pair shapes first (``check_pairs``) so its error names its own arguments.
    """
    b = anchor.shape[0]
    check_hard(hard, b, anchor.shape[1], hard_name)
    check_mask(false_negatives, (b, b), "false_negatives")
    if hard is not None:
        check_mask(hard_valid, (b, hard.shape[1]), f"{hard_name}_valid")
    logits = contrastive_logits(anchor, positives, hard, temperature, false_negatives, hard_valid)
    target = torch.arange(b, device=logits.device)
    return torch.nn.functional.cross_entropy(logits, target)


class DirectionalNCE(nn.Module):
    """The temperature and one InfoNCE direction, shared by NCE-forward and NCE-backward."""

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)

    def directional(
        self,
        query_emb: torch.Tensor,
        term_emb: torch.Tensor,
        hard: torch.Tensor | None,
        false_negatives: torch.Tensor | None,
        hard_valid: torch.Tensor | None,
        backward: bool,
    ) -> torch.Tensor:
        """Query → term InfoNCE, or term → query with ``backward`` (hard negatives are then queries)."""
        check_pairs(query_emb, term_emb)
        if backward:
            return directional_info_nce(
                term_emb, query_emb, hard, self.temperature, false_negatives, hard_valid, "hard_queries"
            )
        return directional_info_nce(query_emb, term_emb, hard, self.temperature, false_negatives, hard_valid, "hard_terms")
