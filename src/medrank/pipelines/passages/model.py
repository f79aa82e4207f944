"""CDV: the query model (entity and aspect spaces) and the document encoder.

Query model (:class:`LabelSpace`)
    Entities and aspects are embedded with the sentence encoder (MiniLM,
    unit vectors) and projected to ``dim`` (128) dimensions by a PCA fitted on
    the training sentences, entity names and aspect labels (centred, then
    re-normalised). An entity's vector is the mean of its name, its synonyms
    and, optionally, the first sentences of its description (training
    documents only); an unseen entity is embedded from its mention. An aspect's
    vector comes from its label/heading text, so synonymous headings
    ("signs" / "symptoms") land close. The query is entity ⊕ aspect.

Document encoder (:class:`CDVModel`)
    sentence features (MiniLM ⊕ GloVe mean ⊕ structural flags) → [optional
    tanh projection, CPU recipe] → BiLSTM (512 per direction) → dense tanh discourse layer (256) → one discourse
    vector per sentence → two tanh decoders into the entity and aspect spaces
    (128). Trained with the pseudo-Huber loss against each sentence's entity
    and aspect label vectors (self-supervised: the labels come from the
    document's focus and the passage's question type).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from medrank.data.medquad import normalise_entity
from medrank.encoders.base import Encoder
from medrank.pipelines.passages.artefacts import CDV_MODEL_MARKER
from medrank.utils.vectors import unit_rows

#: the CDV reader rewrote the generic "information" label to a more telling heading word
ASPECT_HEADINGS = {"information": "information description"}


def aspect_heading(aspect: str) -> str:
    return ASPECT_HEADINGS.get(aspect.strip().lower(), aspect.strip().lower())


class LabelSpace:
    """Entity and aspect embeddings in a shared ``dim``-dimensional projected encoder space.

    Args:
        encoder: the text encoder for names, headings and unseen mentions.
        mean / components: the PCA projection (``components``: ``(dim, encoder_dim)``).
        entities: ``normalised name or synonym -> vector`` (the entity knowledge base).
        aspects: ``aspect label -> vector``.
    """

    def __init__(
        self,
        encoder: Encoder | None,
        mean: np.ndarray,
        components: np.ndarray,
        entities: dict[str, np.ndarray] | None = None,
        aspects: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.encoder = encoder
        self.mean = np.asarray(mean, dtype=np.float32)
        self.components = np.asarray(components, dtype=np.float32)
        self.entities: dict[str, np.ndarray] = dict(entities or {})
        self.aspects: dict[str, np.ndarray] = dict(aspects or {})
        #: raw encoder vectors by text: names are encoded once even when spaces are copied or re-fitted
        self.raw_cache: dict[str, np.ndarray] = {}

    def raw_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit encoder vectors of ``texts`` (memoised in :attr:`raw_cache`)."""
        if self.encoder is None:
            raise RuntimeError("this LabelSpace has no encoder; it can only look up known labels")
        missing = list(dict.fromkeys(t for t in texts if t not in self.raw_cache))
        if missing:
            vecs = self.encoder.encode(missing, kind=None, batch_size=64, show_progress=False)
            self.raw_cache.update(zip(missing, np.asarray(vecs, dtype=np.float32), strict=True))
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        return np.stack([self.raw_cache[t] for t in texts])

    @property
    def dim(self) -> int:
        return int(self.components.shape[0])

    # -- construction -------------------------------------------------------------------------------
    @classmethod
    def fit(cls, encoder: Encoder, sample_vectors: np.ndarray, dim: int = 128, seed: int = 13) -> LabelSpace:
        """PCA of ``sample_vectors`` (unit encoder vectors of sentences, names and labels) to ``dim`` dimensions."""
        x = np.asarray(sample_vectors, dtype=np.float64)
        if x.ndim != 2 or len(x) < 2:
            raise ValueError(f"need a (n >= 2, d) sample to fit the projection, got {x.shape}")
        dim = min(dim, x.shape[1], len(x))
        mean = x.mean(0)
        # SVD of the centred sample; rows of vt are the principal directions.
        _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
        comps = vt[:dim]
        # Fix each component's sign so the projection does not depend on the LAPACK build.
        signs = np.sign(comps[np.arange(dim), np.abs(comps).argmax(1)])
        comps = comps * signs[:, None]
        return cls(encoder, mean.astype(np.float32), comps.astype(np.float32))

    def project(self, encoder_vectors: np.ndarray) -> np.ndarray:
        return unit_rows((np.asarray(encoder_vectors, dtype=np.float32) - self.mean) @ self.components.T)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        if self.encoder is None:
            raise RuntimeError("this LabelSpace has no encoder; it can only look up known labels")
        vecs = self.encoder.encode(list(texts), kind=None, batch_size=64, show_progress=False)
        return self.project(vecs)

    def copy(self) -> LabelSpace:
        """A copy whose entity/aspect tables can grow independently (the raw-vector memo is shared)."""
        out = LabelSpace(self.encoder, self.mean, self.components, dict(self.entities), dict(self.aspects))
        out.raw_cache = self.raw_cache
        return out

    def add_entities(
        self, entities: Sequence[tuple[str, Sequence[str]]], descriptions: Sequence[Sequence[str]] | None = None
    ) -> None:
        """Add ``(name, synonyms)`` entities; each name and synonym becomes a lookup key of the entity's vector."""
        texts: list[str] = []
        spans: list[tuple[int, int]] = []
        for i, (name, synonyms) in enumerate(entities):
            start = len(texts)
            texts.append(name)
            texts.extend(s for s in synonyms if s and s != name)
            if descriptions is not None:
                texts.extend(descriptions[i])
            spans.append((start, len(texts)))
        if not texts:
            return
        vecs = self.raw_vectors(texts)
        for (name, synonyms), (a, b) in zip(entities, spans, strict=True):
            vec = self.project(unit_rows(vecs[a:b]).mean(0, keepdims=True))[0]
            for key in (name, *synonyms):
                k = normalise_entity(key)
                if k and k not in self.entities:
                    self.entities[k] = vec

    def add_aspects(self, aspects: Sequence[str]) -> None:
        new = sorted({a.strip().lower() for a in aspects if a and a.strip().lower() not in self.aspects})
        if new:
            vecs = self.project(self.raw_vectors([aspect_heading(a) for a in new]))
            self.aspects.update(zip(new, vecs, strict=True))

    # -- lookup -------------------------------------------------------------------------------------
    def entity_vector(self, name: str) -> np.ndarray:
        """The knowledge-base vector of ``name`` (or a synonym), else the projected encoding of the mention."""
        vec = self.entities.get(normalise_entity(name))
        return vec if vec is not None else self.encode_texts([name])[0]

    def aspect_vector(self, aspect: str) -> np.ndarray:
        vec = self.aspects.get(aspect.strip().lower())
        return vec if vec is not None else self.encode_texts([aspect_heading(aspect)])[0]

    def entity_vectors(self, names: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(names), self.dim), dtype=np.float32)
        unknown = []
        for i, n in enumerate(names):
            v = self.entities.get(normalise_entity(n))
            if v is None:
                unknown.append(i)
            else:
                out[i] = v
        if unknown:
            out[unknown] = self.encode_texts([names[i] for i in unknown])
        return out

    def aspect_vectors(self, aspects: Sequence[str]) -> np.ndarray:
        return np.stack([self.aspect_vector(a) for a in aspects]) if aspects else np.zeros((0, self.dim), np.float32)

    # -- persistence --------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``label_space.safetensors`` + ``label_space.json`` into an existing directory."""
        from safetensors.numpy import save_file

        directory = Path(directory)
        ent_keys = sorted(self.entities)
        asp_keys = sorted(self.aspects)
        tensors = {
            "mean": self.mean,
            "components": self.components,
            "entities": np.stack([self.entities[k] for k in ent_keys]) if ent_keys else np.zeros((0, self.dim), np.float32),
            "aspects": np.stack([self.aspects[k] for k in asp_keys]) if asp_keys else np.zeros((0, self.dim), np.float32),
        }
        save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}, str(directory / "label_space.safetensors"))
        meta = {
            "entity_keys": ent_keys,
            "aspect_keys": asp_keys,
            "encoder": self.encoder.spec() if self.encoder is not None else None,
        }
        from medrank.pipelines.passages.features import GloVeLabelEncoder

        if isinstance(self.encoder, GloVeLabelEncoder):
            meta["idf"] = self.encoder.idf
        (directory / "label_space.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | os.PathLike[str], encoder: Encoder | None = None, load_encoder: bool = True) -> LabelSpace:
        from safetensors.numpy import load_file

        directory = Path(directory)
        meta = json.loads((directory / "label_space.json").read_text(encoding="utf-8"))
        t = load_file(str(directory / "label_space.safetensors"))
        spec = meta.get("encoder") or {}
        if spec.get("name") == "glove-6b-50d-idf":
            from medrank.pipelines.passages.features import GloVeLabelEncoder

            encoder = GloVeLabelEncoder(idf=meta.get("idf", {}), default_idf=spec.get("default_idf"))
        elif encoder is None and load_encoder and meta.get("encoder"):
            from medrank.encoders import load_encoder as _load

            encoder = _load(meta["encoder"])
        return cls(
            encoder,
            t["mean"],
            t["components"],
            dict(zip(meta["entity_keys"], t["entities"], strict=True)),
            dict(zip(meta["aspect_keys"], t["aspects"], strict=True)),
        )


class CDVModel(nn.Module):
    """BiLSTM document encoder with discourse layer and entity/aspect decoders.

    Inputs: ``features`` ``(batch, sentences, input_dim)`` and ``lengths`` ``(batch,)``.
    Returns ``(discourse, entity, aspect)``: ``(B, T, discourse_dim)``,
    ``(B, T, entity_dim)``, ``(B, T, aspect_dim)`` (padding positions are zeros
    before the decoders' bias; mask them).
    """

    def __init__(
        self,
        input_dim: int,
        lstm_hidden: int = 512,
        discourse_dim: int = 256,
        entity_dim: int = 128,
        aspect_dim: int = 128,
        dropout: float = 0.2,
        input_dropout: float = 0.1,
        input_projection: int = 0,
    ) -> None:
        super().__init__()
        self.config = {
            "input_dim": input_dim,
            "input_projection": input_projection,
            "lstm_hidden": lstm_hidden,
            "discourse_dim": discourse_dim,
            "entity_dim": entity_dim,
            "aspect_dim": aspect_dim,
            "dropout": dropout,
            "input_dropout": input_dropout,
        }
        self.input_dropout = nn.Dropout(input_dropout)
        # Optional per-sentence tanh projection before the BiLSTM: the recurrent cost grows with its input
        # width, so the CPU recipe projects the 439-d sentence features down first (0 = the paper's setup).
        self.projection = nn.Linear(input_dim, input_projection) if input_projection else None
        lstm_in = input_projection or input_dim
        self.lstm = nn.LSTM(lstm_in, lstm_hidden, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.discourse = nn.Linear(2 * lstm_hidden, discourse_dim)
        self.entity_decoder = nn.Linear(discourse_dim, entity_dim)
        self.aspect_decoder = nn.Linear(discourse_dim, aspect_dim)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if features.dim() != 3:
            raise ValueError(f"features must be (batch, sentences, dim), got {tuple(features.shape)}")
        x = self.input_dropout(features)
        if self.projection is not None:
            x = torch.tanh(self.projection(x))
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=features.shape[1])
        z = torch.tanh(self.discourse(self.dropout(h)))
        zd = self.dropout(z)
        return z, torch.tanh(self.entity_decoder(zd)), torch.tanh(self.aspect_decoder(zd))

    @torch.inference_mode()
    def encode_documents(
        self, features: np.ndarray, doc_offsets: np.ndarray, batch_docs: int = 16, max_sentences: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Decoded entity and aspect vectors of every sentence, documents given by ``doc_offsets`` into ``features``.

        Documents longer than ``max_sentences`` are encoded in consecutive
        windows of that length (None: whole documents).
        """
        was_training = self.training
        self.eval()
        n = len(features)
        ent = np.zeros((n, self.config["entity_dim"]), dtype=np.float32)
        asp = np.zeros((n, self.config["aspect_dim"]), dtype=np.float32)
        spans: list[tuple[int, int]] = []
        for i in range(len(doc_offsets) - 1):
            a, b = int(doc_offsets[i]), int(doc_offsets[i + 1])
            step = max_sentences or max(1, b - a)
            spans.extend((s, min(b, s + step)) for s in range(a, b, step))
        spans.sort(key=lambda s: s[1] - s[0])  # similar lengths together: less padding
        for start in range(0, len(spans), batch_docs):
            group = spans[start : start + batch_docs]
            longest = max(b - a for a, b in group)
            x = torch.zeros((len(group), longest, features.shape[1]))
            for j, (a, b) in enumerate(group):
                x[j, : b - a] = torch.from_numpy(features[a:b])
            lengths = torch.tensor([b - a for a, b in group])
            _, e, s = self(x, lengths)
            for j, (a, b) in enumerate(group):
                ent[a:b] = e[j, : b - a].numpy()
                asp[a:b] = s[j, : b - a].numpy()
        if was_training:
            self.train()
        return ent, asp


def save_model(model: CDVModel, directory: str | os.PathLike[str], extra: dict[str, Any] | None = None) -> None:
    """Write ``cdv.safetensors`` (weights) and ``cdv.json`` (config + ``extra``) into ``directory``, each atomically."""
    from safetensors.torch import save

    from medrank.utils.io import atomic_write_bytes, atomic_write_text

    directory = Path(directory)
    atomic_write_bytes(directory / "cdv.safetensors", save({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}))
    atomic_write_text(directory / CDV_MODEL_MARKER, json.dumps({"config": model.config, **(extra or {})}, indent=1))


def load_model(directory: str | os.PathLike[str]) -> tuple[CDVModel, dict[str, Any]]:
    from safetensors.torch import load_file

    directory = Path(directory)
    meta = json.loads((directory / CDV_MODEL_MARKER).read_text(encoding="utf-8"))
    model = CDVModel(**meta["config"])
    model.load_state_dict(load_file(str(directory / "cdv.safetensors")))
    model.eval()
    return model, meta
