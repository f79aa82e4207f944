"""Cross-encoder for symptom / concept detection (a baseline).

:class:`CrossEncoder` scores ``(query, term)`` pairs jointly; its lower blocks can be frozen,
but nothing can be cached because every pair is a new input. The bi-encoder lives in
:mod:`medrank.models.bi_encoder` (the procedure pipeline uses it too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from medrank.encoders.blocks import (
    block_forward,
    encoder_blocks,
    eval_mode,
    frozen_bottom,
    model_attention_mask,
)
from medrank.encoders.transformer import TransformerEncoder, pool


class CrossEncoder(nn.Module):
    """A cross-encoder: ``query: q`` and ``passage: t`` read jointly, one logit from mean pooling + linear.

    Built on the same weights as the bi-encoders (e5-small's BERT), so the baseline differs
    only in architecture. With ``train_layers`` the lower blocks run without gradient.
    """

    def __init__(self, encoder: TransformerEncoder, train_layers: int | None = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        hf = encoder.model
        for p in hf.parameters():
            p.requires_grad_(train_layers is None)
        if train_layers is None:
            self.n_frozen = 0
        else:
            blocks = encoder_blocks(hf)
            if not 1 <= train_layers <= len(blocks):
                raise ValueError(f"train_layers must be in 1..{len(blocks)} (or None), got {train_layers}")
            self.n_frozen = len(blocks) - train_layers
            for block in blocks[self.n_frozen :]:
                for p in block.parameters():
                    p.requires_grad_(True)
        self.train_layers = train_layers
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.dim, 1)
        parts: dict[str, nn.Module] = {"head": self.head}
        if train_layers is None:
            parts["model"] = hf
        else:
            parts["top_layers"] = nn.ModuleList(encoder_blocks(hf)[self.n_frozen :])
        self.trainable = nn.ModuleDict(parts)

    def tokenize(self, queries: Sequence[str], terms: Sequence[str]) -> dict[str, torch.Tensor]:
        enc = self.encoder
        batch = enc.tokenizer(
            [enc.query_prompt + q for q in queries],
            [enc.passage_prompt + t for t in terms],
            padding=True,
            truncation=True,
            max_length=enc.max_length,
            return_tensors="pt",
        )
        return {k: v.to(enc.device) for k, v in batch.items()}

    def forward(self, queries: Sequence[str], terms: Sequence[str]) -> torch.Tensor:
        """``(P,)`` logits for the pairs ``(queries[p], terms[p])``."""
        if len(queries) != len(terms):
            raise ValueError(f"{len(queries)} queries but {len(terms)} terms")
        features = self.tokenize(queries, terms)
        hf = self.encoder.model
        if self.train_layers is None:
            hidden = hf(**features).last_hidden_state
        else:
            hidden = frozen_bottom(hf, self.n_frozen, features)
            mask = model_attention_mask(hf, hidden, features["attention_mask"])
            for block in encoder_blocks(hf)[self.n_frozen :]:
                hidden = block_forward(block, hidden, mask)
        emb = pool(hidden, features["attention_mask"], "mean")
        return self.head(self.dropout(emb))[:, 0]

    @torch.no_grad()
    def score(self, queries: Sequence[str], terms: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """Inference logits for many pairs (eval mode, batched by length)."""
        lengths = np.array([len(q) + len(t) for q, t in zip(queries, terms, strict=True)])
        order = np.argsort(-lengths, kind="stable")
        out = np.empty(len(queries), dtype=np.float32)
        with eval_mode(self):
            for start in tqdm(range(0, len(order), batch_size), desc="cross-encode", disable=not show_progress):
                idx = order[start : start + batch_size]
                out[idx] = self.forward([queries[i] for i in idx], [terms[i] for i in idx]).float().cpu().numpy()
        return out
