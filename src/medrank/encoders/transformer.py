"""A Hugging Face transformer encoder with mean or CLS pooling.

Loads any ``transformers`` model folder or hub id, and reads
sentence-transformers folders (``modules.json``, ``1_Pooling/config.json``,
``config_sentence_transformers.json``) to pick the pooling mode, the maximum
length and query/passage prompts, so the same weights behave the same way as
under sentence-transformers.

Speed: every batch is tokenised once up front with the fast (Rust) tokenizer,
texts are sorted by *token* length (sentence-transformers sorts by character
length) so padding is minimal, and the forward pass runs under
``torch.inference_mode``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from medrank.encoders.base import Encoder, TextKind, batch_order
from medrank.utils.hf import quiet_weight_loading

Pooling = Literal["mean", "cls"]


def _read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def sentence_transformers_settings(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Pooling mode, max length and prompts declared by a sentence-transformers folder (if any)."""
    p = Path(path)
    out: dict[str, Any] = {}
    if not p.is_dir():
        return out
    pool_cfg = p / "1_Pooling" / "config.json"
    if pool_cfg.exists():
        cfg = _read_json(pool_cfg)
        if cfg.get("pooling_mode_cls_token"):
            out["pooling"] = "cls"
        elif cfg.get("pooling_mode_mean_tokens"):
            out["pooling"] = "mean"
    sb = p / "sentence_bert_config.json"
    if sb.exists():
        out["max_length"] = int(_read_json(sb).get("max_seq_length", 512))
    st = p / "config_sentence_transformers.json"
    if st.exists():
        prompts = _read_json(st).get("prompts") or {}
        if "query" in prompts:
            out["query_prompt"] = prompts["query"]
        if "passage" in prompts:
            out["passage_prompt"] = prompts["passage"]
        elif "document" in prompts:
            out["passage_prompt"] = prompts["document"]
    return out


_DIGESTS: dict[tuple[Any, ...], str] = {}
_DIGESTS_LOCK = threading.Lock()


def folder_digest(folder: str | os.PathLike[str]) -> str:
    """SHA-256 over the relative names and contents of every file under ``folder`` (hidden ones skipped).

    Memoised per process on the files' names, sizes and modification times: the 470 MB e5-small
    folder takes about 0.4 s to hash once.
    """
    root = Path(folder).resolve()
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    stats = tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    key = (str(root), stats)
    with _DIGESTS_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = hashlib.sha256()
    for p in files:
        digest.update(p.relative_to(root).as_posix().encode("utf-8") + b"\0")
        with open(p, "rb") as fh:
            while block := fh.read(1 << 22):
                digest.update(block)
        digest.update(b"\0")
    value = digest.hexdigest()
    with _DIGESTS_LOCK:
        _DIGESTS[key] = value
    return value


def cached_snapshot(repo_id: str) -> str | None:
    """The Hugging Face cache's snapshot folder of ``repo_id`` (no network), or ``None``."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, not a valid id: no snapshot either way
        return None


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """Mean over non-padding tokens, or the first ([CLS]) token."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class TransformerEncoder(Encoder):
    """Encoder over a ``transformers`` model.

    Args:
        model: a model folder, a hub id (only where a hub is reachable), or an
            already-built ``transformers.PreTrainedModel``.
        tokenizer: the tokenizer when ``model`` is a model object.
        pooling: ``"mean"`` or ``"cls"``; default from the folder's
            sentence-transformers config, else mean.
        query_prompt / passage_prompt: prepended to queries / passages.
        max_length: truncation length in tokens.
        normalize: L2-normalise the output (on by default; inner product = cosine).
        name: report name.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | Any,
        tokenizer: Any | None = None,
        *,
        pooling: Pooling | None = None,
        query_prompt: str | None = None,
        passage_prompt: str | None = None,
        max_length: int | None = None,
        normalize: bool = True,
        device: str = "cpu",
        name: str | None = None,
    ) -> None:
        from transformers import AutoModel, AutoTokenizer

        settings: dict[str, Any] = {}
        if isinstance(model, (str, os.PathLike)):
            self.model_path: str | None = str(model)
            settings = sentence_transformers_settings(model)
            self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.model_path)
            with quiet_weight_loading():
                self.model = AutoModel.from_pretrained(self.model_path)
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer together with a model object")
            self.model_path = None
            self.model, self.tokenizer = model, tokenizer
        self.pooling: Pooling = pooling or settings.get("pooling", "mean")
        if self.pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {self.pooling!r}")
        self.query_prompt = query_prompt if query_prompt is not None else settings.get("query_prompt", "")
        self.passage_prompt = (
            passage_prompt if passage_prompt is not None else settings.get("passage_prompt", "")
        )
        limit = int(getattr(self.model.config, "max_position_embeddings", 512) or 512)
        # RoBERTa-style models reserve two positions for the padding offset.
        if getattr(self.model.config, "model_type", "") in ("xlm-roberta", "roberta"):
            limit -= 2
        self.max_length = min(max_length or settings.get("max_length", 512), limit)
        self.normalize = normalize
        self.device = torch.device(device)
        self.model.to(self.device).eval()
        self.name = name or (Path(self.model_path).name if self.model_path else type(self.model).__name__)
        #: characters given their own token by :meth:`add_characters` (not part of the model folder)
        self.added_characters: tuple[str, ...] = ()
        self._added_rows: torch.Tensor | None = None

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def tokenize(self, texts: list[str], kind: TextKind | None = None) -> dict[str, torch.Tensor]:
        """Tokenise with the prompt for ``kind``, padded to the longest text (for training loops)."""
        prompt = self._prompt(kind)
        batch = self.tokenizer(
            [prompt + t for t in texts],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        return {k: v.to(self.device) for k, v in batch.items()}

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Differentiable pooled (and optionally normalised) embeddings, for training."""
        out = self.model(**features)
        emb = pool(out.last_hidden_state, features["attention_mask"], self.pooling)
        if self.normalize:
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb

    def _encode(
        self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool
    ) -> np.ndarray:
        prompt = self._prompt(kind)
        enc = self.tokenizer(
            [prompt + t for t in texts],
            truncation=True,
            max_length=self.max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        order, source = batch_order(enc)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        was_training = self.model.training
        self.model.eval()
        with torch.inference_mode():
            for start in tqdm(
                range(0, len(order), batch_size),
                desc=f"encode[{self.name}]",
                disable=not show_progress,
                unit="batch",
            ):
                idx = order[start : start + batch_size]
                longest = len(enc[idx[0]])
                ids = torch.full((len(idx), longest), pad_id, dtype=torch.long)
                mask = torch.zeros((len(idx), longest), dtype=torch.long)
                for row, i in enumerate(idx):
                    seq = enc[i]
                    ids[row, : len(seq)] = torch.as_tensor(seq)
                    mask[row, : len(seq)] = 1
                features = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
                hidden = self.model(**features).last_hidden_state
                emb = pool(hidden, features["attention_mask"], self.pooling)
                if self.normalize:
                    emb = torch.nn.functional.normalize(emb, dim=-1)
                out[idx] = emb.float().cpu().numpy()
        if was_training:
            self.model.train()
        return out[source]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save weights (safetensors), tokenizer and pooling/prompt settings atomically."""
        from medrank.utils.io import atomic_dir

        with atomic_dir(path) as tmp:
            self.model.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            (tmp / "1_Pooling").mkdir(exist_ok=True)
            (tmp / "2_Normalize").mkdir(exist_ok=True)
            with open(tmp / "1_Pooling" / "config.json", "w", encoding="utf-8") as fh:
                json.dump(
                    {
                        "word_embedding_dimension": self.dim,
                        "pooling_mode_cls_token": self.pooling == "cls",
                        "pooling_mode_mean_tokens": self.pooling == "mean",
                    },
                    fh,
                )
            with open(tmp / "sentence_bert_config.json", "w", encoding="utf-8") as fh:
                json.dump({"max_seq_length": self.max_length, "do_lower_case": False}, fh)
            with open(tmp / "config_sentence_transformers.json", "w", encoding="utf-8") as fh:
                json.dump({"prompts": {"query": self.query_prompt, "passage": self.passage_prompt}}, fh)
            with open(tmp / "modules.json", "w", encoding="utf-8") as fh:
                json.dump(
                    [
                        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
                    ],
                    fh,
                )
        self.model_path = str(path)

    def add_characters(self, chars: list[str], rows: torch.Tensor | None = None, seed: int = 0) -> torch.Tensor:
        """Give characters the tokenizer cannot spell a token and an embedding row each (see :mod:`medrank.encoders.vocab`).

        ``rows``: their embedding rows (from a saved model); ``None`` draws them
        (:func:`~medrank.encoders.vocab.sample_embedding_rows`, seeded by ``seed`` and each character).
        Returns the rows. The characters and a digest of the rows join :meth:`fingerprint` (and so
        the cache keys of models built over this encoder afterwards: add characters first).
        """
        from medrank.encoders.vocab import prefix_first_piece_only, sample_embedding_rows, unknown_characters

        chars = list(dict.fromkeys(chars))
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1 or c.isspace()]
        if bad:
            raise ValueError(f"add_characters takes single non-space characters, got {bad[:5]}")
        spelled = sorted(set(chars) - set(unknown_characters(self.tokenizer, chars)))
        if spelled:
            raise ValueError(f"the tokenizer already has tokens for {''.join(spelled[:20])!r}: only add characters it maps to its unknown token")
        emb = self.model.get_input_embeddings()
        if rows is None:
            rows = sample_embedding_rows(emb.weight, chars, seed) if chars else emb.weight.new_zeros((0, emb.weight.shape[1]))
        rows = torch.as_tensor(rows, dtype=emb.weight.dtype)
        width = emb.weight.shape[1]  # the embedding width (ALBERT/ELECTRA: not the hidden size)
        if tuple(rows.shape) != (len(chars), width):
            raise ValueError(f"rows must have shape ({len(chars)}, {width}), got {tuple(rows.shape)}")
        if not chars:
            return rows
        prefix_first_piece_only(self.tokenizer)
        self.tokenizer.add_tokens(chars)
        ids = self.tokenizer.convert_tokens_to_ids(chars)
        # a table padded past the tokenizer's vocabulary (e5: 250,037 rows for 250,002 tokens) already
        # has rows for the new ids; grow it only when it has not
        if max(ids) >= emb.weight.shape[0]:
            self.model.resize_token_embeddings(max(ids) + 1, mean_resizing=False)
            emb = self.model.get_input_embeddings()
        with torch.no_grad():
            emb.weight[torch.tensor(ids)] = rows.to(emb.weight.device)
        self.added_characters += tuple(chars)
        self._added_rows = rows.cpu() if self._added_rows is None else torch.cat([self._added_rows, rows.cpu()])
        return rows

    def added_rows(self) -> torch.Tensor | None:
        """The embedding rows of :attr:`added_characters` (in that order), or ``None``."""
        return self._added_rows

    def added_rows_digest(self) -> str | None:
        """A short digest of :meth:`added_rows` (``None`` without added characters): the vocabulary's part of cache keys."""
        if self._added_rows is None:
            return None
        return hashlib.sha256(self._added_rows.float().numpy().tobytes()).hexdigest()[:16]

    def fingerprint(self) -> dict[str, Any]:
        """:meth:`spec` with the model folder's path replaced by a digest of its files.

        A hub id is digested through its snapshot in the Hugging Face cache (where
        ``from_pretrained`` read it), so it keys alike online and offline; only when no snapshot
        can be found does the id itself stand in.
        """
        spec = self.spec()
        folder = self.model_path
        if folder is not None and not Path(folder).is_dir():
            folder = cached_snapshot(folder)
        if folder is not None and Path(folder).is_dir():
            # neither the folder's path nor the report name changes a vector
            spec["path"] = spec["name"] = None
            spec["files"] = folder_digest(folder)
        if self._added_rows is not None:
            spec["added_rows"] = self.added_rows_digest()
        return spec

    def spec(self) -> dict[str, Any]:
        extra = {"added_characters": "".join(self.added_characters)} if self.added_characters else {}
        return {
            **extra,
            "name": self.name,
            "path": self.model_path,
            "pooling": self.pooling,
            "query_prompt": self.query_prompt,
            "passage_prompt": self.passage_prompt,
            "max_length": self.max_length,
            "normalize": self.normalize,
        }
