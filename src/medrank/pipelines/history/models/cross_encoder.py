"""Cross-encoder baseline: ``[CLS] dialogue [SEP] question [SEP]`` -> one logit, one pass per candidate.

Built on the same backbone through ``AutoModelForSequenceClassification`` (a fresh 1-output head,
:func:`medrank.models.pair_classifier.load_pair_classifier`), trained with pointwise BCE. The
dialogue is truncated from its start exactly as for the global re-ranker, so both read the same
context; scoring ``n`` candidates costs ``n`` transformer passes over the dialogue.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from medrank.pipelines.history.artefacts import CROSS_ENCODER_MARKER
from medrank.pipelines.history.models.inputs import (
    check_score_inputs,
    dialogue_tail_ids,
    question_ids,
    special_ids,
)
from medrank.utils.hf import keep_first_layers, quiet_weight_loading


class HistoryCrossEncoder(nn.Module):
    """The cross-encoder baseline: one ``[CLS] dialogue [SEP] question [SEP]`` pass per candidate, a logit each.

    ``model`` is a ``transformers`` sequence-classification model with one label; the dialogue keeps
    its last ``max_dialogue_tokens`` tokens (the most recent turns), a question its first
    ``max_question_tokens``.
    """

    def __init__(self, model: nn.Module, tokenizer: Any, max_dialogue_tokens: int = 256, max_question_tokens: int = 24) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_dialogue_tokens = max_dialogue_tokens
        self.max_question_tokens = max_question_tokens

    @classmethod
    def from_pretrained(cls, name_or_path: str, layers: int | None = None, **kwargs: int) -> HistoryCrossEncoder:
        """A new cross-encoder over a base model (an alias, folder or hub id) with a fresh 1-label head;
        ``layers`` keeps only the base's first N transformer blocks."""
        from medrank.models.pair_classifier import load_pair_classifier

        model, tokenizer = load_pair_classifier(name_or_path)
        return cls(keep_first_layers(model, layers), tokenizer, **kwargs)

    def features(self, dialogue_ids: Sequence[list[int]], questions: Sequence[str]) -> dict[str, torch.Tensor]:
        """Pairs ``(dialogue_ids[i], questions[i])`` as padded tensors."""
        cls, sep, _, pad = special_ids(self.tokenizer)
        qids = question_ids(self.tokenizer, questions, self.max_question_tokens)
        seqs = [([cls, *d, sep], [*q, sep]) for d, q in zip(dialogue_ids, qids, strict=True)]
        t = max(len(a) + len(b) for a, b in seqs)
        ids = torch.full((len(seqs), t), pad, dtype=torch.long)
        types = torch.zeros((len(seqs), t), dtype=torch.long)
        att = torch.zeros((len(seqs), t), dtype=torch.long)
        for i, (a, b) in enumerate(seqs):
            ids[i, : len(a) + len(b)] = torch.tensor(a + b)
            types[i, len(a) : len(a) + len(b)] = 1
            att[i, : len(a) + len(b)] = 1
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": att}

    def dialogue_ids(self, dialogue: str) -> list[int]:
        """Token ids of the last ``max_dialogue_tokens`` tokens of a rendered dialogue (no special tokens)."""
        return dialogue_tail_ids(self.tokenizer, dialogue, self.max_dialogue_tokens)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B,)`` logits of the pairs built by :meth:`features`."""
        return self.model(**features).logits[:, 0]

    @torch.inference_mode()
    def score(self, dialogue: str, questions: Sequence[str], batch_size: int = 32,
              dialogue_ids: list[int] | None = None) -> list[float]:
        """Scores of ``questions`` for one rendered dialogue, one (dialogue, question) pass each."""
        questions = check_score_inputs(dialogue, questions)
        self.eval()
        d = dialogue_ids if dialogue_ids is not None else self.dialogue_ids(dialogue)
        out: list[float] = []
        for s in range(0, len(questions), batch_size):
            part = list(questions[s : s + batch_size])
            out.extend(self.forward(self.features([d] * len(part), part)).tolist())
        return out

    def save(self, path: str | Path) -> None:
        """Write the model (safetensors), tokenizer and lengths to folder ``path`` atomically; :meth:`load` reads it."""
        from medrank.utils.io import atomic_dir

        with atomic_dir(Path(path)) as tmp:
            self.model.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            (tmp / CROSS_ENCODER_MARKER).write_text(json.dumps(
                {"max_dialogue_tokens": self.max_dialogue_tokens, "max_question_tokens": self.max_question_tokens}))

    @classmethod
    def load(cls, path: str | Path) -> HistoryCrossEncoder:
        """A model saved by :meth:`save` (a run's ``model/`` folder)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = Path(path)
        meta = path / CROSS_ENCODER_MARKER
        if not meta.exists():
            raise FileNotFoundError(f"{path} holds no history cross-encoder ({CROSS_ENCODER_MARKER} missing)")
        kw = json.loads(meta.read_text())
        with quiet_weight_loading():
            model = AutoModelForSequenceClassification.from_pretrained(str(path))
        return cls(model, AutoTokenizer.from_pretrained(str(path)), **kw).eval()
