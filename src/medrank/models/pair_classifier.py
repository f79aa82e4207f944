"""A pretrained encoder with a fresh one-logit sequence-classification head, for (query, text) pairs.

The passage cross-encoder, the history cross-encoder and the symptom term re-ranker start from it;
:class:`PairScorer` scores text pairs with such a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from medrank.utils.hf import quiet_weight_loading


def load_pair_classifier(name_or_path: str) -> tuple[Any, Any]:
    """``(model, tokenizer)``: ``AutoModelForSequenceClassification`` with ``num_labels=1`` over a named or local encoder."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from medrank.encoders import resolve_model_path

    path = resolve_model_path(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    with quiet_weight_loading():
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    return model, tokenizer


class PairScorer:
    """Scores (query, text) pairs with a one-logit sequence-classification model (torch; the ONNX Runtime twin is
    :class:`medrank.encoders.onnx.OnnxPairScorer`): tokenised once, batched by length, the second text truncated."""

    def __init__(self, model: Any, tokenizer: Any, max_length: int = 128) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length

    def features(self, queries: Sequence[str], passages: Sequence[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(
            list(queries), list(passages), padding=True, truncation="only_second", max_length=self.max_length,
            return_tensors="pt",
        )

    def logits(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(**features).logits[:, 0]

    @torch.inference_mode()
    def score_pairs(
        self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 64, show_progress: bool = False
    ) -> np.ndarray:
        was_training = self.model.training
        self.model.eval()
        # Tokenise once, then batch by length so padding stays small.
        enc = self.tokenizer(list(queries), list(passages), truncation="only_second", max_length=self.max_length)
        order = np.argsort([-len(x) for x in enc["input_ids"]], kind="stable")
        out = np.empty(len(queries), dtype=np.float32)
        pad = self.tokenizer.pad_token_id or 0
        for s in tqdm(range(0, len(order), batch_size), disable=not show_progress, desc="cross-encoder", unit="batch"):
            idx = order[s : s + batch_size]
            longest = max(len(enc["input_ids"][i]) for i in idx)
            feats = {k: torch.full((len(idx), longest), pad if k == "input_ids" else 0, dtype=torch.long) for k in enc}
            for r, i in enumerate(idx):
                for k in enc:
                    seq = enc[k][i]
                    feats[k][r, : len(seq)] = torch.as_tensor(seq)
            out[idx] = self.logits(feats).float().numpy()
        if was_training:
            self.model.train()
        return out
