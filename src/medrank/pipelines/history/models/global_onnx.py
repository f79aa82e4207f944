"""The global re-ranker run by ONNX Runtime (fp32, or its matrix products quantised to int8).

The exported graph is the torch model's forward: the encoder over ``input_ids``, ``token_type_ids``,
``position_ids`` (restarted per candidate block) and the ``(B, 1, T, T)`` boolean "blocks" attention
mask, then the scoring head read at ``pool_index`` (each candidate's [MASK]); batch, tokens and
candidates are dynamic axes. The input is built by the torch model's own :meth:`GlobalReranker.encode`
(same truncation, positions and mask), so the two backends see identical inputs. Exports are cached
and checked like the encoders' (:func:`medrank.encoders.onnx.ensure_export`: keyed by a digest of the
weights, the file's SHA-256 verified, a damaged one exported again).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.encoders.onnx import (
    MODEL_FILE,
    ExportGraph,
    ExportSource,
    OnnxBackendError,
    SessionRunner,
    ensure_export,
)
from medrank.pipelines.history.models.global_reranker import EncodedSample, GlobalReranker
from medrank.pipelines.history.models.inputs import check_score_inputs, special_ids

#: the cache-key name of the graph (bump the suffix when the graph's inputs or outputs change)
HEAD = "global-mask-scores-1"
INPUT_NAMES = ["input_ids", "token_type_ids", "position_ids", "attention_mask", "pool_index"]


class GlobalScoreGraph(nn.Module):
    """``(input_ids, token_type_ids, position_ids, attention_mask (B,1,T,T) bool, pool_index (B,N))`` -> ``(B, N)`` scores."""

    def __init__(self, reranker: GlobalReranker) -> None:
        super().__init__()
        self.encoder, self.head = reranker.encoder, reranker.head

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, position_ids: torch.Tensor,
                attention_mask: torch.Tensor, pool_index: torch.Tensor) -> torch.Tensor:
        # an additive mask: the eager attention traced for export adds the mask to the attention logits
        bias = torch.zeros(attention_mask.shape, dtype=torch.float32).masked_fill(
            attention_mask.logical_not(), torch.finfo(torch.float32).min)
        hidden = self.encoder(input_ids=input_ids, attention_mask=bias, token_type_ids=token_type_ids,
                              position_ids=position_ids).last_hidden_state
        idx = pool_index[:, :, None].expand(-1, -1, hidden.shape[-1])
        return self.head(hidden.gather(1, idx))[..., 0]


def _example_batch(reranker: GlobalReranker) -> dict[str, torch.Tensor]:
    """Two samples of different lengths and candidate counts (padding traced in every axis)."""
    tok = reranker.tokenizer
    cls, sep, mask, pad = special_ids(tok)
    word = next(i for i in range(len(tok)) if i not in (cls, sep, mask, pad))

    def sample(dialogue: int, blocks: int) -> EncodedSample:
        ids, seg, pos = [cls, *[word] * dialogue, sep], [0] * (dialogue + 2), list(range(dialogue + 2))
        pool = []
        for b in range(blocks):
            pool.append(len(ids) + 2)
            ids += [word, word, mask, sep]
            seg += [b + 1] * 4
            pos += list(range(dialogue + 2, dialogue + 6))
        return EncodedSample(ids, [0] * (dialogue + 2) + [1] * (4 * blocks), pos, pool, seg)

    return reranker.collate([sample(5, 3), sample(3, 2)])


def export_source(reranker: GlobalReranker, name: str = "global-reranker") -> ExportSource:
    """What :func:`ensure_export` needs to export ``reranker`` (its weights digested: encoder and head)."""
    if reranker.config.candidate_attention != "blocks":
        raise OnnxBackendError("only the 'blocks' candidate attention has an ONNX export (its mask is 4-D)")

    def graph() -> ExportGraph:
        batch = _example_batch(reranker)
        inputs = tuple(batch[n] for n in INPUT_NAMES)
        axes = {"input_ids": {0: "batch", 1: "tokens"}, "token_type_ids": {0: "batch", 1: "tokens"},
                "position_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 2: "tokens", 3: "key_tokens"},
                "pool_index": {0: "batch", 1: "candidates"}, "output": {0: "batch", 1: "candidates"}}
        return ExportGraph(GlobalScoreGraph(reranker), inputs, list(INPUT_NAMES), axes, reranker.encoder,
                           {"inputs": list(INPUT_NAMES)})

    return ExportSource(reranker, reranker.tokenizer, HEAD, name, graph)


class OnnxGlobalReranker:
    """A :class:`GlobalReranker` served by ONNX Runtime; :meth:`score` matches the torch model's.

    Args:
        reranker: the torch model (its tokenizer and input settings are used as they are; its weights are
            exported, or read from the export cache).
        quantized: serve the dynamically quantised int8 export instead of the fp32 one.
        threads: ONNX Runtime's intra-op threads; ``None`` follows medrank's thread setting.
        cache_root: where exports are cached (default ``$MEDRANK_CACHE/onnx``).
    """

    def __init__(self, reranker: GlobalReranker, *, quantized: bool = False, threads: int | None = None,
                 cache_root: str | os.PathLike[str] | None = None, name: str = "global-reranker") -> None:
        if not isinstance(reranker, GlobalReranker):
            raise OnnxBackendError(f"OnnxGlobalReranker serves a GlobalReranker, got {type(reranker).__name__}")
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
        self.torch_model = reranker
        self.tokenizer, self.config = reranker.tokenizer, reranker.config
        self.backend = "onnx-int8" if quantized else "onnx"
        self.folder = ensure_export(export_source(reranker, name), "int8" if quantized else "fp32", cache_root)
        self._runner = SessionRunner(self.folder / MODEL_FILE, threads)

    @property
    def threads(self) -> int:
        return self._runner.threads

    def feed(self, dialogue: str, questions: Sequence[str]) -> dict[str, np.ndarray]:
        """The session inputs of one dialogue and its candidates (the torch model's encoding)."""
        model = self.torch_model
        batch = model.collate([model.encode(dialogue, questions)])
        return {"input_ids": batch["input_ids"].numpy(), "token_type_ids": batch["token_type_ids"].numpy(),
                "position_ids": batch["position_ids"].numpy(), "attention_mask": batch["attention_mask"].numpy(),
                "pool_index": batch["pool_index"].numpy()}

    def score(self, dialogue: str, questions: Sequence[str]) -> list[float]:
        """Scores of ``questions`` for one dialogue."""
        questions = check_score_inputs(dialogue, questions)
        session, _ = self._runner.session()
        return session.run(None, self.feed(dialogue, questions))[0][0].astype(np.float64).tolist()


def with_backend(reranker: GlobalReranker, backend: str, threads: int | None = None,
                 cache_root: str | os.PathLike[str] | None = None) -> Any:
    """``reranker`` itself for ``"torch"``, else an :class:`OnnxGlobalReranker` over it."""
    from medrank.encoders.onnx import check_backend

    check_backend(backend)
    if backend == "torch":
        return reranker
    return OnnxGlobalReranker(reranker, quantized=backend == "onnx-int8", threads=threads, cache_root=cache_root)


__all__ = ["HEAD", "GlobalScoreGraph", "OnnxGlobalReranker", "export_source", "with_backend"]
