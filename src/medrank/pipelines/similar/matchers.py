"""Pair matchers: a trainable module plus everything needed to turn text pairs into its inputs.

Every matcher scores ``(question, candidate)`` text pairs with
``p(same intent)`` and saves to / loads from a folder (``matcher.json`` +
safetensors weights + JSON vocabularies; never pickles):

* :class:`NeuralMatcher` — token-id models over a word2vec-initialised
  vocabulary: ``stmt`` (the paper's model), ``stmt-self`` / ``stmt-inter``
  (ablations), ``bilstm`` and ``transformer`` (Siamese baselines), ``esim``.
* :class:`LinearMatcher` — logistic regression on ``tfidf`` or mean-word-vector
  (``w2v``) pair features.
* :class:`CrossEncoderMatcher` — a fine-tuned transformer cross-encoder
  (``e5-small`` / ``minilm`` / any local model folder), the modern reference.

The trainer sees only ``matcher.module`` (an ``nn.Module``), ``features``
(per-pair precomputation, done once), ``collate`` (a batch dict) and
``logits(batch)``.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from safetensors.numpy import load_file as load_numpy
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import load_file, save_file
from torch import nn

from medrank.pipelines.similar.artefacts import MATCHER_MARKER
from medrank.pipelines.similar.models.esim import ESIM
from medrank.pipelines.similar.models.linear import (
    LogisticRegression,
    TfidfFeaturizer,
    csr_to_torch,
    dense_pair_features,
    tfidf_pair_features,
)
from medrank.pipelines.similar.models.siamese import BiLSTMEncoder, SiameseMatcher, SiameseTransformerEncoder
from medrank.pipelines.similar.models.stmt import STMT
from medrank.pipelines.similar.text import QuestionTokenizer, TokenizerSpec, Vocabulary, mean_vectors
from medrank.utils.hf import quiet_weight_loading
from medrank.utils.io import atomic_dir, atomic_write_json

TextPair = tuple[str, str]

NEURAL_ARCHS = ("stmt", "stmt-self", "stmt-inter", "bilstm", "transformer", "esim")
LINEAR_FEATURES = ("tfidf", "w2v")
MODEL_KINDS = (*NEURAL_ARCHS, "lr-tfidf", "lr-w2v", "cross-encoder")

#: paper sizes (STMT: N = 6, h = 10, d_e = 100, d_f = 200)
DEFAULT_ARCH_ARGS: dict[str, Any] = {
    "dim": 100, "layers": 6, "heads": 10, "ff_dim": 200, "hidden": 100, "dropout": 0.1,
    "head_features": "concat", "freeze_embeddings": False, "norm_first": False, "positions": True,
}


def build_network(arch: str, vocab_size: int, embeddings: np.ndarray | None = None, **args: Any) -> nn.Module:
    """The ``nn.Module`` of a neural architecture (see :data:`NEURAL_ARCHS`)."""
    a = {**DEFAULT_ARCH_ARGS, **args}
    unknown = set(a) - set(DEFAULT_ARCH_ARGS) - {"max_len"}
    if unknown:
        raise ValueError(f"unknown architecture arguments {sorted(unknown)}; known: {sorted(DEFAULT_ARCH_ARGS)}")
    max_len = int(a.get("max_len", 512))
    if arch in ("stmt", "stmt-self", "stmt-inter"):
        return STMT(vocab_size, a["dim"], a["layers"], a["heads"], a["ff_dim"], a["hidden"], a["dropout"],
                    self_attention=arch != "stmt-inter", inter_attention=arch != "stmt-self",
                    head_features=a["head_features"], embeddings=embeddings,
                    freeze_embeddings=a["freeze_embeddings"], max_len=max_len, norm_first=a["norm_first"],
                    positions=a["positions"])
    if arch == "bilstm":
        enc = BiLSTMEncoder(vocab_size, a["dim"], a["hidden"], 1, a["dropout"], embeddings, a["freeze_embeddings"])
        return SiameseMatcher(enc, a["hidden"], a["dropout"], a["head_features"])
    if arch == "transformer":
        enc = SiameseTransformerEncoder(vocab_size, a["dim"], a["layers"], a["heads"], a["ff_dim"], a["dropout"],
                                 embeddings, a["freeze_embeddings"], max_len, a["norm_first"])
        return SiameseMatcher(enc, a["hidden"], a["dropout"], a["head_features"])
    if arch == "esim":
        return ESIM(vocab_size, a["dim"], a["hidden"], a["dropout"], embeddings, a["freeze_embeddings"])
    raise ValueError(f"unknown architecture {arch!r}; known: {NEURAL_ARCHS}")


class PairMatcher(ABC):
    """Base class: ``features`` → ``collate`` → ``logits``; ``score`` for inference; ``save``/``load``."""

    kind: ClassVar[str]
    module: nn.Module
    name: str

    @abstractmethod
    def features(self, pairs: Sequence[TextPair]) -> list[Any]:
        """Per-pair inputs computed once (token ids, sparse rows …)."""

    @abstractmethod
    def collate(self, feats: Sequence[Any]) -> dict[str, Any]:
        """A model-ready batch from per-pair features."""

    @abstractmethod
    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        """Two-class logits ``(B, 2)``: column 1 is 'same intent'."""

    @abstractmethod
    def _save(self, path: Path) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def _load(cls, path: Path, config: dict[str, Any]) -> PairMatcher: ...

    def feature_lengths(self, feats: Sequence[Any]) -> np.ndarray | None:
        """Padded length each pair would need (for length bucketing), or ``None`` if not meaningful."""
        return None

    @property
    def supports_transfer(self) -> bool:
        """Whether the module can embed a single question (``module.encode``) for pre-training."""
        return hasattr(self.module, "encode")

    def score(self, pairs: Sequence[TextPair], batch_size: int = 256) -> np.ndarray:
        """``p(same intent)`` for each ``(text1, text2)`` pair, shape ``(n,)``."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        return self.score_features(self.features(pairs), batch_size)

    def score_features(self, feats: Sequence[Any], batch_size: int = 256) -> np.ndarray:
        """Scores of precomputed features (batched by length when lengths are known), shape ``(n,)``."""
        self.module.eval()
        lengths = self.feature_lengths(feats)
        order = np.argsort(lengths, kind="stable") if lengths is not None else np.arange(len(feats))
        out = np.zeros(len(feats), dtype=np.float32)
        with torch.inference_mode():
            for i in range(0, len(feats), batch_size):
                idx = order[i : i + batch_size]
                logits = self.logits(self.collate([feats[j] for j in idx]))
                out[idx] = torch.softmax(logits.float(), dim=-1)[:, 1].numpy()
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the matcher to folder ``path`` atomically."""
        with atomic_dir(path) as tmp:
            config = self._save(tmp)
            atomic_write_json(tmp / MATCHER_MARKER, {"kind": self.kind, "name": self.name, **config})


MATCHERS: dict[str, type[PairMatcher]] = {}


def _register(cls: type[PairMatcher]) -> type[PairMatcher]:
    MATCHERS[cls.kind] = cls
    return cls


def load_matcher(path: str | os.PathLike[str]) -> PairMatcher:
    """Load a matcher folder, or the ``matcher/`` folder of a training run directory."""
    path = Path(path)
    if (path / "matcher" / MATCHER_MARKER).exists():
        path = path / "matcher"
    cfg_path = path / MATCHER_MARKER
    if not cfg_path.exists():
        raise FileNotFoundError(f"{path} is not a matcher folder (no {MATCHER_MARKER}) nor a run with matcher/")
    config = json.loads(cfg_path.read_text(encoding="utf-8"))
    kind = config.get("kind")
    if kind not in MATCHERS:
        raise ValueError(f"{cfg_path}: unknown matcher kind {kind!r}; known: {sorted(MATCHERS)}")
    return MATCHERS[kind]._load(path, config)


def _ids_tensor(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    length = max(len(s) for s in seqs)
    out = torch.zeros(len(seqs), length, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


@_register
class NeuralMatcher(PairMatcher):
    """A token-id network (:data:`NEURAL_ARCHS`) with its tokenizer and vocabulary."""

    kind = "neural"

    def __init__(self, arch: str, tokenizer: TokenizerSpec, vocab: Vocabulary, embeddings: np.ndarray | None = None,
                 max_len: int = 64, arch_args: dict[str, Any] | None = None, name: str | None = None) -> None:
        if arch not in NEURAL_ARCHS:
            raise ValueError(f"unknown architecture {arch!r}; known: {NEURAL_ARCHS}")
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.arch = arch
        self.spec = tokenizer
        self.tokenizer = QuestionTokenizer(tokenizer)
        self.vocab = vocab
        self.max_len = max_len
        self.arch_args = {**DEFAULT_ARCH_ARGS, **(arch_args or {})}
        if embeddings is not None and embeddings.shape[1] != self.arch_args["dim"]:
            raise ValueError(f"embeddings are {embeddings.shape[1]}-d but the model dim is {self.arch_args['dim']}")
        self.module = build_network(arch, len(vocab), embeddings, max_len=max_len, **self.arch_args)
        self.name = name or arch

    def token_ids(self, text: str) -> list[int]:
        return self.vocab.encode(self.tokenizer(text), self.max_len)

    def features(self, pairs: Sequence[TextPair]) -> list[tuple[list[int], list[int]]]:
        cache: dict[str, list[int]] = {}
        out = []
        for a, b in pairs:
            if a not in cache:
                cache[a] = self.token_ids(a)
            if b not in cache:
                cache[b] = self.token_ids(b)
            out.append((cache[a], cache[b]))
        return out

    def feature_lengths(self, feats: Sequence[Any]) -> np.ndarray:
        return np.array([max(len(a), len(b)) for a, b in feats], dtype=np.int64)

    def collate(self, feats: Sequence[tuple[list[int], list[int]]]) -> dict[str, Any]:
        return {"ids1": _ids_tensor([f[0] for f in feats]), "ids2": _ids_tensor([f[1] for f in feats])}

    def single_batch(self, texts: Sequence[str]) -> torch.Tensor:
        """Token ids ``(B, L)`` of single questions (for pre-training)."""
        return _ids_tensor([self.token_ids(t) for t in texts])

    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.module(batch["ids1"], batch["ids2"])

    def _save(self, path: Path) -> dict[str, Any]:
        self.vocab.save(path / "vocab.json")
        save_file({k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}, str(path / "model.safetensors"))
        return {"arch": self.arch, "tokenizer": vars(self.spec), "max_len": self.max_len, "arch_args": self.arch_args}

    @classmethod
    def _load(cls, path: Path, config: dict[str, Any]) -> NeuralMatcher:
        m = cls(config["arch"], TokenizerSpec(**config["tokenizer"]), Vocabulary.load(path / "vocab.json"),
                max_len=config["max_len"], arch_args=config["arch_args"], name=config.get("name"))
        m.module.load_state_dict(load_file(str(path / "model.safetensors")))
        m.module.eval()
        return m


@_register
class LinearMatcher(PairMatcher):
    """Logistic regression on TF-IDF (``features="tfidf"``) or mean-word-vector (``"w2v"``) pair features."""

    kind = "linear"

    def __init__(self, features: str, tokenizer: TokenizerSpec, *, tfidf: TfidfFeaturizer | None = None,
                 vocab: Vocabulary | None = None, vectors: np.ndarray | None = None, name: str | None = None) -> None:
        if features not in LINEAR_FEATURES:
            raise ValueError(f"features must be one of {LINEAR_FEATURES}, got {features!r}")
        if features == "tfidf" and tfidf is None:
            raise ValueError("features='tfidf' needs a fitted TfidfFeaturizer")
        if features == "w2v" and (vocab is None or vectors is None):
            raise ValueError("features='w2v' needs a vocabulary and its word vectors")
        self.feature_kind = features
        self.spec = tokenizer
        self.tokenizer = QuestionTokenizer(tokenizer)
        self.tfidf, self.vocab, self.vectors = tfidf, vocab, vectors
        n = 2 * tfidf.dim + 1 if features == "tfidf" else 2 * vectors.shape[1] + 1  # type: ignore[union-attr]
        self.module = LogisticRegression(n)
        self.name = name or f"lr-{features}"

    @property
    def supports_transfer(self) -> bool:
        return False

    def features(self, pairs: Sequence[TextPair]) -> list[Any]:
        toks1 = [self.tokenizer(a) for a, _ in pairs]
        toks2 = [self.tokenizer(b) for _, b in pairs]
        if self.feature_kind == "tfidf":
            x = tfidf_pair_features(self.tfidf.transform(toks1), self.tfidf.transform(toks2))  # type: ignore[union-attr]
            return [x[i] for i in range(x.shape[0])]
        x = dense_pair_features(mean_vectors(toks1, self.vocab, self.vectors), mean_vectors(toks2, self.vocab, self.vectors))  # type: ignore[arg-type]
        return list(x)

    def collate(self, feats: Sequence[Any]) -> dict[str, Any]:
        if self.feature_kind == "tfidf":
            import scipy.sparse as sp

            return {"x": csr_to_torch(sp.vstack(list(feats), format="csr"))}
        return {"x": torch.from_numpy(np.stack(feats))}

    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.module(batch["x"])

    def _save(self, path: Path) -> dict[str, Any]:
        save_file({k: v.detach().cpu().contiguous() for k, v in self.module.state_dict().items()}, str(path / "model.safetensors"))
        if self.feature_kind == "tfidf":
            atomic_write_json(path / "tfidf.json", {"terms": self.tfidf.terms, "ngram": list(self.tfidf.ngram)})  # type: ignore[union-attr]
            save_numpy({"idf": self.tfidf.idf}, str(path / "idf.safetensors"))  # type: ignore[union-attr]
        else:
            self.vocab.save(path / "vocab.json")  # type: ignore[union-attr]
            save_numpy({"vectors": np.ascontiguousarray(self.vectors)}, str(path / "vectors.safetensors"))
        return {"features": self.feature_kind, "tokenizer": vars(self.spec)}

    @classmethod
    def _load(cls, path: Path, config: dict[str, Any]) -> LinearMatcher:
        spec = TokenizerSpec(**config["tokenizer"])
        if config["features"] == "tfidf":
            t = json.loads((path / "tfidf.json").read_text(encoding="utf-8"))
            tfidf = TfidfFeaturizer(t["terms"], load_numpy(str(path / "idf.safetensors"))["idf"], tuple(t["ngram"]))
            m = cls("tfidf", spec, tfidf=tfidf, name=config.get("name"))
        else:
            m = cls("w2v", spec, vocab=Vocabulary.load(path / "vocab.json"),
                    vectors=load_numpy(str(path / "vectors.safetensors"))["vectors"], name=config.get("name"))
        m.module.load_state_dict(load_file(str(path / "model.safetensors")))
        return m


@_register
class CrossEncoderMatcher(PairMatcher):
    """A transformer reading ``[CLS] q [SEP] c [SEP]`` with a two-way classification head.

    ``model`` is an offline alias (``e5-small``, ``minilm``) or a model folder;
    weights come from :func:`medrank.encoders.resolve_model_path` (never a download).
    """

    kind = "cross-encoder"

    def __init__(self, model: str | os.PathLike[str], max_length: int = 64, name: str | None = None) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging

        from medrank.encoders import resolve_model_path

        if max_length < 8:
            raise ValueError(f"max_length must be >= 8, got {max_length}")
        path = resolve_model_path(str(model))
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the fresh classification head is expected, not a warning
        try:
            with quiet_weight_loading():
                self.module = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
        finally:
            hf_logging.set_verbosity(verbosity)
        self.hf_tokenizer = AutoTokenizer.from_pretrained(path)
        self.max_length = max_length
        self.base_model = str(model)
        self.name = name or f"cross-encoder ({model})"

    def features(self, pairs: Sequence[TextPair]) -> list[TextPair]:
        return list(pairs)

    def feature_lengths(self, feats: Sequence[TextPair]) -> np.ndarray:
        # characters are a good enough proxy of sub-word length to batch similar lengths together
        return np.array([len(a) + len(b) for a, b in feats], dtype=np.int64)

    def collate(self, feats: Sequence[TextPair]) -> dict[str, Any]:
        enc = self.hf_tokenizer([a for a, _ in feats], [b for _, b in feats], padding=True, truncation=True,
                                max_length=self.max_length, return_tensors="pt")
        return dict(enc)

    def logits(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.module(**batch).logits

    @property
    def supports_transfer(self) -> bool:
        return False

    def _save(self, path: Path) -> dict[str, Any]:
        self.module.save_pretrained(path / "model", safe_serialization=True)
        self.hf_tokenizer.save_pretrained(path / "model")
        return {"base_model": self.base_model, "max_length": self.max_length}

    @classmethod
    def _load(cls, path: Path, config: dict[str, Any]) -> CrossEncoderMatcher:
        m = cls(path / "model", max_length=config["max_length"], name=config.get("name"))
        m.base_model = config.get("base_model", m.base_model)
        m.module.eval()
        return m
