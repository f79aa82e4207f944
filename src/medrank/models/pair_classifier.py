"""A pretrained encoder with a fresh one-logit sequence-classification head, for (query, text) pairs.

The passage cross-encoder and the history cross-encoder both start from it.
"""

from __future__ import annotations

from typing import Any

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
