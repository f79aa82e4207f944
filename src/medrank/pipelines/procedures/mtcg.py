"""MTCG, the multi-task candidate generator: a mention/term bi-encoder with an implication-count head.

The encoder is the symptom pipeline's :class:`~medrank.models.BiEncoder` (mean
pooling, unit vectors, the ``train_layers`` top blocks trained over a cached frozen bottom), so
the CPU recipe pays for the frozen bottom once per text. On top of it:

* **count head** — a linear layer on the mention's top-layer [CLS] state predicting how many
  standard terms the mention implies: class 0 = 1 term, 1 = 2 terms, 2 = three or more;
* **recall** — the ``k_c`` nearest standard names under Euclidean distance of the unit vectors
  (monotone in cosine, so a flat inner-product index gives the same order);
  :func:`euclidean_from_cosine` turns the index scores back into the distances the fusion block uses.

Only the trainable parts (top blocks + count head, a few MB) are saved, as safetensors, next to a
JSON spec naming the base encoder; :meth:`MTCG.load` rebuilds the rest from the base weights.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.encoders.base import TextKind
from medrank.encoders.blocks import (
    block_forward,
    encoder_blocks,
    eval_mode,
    model_attention_mask,
)
from medrank.encoders.transformer import TransformerEncoder, pool
from medrank.models import BiEncoder

N_COUNT_CLASSES = 3
WEIGHTS = "mtcg.safetensors"
SPEC = "mtcg.json"
#: the weights file's entry for the embedding rows of characters added to the vocabulary
ADDED_ROWS = "added_characters.embeddings"


def euclidean_from_cosine(cos: np.ndarray) -> np.ndarray:
    """``||a - b||`` of unit vectors from their cosine: ``sqrt(2 - 2 cos)``."""
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(cos, dtype=np.float64), 0.0, None))


def run_top(bi: BiEncoder, hidden: torch.Tensor, mask: torch.Tensor, start: int | None = None) -> torch.Tensor:
    """The trainable top blocks of ``bi`` over frozen-bottom states ``(n, L, d)`` → top states ``(n, L, d)``.

    ``start``: ``hidden`` already went through the blocks below ``start`` (≥ ``bi.n_frozen``): a
    KAR that reads MTCG's own trained bottom hands its mention states over, and only the rest run.
    """
    hf = bi.encoder.model
    start = bi.n_frozen if start is None else start
    if not bi.n_frozen <= start <= len(encoder_blocks(hf)):
        raise ValueError(f"start must be between the frozen bottom ({bi.n_frozen}) and the last block ({len(encoder_blocks(hf))}), got {start}")
    am = model_attention_mask(hf, hidden, mask)
    for block in encoder_blocks(hf)[start:]:
        hidden = block_forward(block, hidden, am)
    return hidden


def bottom_states(bi: BiEncoder, texts: Sequence[str], kind: TextKind | None, use_cache: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Frozen-bottom states ``(n, L, d)`` and mask ``(n, L)``: from the cache (training) or computed (inference)."""
    if use_cache and bi.use_cache:
        bi.fill_cache(texts, kind)
        return bi._cache_for(kind).gather(list(texts), bi.device)
    enc = bi.encoder
    features = enc.tokenize(list(texts), kind)
    return bi.frozen_states(features), features["attention_mask"]


class MTCG(nn.Module):
    """Bi-encoder + count head.

    Args:
        encoder: the base encoder (e5-small or any BERT-style HF model).
        train_layers: top blocks trained over the cached frozen bottom (``len(blocks)`` trains
            every block but the embeddings).
        cache_dtype: storage type of the frozen-bottom cache.
    """

    def __init__(self, encoder: TransformerEncoder, train_layers: int = 2, cache_dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        #: SHA-256 of the weights file this model was loaded from (:meth:`load_weights`); None before
        self.weights_digest: str | None = None
        if train_layers is None:
            raise ValueError("MTCG needs train_layers (use the number of blocks to train them all)")
        self.bi = BiEncoder(encoder, train_layers=train_layers, cache=True, cache_dtype=cache_dtype)
        self.count_head = nn.Linear(encoder.dim, N_COUNT_CLASSES)
        self.trainable = nn.ModuleDict({"encoder": self.bi.trainable, "count_head": self.count_head})

    @property
    def dim(self) -> int:
        return self.bi.dim

    def mention_forward(self, hidden: torch.Tensor, mask: torch.Tensor, start: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Frozen-bottom mention states → (unit embeddings ``(n, d)``, count logits ``(n, 3)``).

        ``start``: the block ``hidden`` stops below (default: the end of the frozen bottom; see :func:`run_top`).
        """
        top = run_top(self.bi, hidden, mask, start)
        emb = nn.functional.normalize(pool(top, mask, "mean"), dim=-1)
        return emb, self.count_head(top[:, 0])

    def embed_mentions(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable mention embeddings and count logits (training; uses the cache)."""
        hidden, mask = bottom_states(self.bi, texts, "query")
        return self.mention_forward(hidden, mask)

    def embed_terms(self, texts: Sequence[str]) -> torch.Tensor:
        """Differentiable term embeddings (training; bucketed by length)."""
        return self.bi.embed(list(texts), "passage")

    @torch.no_grad()
    def encode_mentions(self, texts: Sequence[str], batch_size: int = 256, use_cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Inference: unit embeddings ``(n, d)`` and count-class probabilities ``(n, 3)``."""
        texts = list(texts)
        embs, probs = [], []
        with eval_mode(self):
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                emb, logits = self.mention_forward(*bottom_states(self.bi, chunk, "query", use_cache))
                embs.append(emb.float().cpu().numpy())
                probs.append(torch.softmax(logits, -1).float().cpu().numpy())
        if not texts:
            return np.zeros((0, self.dim), np.float32), np.zeros((0, N_COUNT_CLASSES), np.float32)
        return np.concatenate(embs), np.concatenate(probs)

    def encode_terms(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        """Inference unit embeddings ``(n, d)`` of standard names (progress bar: default above 5,000 names)."""
        return self.bi.encode(list(texts), "passage", show_progress=show_progress)

    # -- persistence -----------------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        enc = self.bi.encoder
        return {
            "encoder": enc.model_path or enc.name,
            "encoder_name": enc.name,
            "max_length": enc.max_length,
            "query_prompt": enc.query_prompt,
            "passage_prompt": enc.passage_prompt,
            "train_layers": self.bi.train_layers,
            **({"added_characters": "".join(enc.added_characters)} if enc.added_characters else {}),
        }

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        from medrank.utils.io import atomic_dir

        with atomic_dir(directory) as tmp:
            state = {k: v.detach().cpu().contiguous() for k, v in self.trainable.state_dict().items()}
            rows = self.bi.encoder.added_rows()
            if rows is not None:  # frozen, but not the base model's: they travel with the trained weights
                state[ADDED_ROWS] = rows.contiguous()
            save_file(state, str(tmp / WEIGHTS))
            (tmp / SPEC).write_text(json.dumps(self.spec(), ensure_ascii=False, indent=1), encoding="utf-8")

    def load_weights(self, directory: str | Path) -> None:
        self.load_state(*read_weights(directory))

    def load_state(self, state: dict[str, torch.Tensor], digest: str | None = None) -> None:
        """Load trained weights (:func:`read_weights`); ``digest`` identifies them to a KAR cache over MTCG's blocks."""
        state = dict(state)
        saved_rows, rows = state.pop(ADDED_ROWS, None), self.bi.encoder.added_rows()
        if (saved_rows is None) != (rows is None) or (rows is not None and not torch.equal(saved_rows.to(rows.dtype), rows)):
            raise ValueError(
                "these weights were trained with other characters added to the vocabulary than this encoder has: "
                "build the encoder with add_saved_characters(encoder, spec, state) first (MTCG.load does)"
            )
        self.trainable.load_state_dict(state)
        self.weights_digest = digest
        self._loaded_version = self.bi.weights_version()

    def loaded_digest(self) -> str | None:
        """:attr:`weights_digest` while the weights are still the ones loaded (None once trained further in place)."""
        if self.weights_digest is None or self.bi.weights_version() != getattr(self, "_loaded_version", None):
            return None
        return self.weights_digest

    @classmethod
    def load(cls, directory: str | Path, encoder: TransformerEncoder | None = None) -> MTCG:
        """Rebuild from a folder written by :meth:`save` (loads the base encoder unless given)."""
        directory = Path(directory)
        if not (directory / SPEC).exists():
            raise FileNotFoundError(f"{directory} has no {SPEC}: not an MTCG model folder")
        spec = json.loads((directory / SPEC).read_text(encoding="utf-8"))
        state, digest = read_weights(directory)
        if encoder is None:
            encoder = load_base_encoder(spec)
        if not encoder.added_characters:
            add_saved_characters(encoder, spec, state)
        model = cls(encoder, train_layers=spec["train_layers"])
        model.load_state(state, digest)
        return model


def add_saved_characters(encoder: TransformerEncoder, spec: dict[str, Any], state: dict[str, torch.Tensor]) -> None:
    """Give a freshly loaded base encoder the characters (and their embedding rows) a saved MTCG added.

    No-op for an MTCG trained without ``add_unknown_characters``. Call it before building the
    :class:`MTCG` (its frozen-bottom cache key reads the encoder's vocabulary).
    """
    chars = spec.get("added_characters") or ""
    if not chars:
        return
    if ADDED_ROWS not in state:
        raise ValueError(f"the MTCG spec adds {len(chars)} characters but its weights file has no {ADDED_ROWS!r}")
    encoder.add_characters(list(chars), rows=state[ADDED_ROWS])


def read_weights(directory: str | Path) -> tuple[dict[str, torch.Tensor], str]:
    """An MTCG folder's trained weights and the SHA-256 of the very bytes they were read from.

    The digest files a KAR's cached states of MTCG's trained blocks (:func:`kar_bottom_for`): read
    once, so a folder re-written between hashing and loading cannot file one model's states under
    another's digest.
    """
    import hashlib

    from safetensors.torch import load as load_bytes

    blob = (Path(directory) / WEIGHTS).read_bytes()
    return load_bytes(blob), hashlib.sha256(blob).hexdigest()


def load_base_encoder(spec: dict[str, Any]) -> TransformerEncoder:
    """The base encoder named by a saved spec (an alias such as ``e5-small`` or a local folder)."""
    from medrank.encoders import load_encoder

    enc = load_encoder(
        spec.get("encoder_name") if spec.get("encoder_name") in ("e5-small", "minilm") else spec["encoder"],
        max_length=spec.get("max_length"),
        query_prompt=spec.get("query_prompt"),
        passage_prompt=spec.get("passage_prompt"),
    )
    if not isinstance(enc, TransformerEncoder):
        raise TypeError(f"MTCG needs a TransformerEncoder, got {type(enc).__name__}")
    return enc
