"""The global re-ranker: one transformer pass scores every candidate question of a dialogue.

Input (Zhu et al., 2023, "Dialogue-Contextualized Re-ranking for Medical History-Taking")::

    [CLS] dialogue [SEP] q1 [MASK] [SEP] q2 [MASK] [SEP] ... qn [MASK] [SEP]

* the score of ``q_i`` is a linear head on the final hidden state of its ``[MASK]`` (pooling) token;
* token-type ids are 0 on the dialogue block and 1 on every candidate block (``type_embeddings=False``
  sets all to 0 — the "no type embeddings" ablation);
* positions (``position_mode="restart"``, default): the dialogue block takes positions
  ``0 .. L-1`` and **every candidate block restarts at L** (``L .. L + len - 1``), i.e. each
  candidate is positioned as if it alone followed the dialogue. Chosen over restarting at 0 so
  that a candidate never shares positions with the dialogue (the dialogue/candidate boundary stays
  visible to position embeddings too) while the longest input still needs only ``L + max
  candidate length`` (< 512) positions. With restarted positions the model is permutation-
  equivariant in the candidates: shuffling them permutes the scores (up to float noise).
  ``position_mode="sequential"`` numbers all tokens ``0 .. T-1`` (the ablation); as the whole
  input must then fit the encoder's position table, the dialogue is cut further (again from its
  start) when dialogue + candidates would exceed it;
* the dialogue is truncated from its start to ``max_dialogue_tokens`` (most recent turns kept);
* attention (``candidate_attention="blocks"``, default): dialogue tokens attend to the dialogue;
  candidate tokens attend to the dialogue, to their own block and to every candidate's pooling
  token — candidates interact (the "global" in the name) through the pooling tokens. Why not full
  attention: with restarted positions two candidates of equal length put identical [MASK]
  tokens at identical positions, and with full attention each would attend to *every*
  candidate's words with the same position pattern, so the model could not tell which words are
  its own (all equal-length candidates get the same score). ``"full"`` keeps that behaviour for
  comparison.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from medrank.pipelines.history.artefacts import GLOBAL_RERANKER_MARKER
from medrank.pipelines.history.models.inputs import (
    check_score_inputs,
    dialogue_tail_ids,
    question_ids,
    special_ids,
)
from medrank.utils.hf import keep_first_layers, quiet_weight_loading


@dataclass
class GlobalInputConfig:
    max_dialogue_tokens: int = 256
    max_question_tokens: int = 24
    position_mode: str = "restart"  # or "sequential"
    type_embeddings: bool = True
    candidate_attention: str = "blocks"  # or "full"

    def __post_init__(self) -> None:
        if self.candidate_attention not in ("blocks", "full"):
            raise ValueError(f"candidate_attention must be 'blocks' or 'full', got {self.candidate_attention!r}")
        if self.position_mode not in ("restart", "sequential"):
            raise ValueError(f"position_mode must be 'restart' or 'sequential', got {self.position_mode!r}")
        if self.max_question_tokens < 1:
            raise ValueError("max_question_tokens must be >= 1")


@dataclass
class EncodedSample:
    input_ids: list[int]
    token_type_ids: list[int]
    position_ids: list[int]
    pool_index: list[int]  # position in input_ids of each candidate's [MASK], in candidate order
    segment_ids: list[int]  # 0 = dialogue block, k = k-th candidate block (1-based)


def encode_sample(
    tokenizer: Any, dialogue: str, questions: Sequence[str], cfg: GlobalInputConfig,
    dialogue_ids: list[int] | None = None, position_limit: int | None = None,
) -> EncodedSample:
    """Build the single input sequence of one dialogue and its candidates.

    ``position_limit`` (sequential positions only): the encoder's position table size; the
    dialogue is shortened from its start so the whole sequence fits.
    """
    if not questions:
        raise ValueError("a sample needs at least one candidate question")
    cls, sep, mask, _ = special_ids(tokenizer)
    dia = dialogue_ids if dialogue_ids is not None else dialogue_tail_ids(tokenizer, dialogue, cfg.max_dialogue_tokens)
    q_ids = question_ids(tokenizer, questions, cfg.max_question_tokens)
    if cfg.position_mode == "sequential" and position_limit is not None:
        room = position_limit - 2 - sum(len(q) + 2 for q in q_ids)
        if room < 0:
            raise ValueError(f"{len(q_ids)} candidates need more than the encoder's {position_limit} positions "
                             "(use position_mode='restart')")
        dia = dia[len(dia) - min(len(dia), room):]
    ids = [cls, *dia, sep]
    segments = [0] * len(ids)
    types = [0] * len(ids)
    positions = list(range(len(ids)))
    start = len(ids)
    pool = []
    for q in q_ids:
        block = [*q, mask, sep]
        pool.append(len(ids) + len(q))
        ids.extend(block)
        segments.extend([len(pool)] * len(block))
        types.extend([1 if cfg.type_embeddings else 0] * len(block))
        offset = start if cfg.position_mode == "restart" else len(positions)
        positions.extend(range(offset, offset + len(block)))
    return EncodedSample(ids, types, positions, pool, segments)


def block_attention_mask(segments: torch.Tensor, pool: torch.Tensor) -> torch.Tensor:
    """``(B, 1, T, T)`` bool mask of the "blocks" scheme from ``(B, T)`` segment ids (-1 = padding)
    and pooling-token flags: dialogue -> dialogue; candidate -> dialogue + own block + pooling tokens."""
    q, k = segments[:, :, None], segments[:, None, :]
    to_dialogue = k == 0
    cand_rows = (q > 0) & (to_dialogue | (k == q) | pool[:, None, :])
    other_rows = (q <= 0) & to_dialogue  # dialogue and padding rows (padding rows never all-masked)
    return (cand_rows | other_rows)[:, None]


def collate(samples: Sequence[EncodedSample], pad_id: int, candidate_attention: str = "blocks") -> dict[str, torch.Tensor]:
    """Right-pad a batch; ``pool_index``/``candidate_mask`` are ``(B, N_max)``; the attention mask is
    ``(B, T)`` for ``"full"`` and ``(B, 1, T, T)`` for ``"blocks"``."""
    t = max(len(s.input_ids) for s in samples)
    n = max(len(s.pool_index) for s in samples)
    b = len(samples)
    out = {
        "input_ids": torch.full((b, t), pad_id, dtype=torch.long),
        "token_type_ids": torch.zeros((b, t), dtype=torch.long),
        "position_ids": torch.zeros((b, t), dtype=torch.long),
        "attention_mask": torch.zeros((b, t), dtype=torch.long),
        "pool_index": torch.zeros((b, n), dtype=torch.long),
        "candidate_mask": torch.zeros((b, n), dtype=torch.bool),
    }
    segments = torch.full((b, t), -1, dtype=torch.long)
    pool = torch.zeros((b, t), dtype=torch.bool)
    for i, s in enumerate(samples):
        k = len(s.input_ids)
        out["input_ids"][i, :k] = torch.tensor(s.input_ids)
        out["token_type_ids"][i, :k] = torch.tensor(s.token_type_ids)
        out["position_ids"][i, :k] = torch.tensor(s.position_ids)
        out["attention_mask"][i, :k] = 1
        out["pool_index"][i, : len(s.pool_index)] = torch.tensor(s.pool_index)
        out["candidate_mask"][i, : len(s.pool_index)] = True
        segments[i, :k] = torch.tensor(s.segment_ids)
        pool[i, torch.tensor(s.pool_index)] = True
    if candidate_attention == "blocks":
        out["attention_mask"] = block_attention_mask(segments, pool)
    return out


class GlobalReranker(nn.Module):
    """A BERT encoder plus a linear scoring head read at each candidate's pooling token."""

    def __init__(self, encoder: nn.Module, tokenizer: Any, config: GlobalInputConfig | None = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = config or GlobalInputConfig()
        hidden = int(encoder.config.hidden_size)
        self.head = nn.Linear(hidden, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        limit = int(getattr(encoder.config, "max_position_embeddings", 512))
        need = self.config.max_dialogue_tokens + 2 + self.config.max_question_tokens + 2
        if self.config.position_mode == "restart" and need > limit:
            raise ValueError(f"dialogue + one candidate need {need} positions but the encoder has {limit}")
        if self.config.type_embeddings and int(getattr(encoder.config, "type_vocab_size", 1)) < 2:
            raise ValueError("the encoder has no second token type; set type_embeddings=False")

    @classmethod
    def from_pretrained(cls, name_or_path: str, config: GlobalInputConfig | None = None,
                        layers: int | None = None) -> GlobalReranker:
        """A new global re-ranker over a base encoder (an alias, folder or hub id) with a fresh scoring head;
        ``layers`` keeps only the base's first N transformer blocks (saved so, reloaded with N)."""
        from transformers import AutoModel, AutoTokenizer

        from medrank.encoders import resolve_model_path

        path = resolve_model_path(name_or_path)
        with quiet_weight_loading():
            model = keep_first_layers(AutoModel.from_pretrained(path), layers)
        return cls(model, AutoTokenizer.from_pretrained(path), config)

    def encode(self, dialogue: str, questions: Sequence[str], dialogue_ids: list[int] | None = None) -> EncodedSample:
        """One long input: the dialogue, then each candidate behind its pooling token (see :func:`encode_sample`)."""
        limit = int(getattr(self.encoder.config, "max_position_embeddings", 512))
        return encode_sample(self.tokenizer, dialogue, questions, self.config, dialogue_ids, limit)

    def collate(self, samples: Sequence[EncodedSample]) -> dict[str, torch.Tensor]:
        """Pad encoded samples into a batch for :meth:`forward`; an error when a position exceeds the encoder's."""
        limit = int(getattr(self.encoder.config, "max_position_embeddings", 512))
        longest = max(max(s.position_ids) for s in samples)
        if longest >= limit:
            raise ValueError(
                f"input needs position {longest} but the encoder has {limit} positions "
                "(use position_mode='restart' or fewer/shorter candidates)"
            )
        return collate(samples, special_ids(self.tokenizer)[3], self.config.candidate_attention)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B, N)`` candidate scores (padding slots hold garbage; use ``candidate_mask``)."""
        hidden = self.encoder(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            position_ids=batch["position_ids"],
        ).last_hidden_state
        idx = batch["pool_index"][:, :, None].expand(-1, -1, hidden.shape[-1])
        pooled = hidden.gather(1, idx)  # (B, N, H)
        return self.head(pooled)[..., 0]

    @torch.inference_mode()
    def score(self, dialogue: str, questions: Sequence[str]) -> list[float]:
        """Scores of ``questions`` for one dialogue (model left in eval mode)."""
        questions = check_score_inputs(dialogue, questions)
        self.eval()
        batch = self.collate([self.encode(dialogue, questions)])
        return self.forward(batch)[0].tolist()

    # -- persistence --------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Backbone (HF folder, safetensors) + tokenizer + ``head.safetensors`` + ``global_reranker.json``."""
        from safetensors.torch import save_file

        from medrank.utils.io import atomic_dir

        with atomic_dir(Path(path)) as tmp:
            self.encoder.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            save_file({k: v.detach().contiguous() for k, v in self.head.state_dict().items()}, str(tmp / "head.safetensors"))
            (tmp / GLOBAL_RERANKER_MARKER).write_text(json.dumps(asdict(self.config), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> GlobalReranker:
        """A model saved by :meth:`save` (a run's ``model/`` folder)."""
        from safetensors.torch import load_file
        from transformers import AutoModel, AutoTokenizer

        path = Path(path)
        meta = path / GLOBAL_RERANKER_MARKER
        if not meta.exists():
            raise FileNotFoundError(f"{path} holds no global re-ranker ({GLOBAL_RERANKER_MARKER} missing)")
        config = GlobalInputConfig(**json.loads(meta.read_text(encoding="utf-8")))
        with quiet_weight_loading():
            base = AutoModel.from_pretrained(str(path))
        model = cls(base, AutoTokenizer.from_pretrained(str(path)), config)
        model.head.load_state_dict(load_file(str(path / "head.safetensors")))
        return model.eval()
