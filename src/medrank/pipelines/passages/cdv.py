"""Training CDV (task ``cdv``) and loading a trained run for indexing and evaluation.

Self-supervised: the targets of every sentence are the entity vector of its
document's focus and the aspect vector of its passage's question type; no
query–answer pair is used. Documents are split into train/validation by
document with a fixed seed (:func:`medrank.data.medquad.split_documents`);
the validation documents are only used to pick the epoch (MAP under the
64-candidate protocol).

The recipe (keys, defaults, the CPU and the paper's setting) is :class:`~.config.CDVConfig`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.data.medquad import PassageCorpus, corpus_from_documents, load_medquad_documents, split_documents
from medrank.pipelines.passages.artefacts import CDV_MODEL_MARKER
from medrank.pipelines.passages.config import CDVConfig, start_run
from medrank.pipelines.passages.features import SentenceFeaturizer
from medrank.pipelines.passages.index import CDVIndex
from medrank.pipelines.passages.losses import PseudoHuberLoss
from medrank.pipelines.passages.model import CDVModel, LabelSpace, load_model, save_model
from medrank.pipelines.passages.text import SentenceTable, build_sentence_table
from medrank.records import Document

log = logging.getLogger(__name__)

#: every recipe key with its default (a saved run's ``train_config`` is read over these)
DEFAULTS: dict[str, Any] = CDVConfig().to_dict()


def make_featurizer(cfg: dict[str, Any]) -> SentenceFeaturizer:
    from medrank.encoders import load_encoder

    return SentenceFeaturizer(
        load_encoder(cfg["encoder"]),
        cache_dir=cfg.get("feature_cache"),
        max_tokens=cfg["max_tokens"],
        max_length=cfg["max_length"],
        use_glove=cfg["use_glove"],
        use_minilm=cfg["use_minilm"],
    )


def _descriptions(documents: Sequence[Document], n: int, max_tokens: int) -> list[list[str]]:
    """The first ``n`` sentences of each document's "information" passage (empty when ``n`` is 0)."""
    from medrank.pipelines.passages.text import split_sentences

    out = []
    for d in documents:
        info = next((p for p in d.passages if p.label == "information"), None)
        out.append([s for s, _ in split_sentences(info.text, max_tokens)[:n]] if (info is not None and n > 0) else [])
    return out


def fit_label_space(
    featurizer: SentenceFeaturizer, train_docs: Sequence[Document], table: SentenceTable, cfg: dict[str, Any]
) -> LabelSpace:
    """PCA projection fitted on entity names/synonyms, aspect headings (and a sample of training sentences
    when MiniLM sentence features are computed anyway); knowledge base of the training entities."""
    from medrank.pipelines.passages.model import aspect_heading

    names = sorted({n for d in train_docs for n in (d.meta.get("entity", d.title), *d.meta.get("synonyms", ())) if n})
    aspects = sorted({p.label for d in train_docs for p in d.passages if p.label})
    enc = featurizer.encoder
    if cfg["label_encoder"] == "glove":
        from medrank.pipelines.passages.features import GloVeLabelEncoder

        enc = GloVeLabelEncoder.fit([p.text for d in train_docs for p in d.passages], featurizer.glove)
    elif cfg["label_encoder"] != "minilm":
        raise ValueError(f"label_encoder must be minilm or glove, got {cfg['label_encoder']!r}")
    vecs = []
    if featurizer.use_minilm and cfg["label_encoder"] == "minilm":  # sentences live in the label encoder's space
        rng = np.random.default_rng(cfg["seed"])
        sample_idx = rng.choice(len(table), size=min(cfg["projection_sample"], len(table)), replace=False)
        vecs.append(featurizer.store.encode([table.texts[i] for i in np.sort(sample_idx)], show_progress=False))
    memo = LabelSpace(enc, np.zeros(enc.dim, np.float32), np.eye(1, enc.dim, dtype=np.float32))
    vecs.append(memo.raw_vectors(names))
    vecs.append(memo.raw_vectors([aspect_heading(a) for a in aspects]))
    space = LabelSpace.fit(enc, np.concatenate(vecs), dim=cfg["label_dim"], seed=cfg["seed"])
    space.raw_cache = memo.raw_cache
    space.add_entities(
        [(d.meta.get("entity", d.title), tuple(d.meta.get("synonyms", ()))) for d in train_docs],
        _descriptions(train_docs, cfg["entity_description_sentences"], cfg["max_tokens"]),
    )
    space.add_aspects(aspects)
    return space


def sentence_targets(
    documents: Sequence[Document], table: SentenceTable, space: LabelSpace
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sentence: entity target, aspect target and a mask of sentences with an aspect label."""
    ent = np.zeros((len(table), space.dim), dtype=np.float32)
    asp = np.zeros((len(table), space.dim), dtype=np.float32)
    has_aspect = np.zeros(len(table), dtype=np.float32)
    p = 0
    for i, d in enumerate(documents):
        ent[table.doc_slice(i)] = space.entity_vector(d.meta.get("entity", d.title))
        for passage in d.passages:
            a, b = int(table.passage_offsets[p]), int(table.passage_offsets[p + 1])
            if passage.label:
                asp[a:b] = space.aspect_vector(passage.label)
                has_aspect[a:b] = 1.0
            p += 1
    return ent, asp, has_aspect


class DocumentBatches:
    """Batches of ``batch_docs`` documents (windows of at most ``max_sentences`` sentences), reshuffled per epoch."""

    def __init__(
        self,
        features: np.ndarray,
        targets: tuple[np.ndarray, np.ndarray, np.ndarray],
        doc_offsets: np.ndarray,
        batch_docs: int,
        max_sentences: int,
        seed: int,
    ) -> None:
        self.features = features
        self.ent, self.asp, self.mask = targets
        self.doc_offsets = doc_offsets
        self.batch_docs = batch_docs
        self.max_sentences = max_sentences
        self.seed = seed

    def __call__(self, epoch: int) -> list[dict[str, torch.Tensor]]:
        rng = np.random.default_rng(self.seed + epoch)
        spans = []
        for i in range(len(self.doc_offsets) - 1):
            a, b = int(self.doc_offsets[i]), int(self.doc_offsets[i + 1])
            if b - a > self.max_sentences:  # a random window of a long document, as the paper's length cap
                a = int(rng.integers(a, b - self.max_sentences + 1))
                b = a + self.max_sentences
            spans.append((a, b))
        # Bucket by length (shuffled within equal lengths), then shuffle the batches: a batch's BiLSTM runs
        # as many steps as its longest document, so mixing a 396-sentence document with 20-sentence ones wastes
        # most of the work on a CPU.
        lengths = np.array([b - a for a, b in spans])
        by_length = np.lexsort((rng.random(len(spans)), lengths))
        batches = [by_length[s : s + self.batch_docs] for s in range(0, len(by_length), self.batch_docs)]
        return [self._batch([spans[j] for j in batches[i]]) for i in rng.permutation(len(batches))]

    def _batch(self, spans: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
        longest = max(b - a for a, b in spans)
        n, dim = len(spans), self.features.shape[1]
        x = np.zeros((n, longest, dim), dtype=np.float32)
        e = np.zeros((n, longest, self.ent.shape[1]), dtype=np.float32)
        s = np.zeros((n, longest, self.asp.shape[1]), dtype=np.float32)
        valid = np.zeros((n, longest), dtype=np.float32)
        amask = np.zeros((n, longest), dtype=np.float32)
        for j, (a, b) in enumerate(spans):
            x[j, : b - a] = self.features[a:b]
            e[j, : b - a] = self.ent[a:b]
            s[j, : b - a] = self.asp[a:b]
            valid[j, : b - a] = 1.0
            amask[j, : b - a] = self.mask[a:b]
        return {
            "features": torch.from_numpy(x),
            "lengths": torch.tensor([b - a for a, b in spans]),
            "entity": torch.from_numpy(e),
            "aspect": torch.from_numpy(s),
            "valid": torch.from_numpy(valid),
            "aspect_mask": torch.from_numpy(amask),
        }

    def __len__(self) -> int:
        """Batches per epoch (a document longer than ``max_sentences`` still makes one window)."""
        return -(-(len(self.doc_offsets) - 1) // self.batch_docs)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:  # pragma: no cover - convenience
        return iter(self(0))


class CDVLoss:
    """Multi-task pseudo-Huber loss: entity decoder + ``aspect_weight`` · aspect decoder."""

    def __init__(self, model: CDVModel, delta: float = 1.0, target_scale: float = 1.0, aspect_weight: float = 1.0) -> None:
        self.model = model
        self.huber = PseudoHuberLoss(delta)
        self.scale = target_scale
        self.aspect_weight = aspect_weight

    def __call__(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        _, ent, asp = self.model(batch["features"], batch["lengths"])
        loss_e = self.huber(ent, self.scale * batch["entity"], batch["valid"])
        loss_a = self.huber(asp, self.scale * batch["aspect"], batch["aspect_mask"])
        return loss_e + self.aspect_weight * loss_a


def load_split(cfg: dict[str, Any]) -> tuple[list[Document], list[Document]]:
    docs = load_medquad_documents(cfg.get("data_root"), cfg["min_passages"])
    return split_documents(docs, cfg["valid_fraction"], cfg["seed"])


def train_cdv(config: dict[str, Any], output_dir: Path, resume: bool = True) -> dict[str, Any]:
    """Train CDV on the training documents; returns a summary (best epoch, validation metrics, timings)."""
    from medrank.pipelines.passages.baselines import CDVRanker
    from medrank.pipelines.passages.protocol import build_candidates, evaluate_reranker
    from medrank.training import Trainer, recipe_settings
    from medrank.utils.io import atomic_dir, atomic_write_json

    output_dir = Path(output_dir)
    recipe = start_run(CDVConfig, config, output_dir, resume)
    cfg = recipe.to_dict()
    t_start = time.perf_counter()

    train_docs, valid_docs = load_split(cfg)
    valid = corpus_from_documents(valid_docs, "medquad:valid")
    featurizer = make_featurizer(cfg)
    train_table = build_sentence_table(train_docs, cfg["max_tokens"])
    space = fit_label_space(featurizer, train_docs, train_table, cfg)
    if cfg["label_features"]:
        featurizer.extra_encoder = space.encoder
    train_x = featurizer(train_table.texts, train_table.flags)
    valid_table = build_sentence_table(valid_docs, cfg["max_tokens"])
    featurizer(valid_table.texts, valid_table.flags)  # cache now: epoch evaluations reuse it
    t_features = time.perf_counter() - t_start

    targets = sentence_targets(train_docs, train_table, space)
    model = CDVModel(
        featurizer.dim,
        lstm_hidden=cfg["lstm_hidden"],
        discourse_dim=cfg["discourse_dim"],
        entity_dim=space.dim,
        aspect_dim=space.dim,
        dropout=cfg["dropout"],
        input_dropout=cfg["input_dropout"],
        input_projection=cfg["input_projection"],
    )
    batches = DocumentBatches(train_x, targets, train_table.doc_offsets, cfg["batch_size"], cfg["max_sentences"], cfg["seed"])
    candidates = build_candidates(valid, seed=cfg["seed"])

    def evaluate_epoch(epoch: int) -> dict[str, float]:
        index = CDVIndex.build(valid_docs, model, featurizer, space.copy(), cfg["max_tokens"], show_progress=False)
        return evaluate_reranker(CDVRanker(index), valid, candidates)["metrics"]

    trainer = Trainer(
        model,
        CDVLoss(model, cfg["huber_delta"], cfg["target_scale"], cfg["aspect_loss_weight"]),
        batches,
        output_dir,
        **recipe_settings(recipe),
        optimizer=torch.optim.Adam(model.parameters(), lr=cfg["lr"]),
        gamma=cfg["gamma"],
        steps_per_epoch=len(batches),
        evaluate=evaluate_epoch,
        select_metric="MAP",
    )
    state = trainer.fit(resume=resume)
    best = state.best_epoch or state.epoch
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(output_dir / "checkpoints" / f"epoch-{best}" / "model.safetensors")))
    model.eval()
    with atomic_dir(output_dir / "model") as tmp:
        save_model(model, tmp, {"featurizer": featurizer.spec(), "encoder": cfg["encoder"], "best_epoch": best, "train_config": cfg})
        space.save(tmp)
    best_row = next((h for h in state.history if h["epoch"] == best), {})
    summary = {
        "task": "cdv",
        "output_dir": str(output_dir),
        "model_dir": str(output_dir / "model"),
        "best_epoch": best,
        "valid": {k: best_row.get(k) for k in ("R@1", "R@10", "MAP", "MRR", "nDCG@10")},
        "train_documents": len(train_docs),
        "valid_documents": len(valid_docs),
        "train_sentences": len(train_table),
        "feature_seconds": round(t_features, 1),
        "train_seconds": round(sum(h.get("seconds", 0) for h in state.history), 1),
        "total_seconds": round(time.perf_counter() - t_start, 1),
    }
    atomic_write_json(output_dir / "summary.json", summary)
    return summary


class TrainedCDV:
    """A trained CDV run (``<run>/model``): model + label space + featurizer settings."""

    def __init__(self, model_dir: str | Path, featurizer: SentenceFeaturizer | None = None) -> None:
        model_dir = Path(model_dir)
        if (model_dir / "model" / CDV_MODEL_MARKER).exists():
            model_dir = model_dir / "model"
        if not (model_dir / CDV_MODEL_MARKER).exists():
            raise FileNotFoundError(f"{model_dir} holds no trained CDV model ({CDV_MODEL_MARKER}); train one with `medrank train`")
        self.model_dir = model_dir
        self.model, self.meta = load_model(model_dir)
        cfg = {**DEFAULTS, **self.meta.get("train_config", {})}
        self.cfg = cfg
        self.featurizer = featurizer or make_featurizer(cfg)
        self.space = LabelSpace.load(model_dir, encoder=self.featurizer.encoder if cfg["label_encoder"] == "minilm" else None)
        if cfg["label_features"]:
            self.featurizer.extra_encoder = self.space.encoder

    def build_index(self, documents: Sequence[Document], show_progress: bool = True, timings: dict[str, float] | None = None) -> CDVIndex:
        """Encode every sentence of ``documents`` into a :class:`CDVIndex` (``timings`` receives the stages' seconds)."""
        return CDVIndex.build(
            documents, self.model, self.featurizer, self.space.copy(), self.cfg["max_tokens"],
            show_progress=show_progress, timings=timings,
        )


def evaluate_corpus_cdv(run_dir: str | Path, corpus: PassageCorpus, candidates: dict[str, list[str]]) -> dict[str, Any]:
    from medrank.pipelines.passages.baselines import CDVRanker
    from medrank.pipelines.passages.protocol import evaluate_reranker

    cdv = TrainedCDV(run_dir)
    index = cdv.build_index(list(corpus.documents))
    return evaluate_reranker(CDVRanker(index), corpus, candidates)


def dump_config(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, indent=1, default=str)
