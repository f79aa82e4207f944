"""A bi-encoder whose frozen bottom is computed once per text and cached.

:class:`BiEncoder` wraps a :class:`~medrank.encoders.TransformerEncoder` (BERT-style: an
``embeddings`` module and ``encoder.layer`` blocks) and trains its top ``train_layers``
transformer blocks, keeping the embeddings and the lower blocks frozen. Because the frozen
part is a fixed function of the text, its output is computed **once per text** and cached
(``cache=True``); every training step, every mining pass and every evaluation then only runs
the top blocks, which is what makes a per-epoch "encode, mine, train" loop affordable on a CPU.
``train_layers=None`` trains every block (no cache).

The cached path is numerically the same function as the full model (the frozen blocks see
the same tokens with the same attention mask; padding never leaks into real positions), and
``tests/test_symptom_model.py`` checks that against ``TransformerEncoder.encode``.

Used by the symptom pipeline (Bi-HardNCE) and the procedure pipeline (MTCG, KAR).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from medrank.encoders.base import Encoder, TextKind
from medrank.encoders.blocks import (
    block_forward,
    encoder_blocks,
    eval_mode,
    frozen_bottom,
    model_attention_mask,
)
from medrank.encoders.transformer import TransformerEncoder, pool

log = logging.getLogger(__name__)


class _FrozenCache:
    """Outputs of the frozen bottom of the encoder, one variable-length ``(len, d)`` block per text."""

    def __init__(self, dim: int, dtype: torch.dtype) -> None:
        self.dim, self.dtype = dim, dtype
        self.row: dict[str, int] = {}
        self.blocks: list[torch.Tensor] = []

    def __len__(self) -> int:
        return len(self.row)

    def missing(self, texts: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(t for t in texts if t not in self.row))

    def add(self, text: str, block: torch.Tensor) -> None:
        self.row[text] = len(self.blocks)
        self.blocks.append(block.to(self.dtype).clone())

    def gather(self, texts: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ``(n, max_len, d)`` hidden states and ``(n, max_len)`` attention mask."""
        blocks = [self.blocks[self.row[t]] for t in texts]
        longest = max(b.shape[0] for b in blocks)
        hidden = torch.zeros((len(blocks), longest, self.dim), dtype=torch.float32)
        mask = torch.zeros((len(blocks), longest), dtype=torch.long)
        for i, b in enumerate(blocks):
            hidden[i, : b.shape[0]] = b
            mask[i, : b.shape[0]] = 1
        return hidden.to(device), mask.to(device)

    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.blocks)


def _read_cache_file(data: bytes) -> tuple[list[str], torch.Tensor, np.ndarray]:
    """Texts, concatenated states and row offsets of one cache file written by :meth:`BiEncoder.save_cache`."""
    from safetensors.torch import load as load_safetensors

    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    texts = json.loads((header.get("__metadata__") or {}).get("texts", "null"))
    if not isinstance(texts, list):
        raise ValueError("no text list in its metadata")
    tensors = load_safetensors(data)
    hidden, lengths = tensors["hidden"], tensors["lengths"]
    offsets = np.concatenate([[0], np.cumsum(lengths.numpy())])
    if len(texts) != len(offsets) - 1 or int(offsets[-1]) != hidden.shape[0]:
        raise ValueError(f"{len(texts)} texts but {len(offsets) - 1} cached blocks of {hidden.shape[0]} rows")
    return texts, hidden, offsets


class BiEncoder(nn.Module):
    """A shared query/term encoder with a frozen, cacheable bottom and a trainable top.

    Args:
        encoder: the base encoder (its ``model`` is trained in place).
        train_layers: how many of the top transformer blocks to train; ``None`` = all blocks.
        freeze_embeddings: keep the token/position embeddings frozen (always true when
            ``train_layers`` is not ``None``).
        cache: cache the frozen bottom's output per text (only with ``train_layers``).
        cache_dtype: storage type of the cache (``float32`` keeps it exact).
        weights_key: a digest of trained weights inside the frozen bottom (a KAR reading MTCG's
            trained blocks), added to the base files' digest in :meth:`cache_key`.
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        train_layers: int | None = 2,
        freeze_embeddings: bool = True,
        cache: bool = True,
        cache_dtype: torch.dtype = torch.float32,
        weights_key: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(encoder, TransformerEncoder):
            raise TypeError(f"BiEncoder needs a TransformerEncoder, got {type(encoder).__name__}")
        self.encoder = encoder
        hf = encoder.model
        for p in hf.parameters():
            p.requires_grad_(False)
        if train_layers is None:
            self.n_frozen = 0
            for name, p in hf.named_parameters():
                p.requires_grad_(not (freeze_embeddings and name.startswith("embeddings.")))
            if getattr(hf, "pooler", None) is not None:  # mean/CLS pooling never uses BERT's pooler
                for p in hf.pooler.parameters():
                    p.requires_grad_(False)
        else:
            blocks = encoder_blocks(hf)
            if not 1 <= train_layers <= len(blocks):
                raise ValueError(f"train_layers must be in 1..{len(blocks)} (or None for all), got {train_layers}")
            self.n_frozen = len(blocks) - train_layers
            for block in blocks[self.n_frozen :]:
                for p in block.parameters():
                    p.requires_grad_(True)
        self.train_layers = train_layers
        self.use_cache = bool(cache) and train_layers is not None
        self.cache_dtype = cache_dtype
        #: texts per length bucket in a training step (see :meth:`embed`)
        self.bucket_size = 96
        self._memo: dict[str, dict[str, np.ndarray]] = {}
        self._memo_version: tuple[tuple[int, int], ...] | None = None
        self.caches: dict[str, _FrozenCache] = {}
        # the base weights' digest as loaded now: a cache written later is filed under the weights
        # its states came from, even if the model folder is re-written in between
        fingerprint = encoder.fingerprint()
        self._weights_key = fingerprint.get("files") or str(encoder.model_path or encoder.name)
        if fingerprint.get("added_rows"):  # characters given tokens of their own (TransformerEncoder.add_characters)
            self._weights_key = f"{self._weights_key}+chars-{fingerprint['added_rows']}"
        self._vocabulary = encoder.added_characters
        #: digest of trained weights inside the frozen bottom (None: the base model's blocks only)
        self.trained_key = weights_key
        if weights_key is not None:  # the bottom holds trained blocks: their digest joins the base's
            self._weights_key = f"{self._weights_key}+{weights_key}"
        # the trainable parts only: what the trainer optimises and checkpoints (a few MB, not the
        # 470 MB of e5-small's embedding table)
        parts: dict[str, nn.Module] = {}
        if train_layers is None:
            parts["model"] = hf
        else:
            parts["top_layers"] = nn.ModuleList(encoder_blocks(hf)[self.n_frozen :])
        self.trainable = nn.ModuleDict(parts)
        #: what computes the frozen bottom: ``"torch"``, or an ONNX Runtime export (:meth:`set_bottom_backend`)
        self.bottom_backend = "torch"
        self._bottom_runner: Any = None

    def set_bottom_backend(self, backend: str, threads: int | None = None, cache_root: str | os.PathLike[str] | None = None) -> None:
        """Compute the frozen bottom with ``backend``: ``"torch"``, ``"onnx"`` (fp32) or ``"onnx-int8"`` (inference only).

        The bottom never trains, so its states may come from an exported copy of its blocks
        (:class:`~medrank.encoders.onnx.OnnxFrozenBottom`); the top blocks stay torch. States of
        another backend are other numbers: the backend joins :meth:`cache_key`, so a cache written
        by one is never read by another.
        """
        from medrank.encoders.onnx import OnnxBackendError, OnnxFrozenBottom, check_backend

        check_backend(backend)
        if backend not in ("torch", "onnx", "onnx-int8"):
            raise OnnxBackendError(f"a frozen bottom runs on torch, onnx or onnx-int8, got {backend!r}")
        if backend != "torch" and self.n_frozen == 0:
            raise OnnxBackendError("this model trains every block: it has no frozen bottom to export")
        if backend != self.bottom_backend:  # states and vectors of the old backend
            self.caches, self._memo, self._memo_version = {}, {}, None
        self._bottom_runner = None if backend == "torch" else OnnxFrozenBottom(
            self.encoder, self.n_frozen, quantized=backend == "onnx-int8", threads=threads, cache_root=cache_root
        )
        self.bottom_backend = backend

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    def _cache_for(self, kind: TextKind | None) -> _FrozenCache:
        key = kind or "none"
        if key not in self.caches:
            self.caches[key] = _FrozenCache(self.encoder.dim, self.cache_dtype)
        return self.caches[key]

    def _check_vocabulary(self) -> None:
        if self.encoder.added_characters != self._vocabulary:
            raise RuntimeError(
                "characters were added to the encoder's vocabulary after this model was built over it: "
                "its cached states would mix two tokenisations; add characters first, then build the model"
            )

    def frozen_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Hidden states after the frozen blocks for tokenised ``features`` (nothing cached, no gradient), by
        :attr:`bottom_backend`; always float32: they are cached on disk
        and shared by every later run, so a training run's ``autocast: bf16`` must not reach them."""
        self._check_vocabulary()
        if self._bottom_runner is not None:
            return self._bottom_runner(features).to(self.device)
        device = features["input_ids"].device.type
        with torch.autocast(device_type=device, enabled=False):
            return frozen_bottom(self.encoder.model, self.n_frozen, features)

    def _top(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hf = self.encoder.model
        mask = model_attention_mask(hf, hidden, attention_mask)
        for block in encoder_blocks(hf)[self.n_frozen :]:
            hidden = block_forward(block, hidden, mask)
        emb = pool(hidden, attention_mask, self.encoder.pooling)
        return nn.functional.normalize(emb, dim=-1) if self.encoder.normalize else emb

    def fill_cache(self, texts: Sequence[str], kind: TextKind | None, batch_size: int = 256, show_progress: bool = False) -> None:
        """Run the frozen bottom once for every text not cached yet (sorted by length, batched)."""
        if not self.use_cache:
            return
        self._check_vocabulary()
        cache = self._cache_for(kind)
        todo = cache.missing(texts)
        if not todo:
            return
        prompt = self.encoder._prompt(kind)
        enc = self.encoder.tokenizer(
            [prompt + t for t in todo], truncation=True, max_length=self.encoder.max_length, padding=False
        )
        ids_all = enc["input_ids"]
        order = np.argsort([-len(x) for x in ids_all], kind="stable")
        pad = self.encoder.tokenizer.pad_token_id or 0
        for start in tqdm(range(0, len(todo), batch_size), desc=f"cache[{kind}]", disable=not show_progress):
            idx = order[start : start + batch_size]
            longest = len(ids_all[idx[0]])
            ids = torch.full((len(idx), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), longest), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, : len(ids_all[i])] = torch.as_tensor(ids_all[i])
                mask[r, : len(ids_all[i])] = 1
            hidden = self.frozen_states({"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}).cpu()
            for r, i in enumerate(idx):
                cache.add(todo[i], hidden[r, : len(ids_all[i])])

    def cache_size(self) -> int:
        """Texts in the frozen-layer cache (all kinds)."""
        return sum(len(c) for c in self.caches.values())

    def cache_bytes(self) -> int:
        return sum(c.nbytes() for c in self.caches.values())

    def cache_key(self) -> str:
        """Identifies what the frozen bottom computes: base weights, frozen depth, length, prompts.

        The weights are identified by their files' digest (:meth:`TransformerEncoder.fingerprint`), not
        the folder's path: e5-small re-converted into the same folder must not reuse stale states,
        and a moved folder keeps its cache.
        """
        import hashlib
        import json

        enc = self.encoder
        self._check_vocabulary()
        spec = {
            "model": self._weights_key,
            "n_frozen": self.n_frozen,
            "max_length": enc.max_length,
            "query_prompt": enc.query_prompt,
            "passage_prompt": enc.passage_prompt,
            "dtype": str(self.cache_dtype),
            "version": 3,
        }
        if self.bottom_backend != "torch":
            spec["backend"] = self.bottom_backend
            # the export's own key names its recipe (int8: which products are quantised, the calibration)
            spec["export"] = self._bottom_runner.folder.name if self._bottom_runner is not None else None
        return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def save_cache(self, directory: str | Path, kinds: Sequence[str] | None = None) -> None:
        """Write the frozen-bottom cache so later runs skip the bottom (``kinds``: only these text kinds).

        One safetensors file per kind holds the states, their lengths and (in its metadata) the
        texts, so a reader never pairs one version's texts with another's states; the key folder is
        swapped in whole (:func:`~medrank.utils.io.atomic_dir`).
        """
        if not self.use_cache:
            return
        from safetensors.torch import save_file

        from medrank.utils.io import atomic_dir

        target = Path(directory) / self.cache_key()
        with atomic_dir(target) as tmp:  # creates ``directory`` too
            if kinds is not None and target.is_dir():
                # only ``kinds`` are re-written: the folder's other kinds (e.g. training mentions' states)
                # are carried over as hard links, not dropped by the swap
                for old in target.glob("*.safetensors"):
                    if old.stem in kinds:
                        continue
                    try:
                        os.link(old, tmp / old.name)
                    except FileNotFoundError:
                        continue  # replaced by another writer meanwhile: a cache miss
                    except OSError:
                        shutil.copy2(old, tmp / old.name)
            for kind, cache in self.caches.items():
                if kinds is not None and kind not in kinds:
                    continue
                texts = sorted(cache.row, key=cache.row.__getitem__)
                blocks = [cache.blocks[cache.row[t]] for t in texts]
                lengths = torch.tensor([b.shape[0] for b in blocks], dtype=torch.long)
                hidden = torch.cat(blocks) if blocks else torch.zeros((0, self.dim), dtype=self.cache_dtype)
                save_file({"hidden": hidden.contiguous(), "lengths": lengths}, str(tmp / f"{kind}.safetensors"),
                          metadata={"texts": json.dumps(texts, ensure_ascii=False)})

    def load_cache(self, directory: str | Path) -> int:
        """Load a cache written by :meth:`save_cache` for the same base model and frozen depth; returns texts loaded.

        A kind whose file vanished while the folder was being replaced by another process is
        skipped (a cache miss, recomputed on demand).
        """
        if not self.use_cache:
            return 0

        folder = Path(directory) / self.cache_key()
        if not folder.is_dir():
            return 0
        from medrank.cache_admin import mark_used

        mark_used(folder)  # `medrank cache prune` drops entries no run has read for a while
        n = 0
        for path in sorted(folder.glob("*.safetensors")):
            kind = path.stem
            try:
                # read once: safetensors' lazy loaders re-open the file by path for each tensor, and a
                # concurrent writer may have swapped the folder in between
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                texts, hidden, offsets = _read_cache_file(data)
            except Exception as exc:  # a damaged cache file is a cache miss (recomputed, and re-written by warm-ups)
                log.warning("ignoring the frozen-bottom cache file %s (%s)", path, exc)
                continue
            cache = self._cache_for(None if kind == "none" else kind)  # type: ignore[arg-type]
            for i, t in enumerate(texts):
                if t not in cache.row:
                    cache.row[t] = len(cache.blocks)
                    cache.blocks.append(hidden[offsets[i] : offsets[i + 1]])
                    n += 1
        return n

    # -- encoding ------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], kind: TextKind | None) -> torch.Tensor:
        """Differentiable ``(n, d)`` embeddings (training): cached bottom + top blocks, or the full model.

        A step mixes 5- and 30-token texts, so texts are sorted by length and run in buckets
        of ``bucket_size``, each padded only to its own longest text (sentence-transformers pads a
        whole column to its longest text).
        """
        texts = list(texts)
        if not texts:
            return torch.zeros((0, self.dim), device=self.device)
        if self.use_cache:
            self.fill_cache(texts, kind)
            cache = self._cache_for(kind)
            lengths = [cache.blocks[cache.row[t]].shape[0] for t in texts]

            def run(idx: np.ndarray) -> torch.Tensor:
                hidden, mask = cache.gather([texts[i] for i in idx], self.device)
                return self._top(hidden, mask)

        else:
            prompt = self.encoder._prompt(kind)
            ids = self.encoder.tokenizer(
                [prompt + t for t in texts], truncation=True, max_length=self.encoder.max_length, padding=False
            )["input_ids"]
            lengths = [len(x) for x in ids]
            pad = self.encoder.tokenizer.pad_token_id or 0

            def run(idx: np.ndarray) -> torch.Tensor:
                longest = max(lengths[i] for i in idx)
                input_ids = torch.full((len(idx), longest), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), longest), dtype=torch.long)
                for r, i in enumerate(idx):
                    input_ids[r, : lengths[i]] = torch.as_tensor(ids[i])
                    mask[r, : lengths[i]] = 1
                features = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
                if self.train_layers is None:
                    return self.encoder.forward(features)
                return self._top(self.frozen_states(features), features["attention_mask"])

        if len(texts) <= self.bucket_size:
            return run(np.arange(len(texts)))
        order = np.argsort(-np.asarray(lengths), kind="stable")
        parts, index = [], []
        for start in range(0, len(texts), self.bucket_size):
            idx = order[start : start + self.bucket_size]
            parts.append(run(idx))
            index.append(torch.as_tensor(idx))
        out = torch.cat(parts)
        inverse = torch.empty(len(texts), dtype=torch.long)
        inverse[torch.cat(index)] = torch.arange(len(texts))
        return out[inverse.to(out.device)]

    @torch.no_grad()
    def encode(
        self, texts: Sequence[str], kind: TextKind | None, batch_size: int = 256, show_progress: bool | None = None
    ) -> np.ndarray:
        """Inference embeddings ``(n, d)`` float32 (eval mode, batches sorted by length)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if show_progress is None:
            show_progress = len(texts) > 5000
        # Embeddings of the current weights are memoised: the evaluation at the end of an epoch
        # and the mining at the start of the next one encode the same terms with the same model.
        # The key is every trainable tensor's in-place version counter, which an optimizer step
        # or a load_state_dict bumps, so a stale vector can never be returned.
        version = self.weights_version()
        memo = self._memo.setdefault(kind or "none", {})
        if self._memo_version != version:
            self._memo = {kind or "none": {}}
            memo = self._memo[kind or "none"]
            self._memo_version = version
        todo = list(dict.fromkeys(t for t in texts if t not in memo))
        if todo:
            with eval_mode(self.encoder.model):
                if self.use_cache:
                    vectors = self._encode_cached(todo, kind, batch_size, show_progress)
                else:
                    vectors = self.encoder.encode(todo, kind=kind, batch_size=batch_size, show_progress=show_progress)
            memo.update(zip(todo, vectors, strict=True))
        return np.stack([memo[t] for t in texts]).astype(np.float32, copy=False)

    def weights_version(self) -> tuple[tuple[int, int], ...]:
        """Changes whenever any trainable weight is modified in place (optimizer step, load_state_dict)."""
        return tuple((p.data_ptr(), p._version) for p in self.trainable.parameters())

    def _encode_cached(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        self.fill_cache(texts, kind, show_progress=show_progress)
        cache = self._cache_for(kind)
        lengths = np.array([cache.blocks[cache.row[t]].shape[0] for t in texts])
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in tqdm(range(0, len(texts), batch_size), desc="encode[top]", disable=not show_progress):
            idx = order[start : start + batch_size]
            hidden, mask = cache.gather([texts[i] for i in idx], self.device)
            out[idx] = self._top(hidden, mask).float().cpu().numpy()
        return out

    def as_encoder(self, name: str | None = None) -> Encoder:
        """An :class:`~medrank.encoders.Encoder` view (for indexes and ``evaluate_retriever``)."""
        return BiEncoderView(self, name=name)


class BiEncoderView(Encoder):
    """:class:`Encoder` interface over a :class:`BiEncoder` (uses its cache when it has one)."""

    def __init__(self, bi: BiEncoder, name: str | None = None) -> None:
        self.bi = bi
        self.name = name or f"{bi.encoder.name}-trained"

    @property
    def dim(self) -> int:
        return self.bi.dim

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        return self.bi.encode(texts, kind, batch_size=max(batch_size, 256), show_progress=show_progress)

    def spec(self) -> dict[str, Any]:
        return self.bi.encoder.spec()
