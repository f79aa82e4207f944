"""The training recipes of the passage pipeline, read from a JSON/YAML config; unknown keys are an error.

One dataclass per recipe, each on :class:`PassageRunArgs` (the settings they share) and through it on
:class:`~medrank.training.TrainingArgs`:

* :class:`CDVConfig` — task ``cdv``; the defaults are the CPU recipe, ``configs/passages/cdv-full.json``
  has the paper's;
* :class:`NeuralRerankerConfig` — tasks ``passage-dssm`` and ``passage-knrm`` (the task sets ``model``);
* :class:`PassageCrossEncoderConfig` — task ``passage-cross-encoder``.

``batch_size`` counts documents for CDV and query groups (one passage list per query) for the re-rankers.
Configs written before it was named so say ``batch_docs`` (CDV) or ``queries_per_batch`` (re-rankers);
each recipe's ``RENAMED`` reads them as ``batch_size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from medrank.training.args import TrainingArgs

SCHEDULERS = ("linear", "cosine", "constant", "exponential")

C = TypeVar("C", bound="PassageRunArgs")


@dataclass
class PassageRunArgs(TrainingArgs):
    """What every passage recipe has: the document split, the step cap and where the data is."""

    seed: int = 13
    valid_fraction: float = 0.2  # fraction of the MedQuAD documents held out for validation (split by document)
    min_passages: int = 2  # documents with fewer answered passages are skipped
    max_steps_per_epoch: int | None = None  # a cap for the CPU recipes; None: every batch
    data_root: str | None = None  # None: the global data root (``--data``, ``MEDRANK_DATA``)
    description: str | None = None  # what the recipe is, for the reader; saved with the run, never read

    #: how error messages name this recipe's config
    WHAT: ClassVar[str] = "passage config"
    #: old key → its name now (configs written before the rename)
    RENAMED: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_dict(cls: type[C], raw: dict[str, Any]) -> C:
        """The recipe of ``raw`` (a config without ``task``), checked: unknown keys, value types, ranges."""
        raw = dict(raw)
        for old, new in cls.RENAMED.items():
            if old in raw:
                if new in raw:
                    raise ValueError(f"{cls.WHAT}: give {new} only ({old} is its old name)")
                raw[new] = raw.pop(old)
        return cls.checked(raw, cls.WHAT)

    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ValueError(f"{self.WHAT}: {msg}")

        need(self.epochs >= 1 and self.batch_size >= 1, "epochs and batch_size must be >= 1")
        need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        need(self.scheduler in SCHEDULERS, f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}")
        need(0 <= self.warmup_ratio <= 1, f"warmup_ratio must be in [0, 1], got {self.warmup_ratio}")


@dataclass
class CDVConfig(PassageRunArgs):
    """CDV's recipe (Arnold et al., WWW 2020): BiLSTM over sentence features, pseudo-Huber loss, Adam.

    The optimiser is Adam without weight decay; the learning rate decays by ``gamma`` after every epoch
    (``scheduler`` "exponential", the paper's); ``warmup_ratio`` applies to "linear" and "cosine" only.
    """

    epochs: int = 15
    lr: float = 1e-3
    scheduler: str = "exponential"
    batch_size: int = 16  # documents per batch (each cut to a window of max_sentences sentences)
    encoder: str = "minilm"
    feature_cache: str | None = None  # None: $MEDRANK_CACHE/passages/sentence-features
    use_glove: bool = True
    use_minilm: bool = True
    label_encoder: str = "minilm"  # or "glove": IDF-weighted GloVe averages of names and headings
    label_features: bool = False  # true: append each sentence's encoding by the label encoder to its features
    max_tokens: int = 96
    max_length: int = 128
    label_dim: int = 128
    lstm_hidden: int = 512
    discourse_dim: int = 256
    dropout: float = 0.2
    input_dropout: float = 0.1
    input_projection: int = 0  # > 0: tanh projection of the sentence features before the BiLSTM
    gamma: float = 0.975  # learning-rate factor per epoch ("exponential")
    max_sentences: int = 396
    huber_delta: float = 1.0
    target_scale: float = 1.0
    aspect_loss_weight: float = 1.0
    entity_description_sentences: int = 0
    projection_sample: int = 30000  # training sentences in the label space's PCA fit (MiniLM label encoder)

    WHAT: ClassVar[str] = "cdv config"
    RENAMED: ClassVar[dict[str, str]] = {"batch_docs": "batch_size"}

    def validate(self) -> None:
        super().validate()
        if self.label_encoder not in ("minilm", "glove"):
            raise ValueError(f"{self.WHAT}: label_encoder must be minilm or glove, got {self.label_encoder!r}")


@dataclass
class NeuralRerankerConfig(PassageRunArgs):
    """DSSM's or KNRM's recipe: listwise softmax over (entity; aspect) → passage groups, AdamW without
    weight decay at a constant learning rate (``scheduler`` "constant"; ``warmup_ratio`` applies to
    "linear" and "cosine" only)."""

    epochs: int = 4
    lr: float = 1e-3
    scheduler: str = "constant"
    batch_size: int = 32  # query groups per batch
    model: str = "dssm"  # "dssm" or "knrm" (set by the task)
    group_size: int = 8  # passages per query: one positive and group_size - 1 negatives
    max_passage_words: int = 200
    buckets: int = 30000  # DSSM's letter-trigram hash size

    WHAT: ClassVar[str] = "neural re-ranker config"
    RENAMED: ClassVar[dict[str, str]] = {"queries_per_batch": "batch_size"}

    def validate(self) -> None:
        if self.model not in ("dssm", "knrm"):
            raise ValueError(f"model must be dssm or knrm, got {self.model!r}")
        super().validate()


@dataclass
class PassageCrossEncoderConfig(PassageRunArgs):
    """The MiniLM cross-encoder's recipe: listwise softmax over (entity; aspect) → passage groups, AdamW
    (weight decay 0.01) with a linear warm-up and decay."""

    epochs: int = 1
    lr: float = 3e-5
    scheduler: str = "linear"
    batch_size: int = 4  # query groups per batch
    base: str = "minilm"
    max_length: int = 128
    group_size: int = 8  # passages per query: one positive and group_size - 1 negatives

    WHAT: ClassVar[str] = "passage-cross-encoder config"
    RENAMED: ClassVar[dict[str, str]] = {"queries_per_batch": "batch_size"}


def start_run(cls: type[C], config: dict[str, Any], output_dir: Path, resume: bool) -> C:
    """The shared start of the passage trainers: ``config`` (``task`` dropped) read into ``cls``, threads and
    seed set, the run folder's config checked against its checkpoints (:func:`~medrank.training.check_run_config`;
    the run saves :meth:`~PassageRunArgs.to_dict` as ``config.json``, every key with its value)."""
    from medrank.config import seed_everything, set_run_threads
    from medrank.training import check_run_config

    recipe = cls.from_dict({k: v for k, v in config.items() if k != "task"})
    set_run_threads(recipe.threads)
    seed_everything(recipe.seed)
    check_run_config(output_dir, recipe.to_dict(), resume)
    return recipe
