"""Tokenisation, vocabulary and CBOW word2vec embeddings for the question matchers.

Every neural matcher of the similar-question pipeline (STMT, its ablations,
the Siamese BiLSTM / Transformer baselines and ESIM) reads token ids from one
:class:`Vocabulary` whose embedding matrix is initialised from a CBOW
word2vec model (d = 100, as in the STMT paper) trained on the *training-side*
questions only.

Chinese is tokenised into characters by default (``zh_mode="char"``): the
questions are short (14 characters on average in CHIP-STS), full of disease
and drug names that jieba's general dictionary splits inconsistently. On the
CHIP-STS split, the training side has 2.2k character types and only 0.3 % of
validation tokens are unseen, against 6.5k jieba word types with 2.9 % of
validation tokens (25 % of validation word types) unseen.
``zh_mode="jieba"`` is available and was measured against characters (see
``bench/similar_design.py``). Latin letters and digits inside
Chinese text (``HbA1c``, ``2型``) become lower-cased word tokens in both modes.
English is lower-cased ``\\w+`` words plus ``?`` (question marks carry no
meaning for the match but keep very short questions non-empty).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from medrank.text import HAN, HAN_RANGES
from medrank.utils.io import atomic_write_json

log = logging.getLogger(__name__)

PAD, UNK = "[PAD]", "[UNK]"
_CJK = HAN
_LATIN = re.compile(r"[a-z0-9]+")
_EN_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|\?")
_CJK_RUN = re.compile(f"[{HAN_RANGES}]+|[A-Za-z0-9]+")


@dataclass(frozen=True)
class TokenizerSpec:
    """How question text is split into tokens (saved with every model)."""

    language: str = "zh"  # "zh" or "en"
    zh_mode: str = "char"  # "char" or "jieba"

    def __post_init__(self) -> None:
        if self.language not in ("zh", "en"):
            raise ValueError(f"language must be 'zh' or 'en', got {self.language!r}")
        if self.zh_mode not in ("char", "jieba"):
            raise ValueError(f"zh_mode must be 'char' or 'jieba', got {self.zh_mode!r}")


class QuestionTokenizer:
    """Splits a question into tokens according to a :class:`TokenizerSpec`."""

    def __init__(self, spec: TokenizerSpec | None = None, **kwargs: Any) -> None:
        self.spec = spec or TokenizerSpec(**kwargs)

    @cached_property
    def _jieba(self) -> Any:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        return jieba

    def __call__(self, text: str) -> list[str]:
        text = text.lower()
        if self.spec.language == "en":
            return _EN_TOKEN.findall(text)
        tokens: list[str] = []
        if self.spec.zh_mode == "char":
            for run in _CJK_RUN.findall(text):
                tokens.extend(run if _CJK.match(run) else [run])
            return tokens
        for word in self._jieba.lcut(text):
            word = word.strip()
            if word and (_CJK.search(word) or _LATIN.search(word)):
                tokens.append(word)
        return tokens

    def batch(self, texts: Iterable[str]) -> list[list[str]]:
        return [self(t) for t in texts]


class Vocabulary:
    """Token ↔ id map with ``[PAD]`` = 0 and ``[UNK]`` = 1."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if list(tokens[:2]) != [PAD, UNK]:
            raise ValueError("a vocabulary must start with [PAD], [UNK]")
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1) -> Vocabulary:
        """Tokens seen at least ``min_count`` times, most frequent first (ties by token)."""
        counts = Counter(t for toks in token_lists for t in toks)
        kept = sorted((t for t, c in counts.items() if c >= min_count and t not in (PAD, UNK)), key=lambda t: (-counts[t], t))
        return cls([PAD, UNK, *kept])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Sequence[str], max_len: int | None = None) -> list[int]:
        ids = [self.index.get(t, 1) for t in tokens]
        if max_len is not None:
            ids = ids[:max_len]
        return ids or [1]  # an empty question still needs one position to attend to

    def save(self, path: str | os.PathLike[str]) -> None:
        atomic_write_json(path, {"tokens": self.tokens})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        with open(path, encoding="utf-8") as fh:
            return cls(json.load(fh)["tokens"])


@dataclass(frozen=True)
class Word2VecConfig:
    """CBOW word2vec settings (gensim); d = 100 as in the STMT paper."""

    dim: int = 100
    window: int = 5
    min_count: int = 1
    epochs: int = 20
    negative: int = 5
    seed: int = 13


def _stable_hash(text: str) -> int:
    # gensim seeds each initial vector with hashfxn(word); Python's str hash is
    # randomised per process, which would make training non-reproducible.
    return zlib.crc32(text.encode("utf-8"))


def train_word2vec(token_lists: Sequence[Sequence[str]], config: Word2VecConfig | None = None) -> tuple[Vocabulary, np.ndarray]:
    """Train CBOW word2vec on tokenised questions; returns the vocabulary and its ``(V, dim)`` matrix.

    Deterministic: one worker thread, a fixed seed and a process-independent
    hash for the initial vectors. Row 0 (``[PAD]``) is zero; row 1 (``[UNK]``)
    is the mean vector (a neutral token rather than noise).
    """
    from gensim.models import Word2Vec

    config = config or Word2VecConfig()
    sentences = [list(t) for t in token_lists if t]
    if not sentences:
        raise ValueError("no non-empty token lists to train word2vec on")
    model = Word2Vec(
        sentences=sentences,
        vector_size=config.dim,
        window=config.window,
        min_count=config.min_count,
        sg=0,  # CBOW
        negative=config.negative,
        epochs=config.epochs,
        workers=1,
        seed=config.seed,
        hashfxn=_stable_hash,
    )
    words = list(model.wv.index_to_key)
    vocab = Vocabulary([PAD, UNK, *[w for w in words if w not in (PAD, UNK)]])
    matrix = np.zeros((len(vocab), config.dim), dtype=np.float32)
    for w in vocab.tokens[2:]:
        matrix[vocab.index[w]] = model.wv[w]
    matrix[1] = matrix[2:].mean(axis=0)
    return vocab, matrix


def cached_word2vec(
    token_lists: Sequence[Sequence[str]], config: Word2VecConfig, cache: Path | None = None
) -> tuple[Vocabulary, np.ndarray]:
    """:func:`train_word2vec`, cached by a hash of the corpus and the settings (safetensors + JSON)."""
    from safetensors.numpy import load_file, save_file

    from medrank.config import cache_dir
    from medrank.utils.io import atomic_dir

    digest = hashlib.sha1(json.dumps([asdict(config), [list(t) for t in token_lists]], ensure_ascii=False).encode()).hexdigest()[:16]
    folder = (cache or cache_dir() / "word2vec") / digest
    if (folder / "vectors.safetensors").exists():
        return Vocabulary.load(folder / "vocab.json"), load_file(str(folder / "vectors.safetensors"))["vectors"]
    vocab, matrix = train_word2vec(token_lists, config)
    with atomic_dir(folder) as tmp:
        vocab.save(tmp / "vocab.json")
        save_file({"vectors": matrix}, str(tmp / "vectors.safetensors"))
        atomic_write_json(tmp / "config.json", asdict(config))
    return vocab, matrix


def mean_vectors(token_lists: Sequence[Sequence[str]], vocab: Vocabulary, matrix: np.ndarray) -> np.ndarray:
    """Mean word vector of each token list (unknown tokens skipped; zeros when none is known)."""
    out = np.zeros((len(token_lists), matrix.shape[1]), dtype=np.float32)
    for i, toks in enumerate(token_lists):
        ids = [vocab.index[t] for t in toks if t in vocab.index and vocab.index[t] > 1]
        if ids:
            out[i] = matrix[ids].mean(axis=0)
    return out
