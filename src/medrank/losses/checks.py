"""Input checks shared by the losses.

Embedding-pair losses take ``(B, d)`` query / term embeddings (``check_pairs``), optional
``(B, n, d)`` hard negatives (``check_hard``) and bool masks (``check_mask``).

List losses take

* ``scores``: ``(B, N)`` float logits of ``N`` candidates for ``B`` lists;
* ``labels``: ``(B, N)`` relevance grades (0/1 or graded, any numeric dtype);
* ``mask``: optional ``(B, N)`` bool, ``True`` for a real candidate, ``False`` for padding
  (lists of different lengths are right-padded to ``N``),

checked by ``check_inputs``, and return the scalar mean over the lists that carry a training
signal (``mean_over``).
"""

from __future__ import annotations

import torch


def check_pairs(query_emb: torch.Tensor, term_emb: torch.Tensor) -> int:
    """Validate ``(B, d)`` query/term embeddings of ``B`` positive pairs; returns ``B``."""
    if query_emb.ndim != 2 or term_emb.ndim != 2:
        raise ValueError(
            f"query_emb and term_emb must be (batch, dim), got {tuple(query_emb.shape)} and {tuple(term_emb.shape)}"
        )
    if query_emb.shape != term_emb.shape:
        raise ValueError(f"query_emb {tuple(query_emb.shape)} and term_emb {tuple(term_emb.shape)} differ")
    if query_emb.shape[0] == 0:
        raise ValueError("empty batch")
    return int(query_emb.shape[0])


def check_hard(hard: torch.Tensor | None, batch: int, dim: int, what: str) -> None:
    if hard is None:
        return
    if hard.ndim != 3 or hard.shape[0] != batch or hard.shape[2] != dim:
        raise ValueError(f"{what} must be (batch={batch}, n_hard, dim={dim}), got {tuple(hard.shape)}")


def check_mask(mask: torch.Tensor | None, shape: tuple[int, ...], what: str) -> None:
    if mask is None:
        return
    if tuple(mask.shape) != shape or mask.dtype != torch.bool:
        raise ValueError(f"{what} must be a bool tensor of shape {shape}, got {mask.dtype} {tuple(mask.shape)}")


def check_inputs(
    scores: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate shapes; returns ``(scores, float labels, bool mask)``."""
    if scores.ndim == 1:
        scores, labels = scores[None], labels[None]
        mask = None if mask is None else mask[None]
    if scores.ndim != 2:
        raise ValueError(f"scores must be (batch, n_candidates), got {tuple(scores.shape)}")
    if labels.shape != scores.shape:
        raise ValueError(f"labels {tuple(labels.shape)} must have the shape of scores {tuple(scores.shape)}")
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    elif mask.shape != scores.shape or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(scores.shape)}, got {mask.dtype} {tuple(mask.shape)}")
    if scores.shape[1] == 0:
        raise ValueError("empty candidate lists")
    labels = labels.to(scores.dtype).masked_fill(~mask, 0.0)
    return scores, labels, mask


def mean_over(values: torch.Tensor, keep: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Mean of ``values[keep]``; an all-false ``keep`` gives a zero that keeps the graph."""
    if keep.any():
        return values[keep].mean()
    return like.sum() * 0.0
