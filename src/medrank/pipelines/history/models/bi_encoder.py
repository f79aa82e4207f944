"""Bi-encoder baseline: cosine between a dialogue embedding and each question embedding.

Both sides go through one MiniLM :class:`~medrank.encoders.TransformerEncoder` (mean pooling, unit
vectors); the dialogue side is truncated from its start (``truncation_side="left"``) to
``max_dialogue_tokens``. Trained with InfoNCE over one positive and 7 negatives drawn from the
sample's own candidate list, temperature 0.05 (the paper's bi-encoder baseline), through
:class:`medrank.losses.ListwiseSoftmaxLoss`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from medrank.pipelines.history.artefacts import BI_ENCODER_MARKER
from medrank.pipelines.history.models.inputs import check_score_inputs

if TYPE_CHECKING:
    from medrank.encoders.transformer import TransformerEncoder


class HistoryBiEncoder(nn.Module):
    """The bi-encoder baseline: a question's score is its embedding's dot product with the dialogue's."""

    def __init__(self, encoder: TransformerEncoder, max_dialogue_tokens: int = 256) -> None:
        super().__init__()
        self.encoder = encoder
        self.model = encoder.model  # registers the trainable weights
        self.max_dialogue_tokens = max_dialogue_tokens
        self.encoder.tokenizer.truncation_side = "left"  # keep the most recent turns

    @classmethod
    def from_pretrained(cls, name: str = "minilm", max_dialogue_tokens: int = 256,
                        layers: int | None = None) -> HistoryBiEncoder:
        """A bi-encoder over an encoder alias, folder or hub id (see :func:`medrank.encoders.load_encoder`);
        ``layers`` keeps only the encoder's first N transformer blocks."""
        from medrank.encoders import load_encoder
        from medrank.utils.hf import keep_first_layers

        encoder = load_encoder(name)
        keep_first_layers(encoder.model, layers)
        return cls(encoder, max_dialogue_tokens)

    def embed(self, texts: Sequence[str], max_length: int) -> torch.Tensor:
        """``(n, d)`` embeddings of ``texts`` truncated to ``max_length`` tokens (with gradients when training)."""
        saved = self.encoder.max_length
        self.encoder.max_length = max_length
        try:
            return self.encoder.forward(self.encoder.tokenize(list(texts)))
        finally:
            self.encoder.max_length = saved

    def embed_dialogues(self, dialogues: Sequence[str]) -> torch.Tensor:
        """Rendered dialogues, each cut to its last ``max_dialogue_tokens`` tokens (the most recent turns)."""
        return self.embed(dialogues, self.max_dialogue_tokens + 2)

    def embed_questions(self, questions: Sequence[str]) -> torch.Tensor:
        """Candidate questions, each cut to 64 tokens."""
        return self.embed(questions, 64)

    @torch.inference_mode()
    def score(self, dialogue: str, questions: Sequence[str]) -> list[float]:
        """Scores of ``questions`` for one rendered dialogue (higher = ask sooner)."""
        questions = check_score_inputs(dialogue, questions)
        self.eval()
        d = self.embed_dialogues([dialogue])
        q = self.embed_questions(questions)
        return (q @ d[0]).tolist()

    def save(self, path: str | Path) -> None:
        """Write the encoder and its dialogue length to folder ``path`` atomically; :meth:`load` reads it."""
        from medrank.utils.io import atomic_dir

        with atomic_dir(Path(path)) as tmp:
            self.encoder.save(tmp / "encoder")
            (tmp / BI_ENCODER_MARKER).write_text(json.dumps({"max_dialogue_tokens": self.max_dialogue_tokens}))

    @classmethod
    def load(cls, path: str | Path) -> HistoryBiEncoder:
        """A model saved by :meth:`save` (a run's ``model/`` folder)."""
        from medrank.encoders import load_encoder

        path = Path(path)
        meta = path / BI_ENCODER_MARKER
        if not meta.exists():
            raise FileNotFoundError(f"{path} holds no history bi-encoder ({BI_ENCODER_MARKER} missing)")
        return cls(load_encoder(str(path / "encoder")), **json.loads(meta.read_text())).eval()


