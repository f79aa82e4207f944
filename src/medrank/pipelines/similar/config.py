"""The settings of one similar-question experiment (task ``similar``), read from a YAML/JSON config.

:class:`SimilarConfig` is the whole experiment on the shared :class:`~medrank.training.TrainingArgs` base.
A config file keeps the pair training's settings under ``train:`` (the matchers are also pre-trained,
under ``transfer:``, with settings of the same names), so the file and the dataclass differ in one way:

* the keys of the ``train:`` section (:data:`TRAIN_SECTION`: ``epochs``, ``batch_size``, ``lr``,
  ``scheduler``, ``warmup_ratio``, ``weight_decay``, ``gamma``, ``patience``, …) are fields of
  :class:`SimilarConfig` itself;
* ``seed``, ``threads`` and ``output_dir`` are top-level keys, as in the file;
* every other section (``split``, ``tokenizer``, ``word2vec``, ``transfer``, ``cross_encoder``,
  ``tfidf``) is a nested dataclass; ``arch`` is a free mapping checked by the model it builds.

:meth:`SimilarConfig.to_dict` writes the file's shape back (``train:`` nested), which is what the
experiment reads and saves as ``config.json``; :func:`resolve_config` reads such a dict again.
Unknown keys, at the top or inside a section, are an error.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from medrank.training.args import TrainingArgs

#: the keys a config file writes under ``train:`` (fields of :class:`SimilarConfig`)
TRAIN_SECTION = ("epochs", "batch_size", "lr", "weight_decay", "scheduler", "gamma", "warmup_ratio", "patience",
                 "time_budget_minutes", "max_steps_per_epoch", "threshold", "max_grad_norm",
                 "eval_reserve_minutes", "eval_untrained")
#: the pair datasets of each language: the defaults of ``word2vec.extra_datasets`` and ``transfer.datasets``
SAME_LANGUAGE = {"zh": ["chip-sts", "kuake-qqr"], "en": ["medical-question-pairs", "rqe"]}


@dataclass
class SplitSettings:
    """The validation side carved from the visible file (no question text on both sides)."""

    valid_fraction: float = 0.2
    seed: int = 13


@dataclass
class TokenizerSettings:
    zh_mode: str = "char"  # Chinese characters, or "jieba" words


@dataclass
class Word2VecSettings:
    """The word2vec (CBOW) vectors that initialise every model's embeddings."""

    dim: int = 100
    window: int = 5
    epochs: int = 20
    min_count: int = 1
    negative: int = 5
    extra_datasets: list[str] | None = None  # None: the other pair datasets of the language


@dataclass
class TransferSettings:
    """Pre-training the encoder as a classifier over question groups (AM-softmax) before the pair training."""

    enabled: bool = False
    loss: str = "am-softmax"
    margin: float = 0.35
    scale: float = 20.0
    datasets: list[str] | None = None  # None: the other pair datasets of the language
    epochs: int = 10
    batch_size: int = 64
    lr: float = 0.001
    gamma: float = 0.9
    time_budget_minutes: float = 30


@dataclass
class CrossEncoderSettings:
    model: str | None = None  # None: e5-small for Chinese, minilm for English
    max_length: int = 64


@dataclass
class TfidfSettings:
    ngram: list[int] | None = None  # None: [1, 2]


#: the nested sections and their dataclasses
SECTIONS: dict[str, type] = {"split": SplitSettings, "tokenizer": TokenizerSettings, "word2vec": Word2VecSettings,
                             "transfer": TransferSettings, "cross_encoder": CrossEncoderSettings, "tfidf": TfidfSettings}


@dataclass
class SimilarConfig(TrainingArgs):
    """One experiment: data split → word2vec → matcher → (transfer) → pair training.

    The pair training (the ``train:`` section of a file) is AdamW with ``weight_decay``, gradient norm clipped at
    ``max_grad_norm``, the ``scheduler`` ("exponential" multiplies the rate by ``gamma`` each epoch; "linear"
    and "cosine" warm up over ``warmup_ratio`` of the steps), early stopping after ``patience`` epochs without a
    better validation F1 (0: never), and a wall-clock ``time_budget_minutes`` covering the whole experiment.
    """

    task: str = "similar"
    dataset: str = "chip-sts"  # chip-sts | kuake-qqr | medical-question-pairs | rqe
    model: str = "stmt"  # stmt | stmt-self | stmt-inter | bilstm | transformer | esim | lr-tfidf | lr-w2v | cross-encoder
    name: str | None = None  # the name in reports; None: from the model and transfer settings
    seed: int = 13
    # None: the threads the process already has (`medrank --threads N`, else every core); a number is
    # applied unless the command line gave one
    threads: int | None = None
    data: str | None = None  # the data root; None: the global one
    split: SplitSettings = field(default_factory=SplitSettings)
    tokenizer: TokenizerSettings = field(default_factory=TokenizerSettings)
    max_len: int = 64  # tokens per question
    word2vec: Word2VecSettings = field(default_factory=Word2VecSettings)
    arch: dict[str, Any] = field(default_factory=dict)  # the model's architecture arguments
    transfer: TransferSettings = field(default_factory=TransferSettings)
    cross_encoder: CrossEncoderSettings = field(default_factory=CrossEncoderSettings)
    tfidf: TfidfSettings = field(default_factory=TfidfSettings)
    extra_train_pairs: str | None = None  # a JSON-lines pair file (e.g. from `medrank make-pairs`) added to training
    use_labelled_train: bool = True  # false: train on extra_train_pairs only (validation stays the labelled split)
    # -- the train: section ----------------------------------------------------------------------------------
    epochs: int = 20
    batch_size: int = 64
    lr: float = 0.001
    weight_decay: float = 0.0
    scheduler: str = "exponential"
    gamma: float = 0.9
    warmup_ratio: float = 0.1
    patience: int = 4
    time_budget_minutes: float | None = 60  # None: no budget
    max_steps_per_epoch: int | None = None
    threshold: float = 0.5  # a pair is "similar" when its probability reaches it (precision, recall, F1)
    max_grad_norm: float | None = 5.0
    eval_reserve_minutes: float = 0  # budget kept for the last validation pass
    eval_untrained: bool = True  # false: skip the epoch-0 validation (minutes for a cross-encoder on CPU)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> SimilarConfig:
        """The experiment of ``config`` (a file's shape, ``train:`` nested), checked: keys, value types, choices."""
        from medrank.config import check_dataclass_config

        top = {f.name for f in fields(cls)} - set(TRAIN_SECTION)
        unknown = set(config) - top - {"train"}
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; known: {sorted(top | {'train'})}")
        flat: dict[str, Any] = {}
        for key, value in config.items():
            if key in SECTIONS or key == "train":
                section = SECTIONS.get(key)
                names = [f.name for f in fields(section)] if section else list(TRAIN_SECTION)
                if not isinstance(value, dict):
                    raise ValueError(f"config key {key!r} must be a mapping, got {type(value).__name__}")
                bad = set(value) - set(names)
                if bad:
                    raise ValueError(f"unknown keys {sorted(bad)} under {key!r}; known: {sorted(names)}")
                check_dataclass_config(section or cls, value, f"similar config.{key}")
                if section:
                    flat[key] = section(**copy.deepcopy(value))
                else:
                    flat.update(value)
            else:
                check_dataclass_config(cls, {key: value}, "similar config")
                flat[key] = copy.deepcopy(value)
        out = cls(**flat)
        out.validate()
        return out

    def validate(self) -> None:
        from medrank.data.questions import PAIR_DATASETS
        from medrank.pipelines.similar.matchers import MODEL_KINDS, NEURAL_ARCHS

        if self.dataset not in PAIR_DATASETS:
            raise ValueError(f"dataset must be one of {sorted(PAIR_DATASETS)}, got {self.dataset!r}")
        if self.model not in MODEL_KINDS:
            raise ValueError(f"model must be one of {MODEL_KINDS}, got {self.model!r}")
        if not self.use_labelled_train and not self.extra_train_pairs:
            raise ValueError("use_labelled_train: false needs extra_train_pairs")
        if self.transfer.enabled and self.model not in NEURAL_ARCHS:
            raise ValueError(f"transfer pre-training needs a neural encoder ({NEURAL_ARCHS}), not {self.model!r}")

    def resolved(self) -> SimilarConfig:
        """A copy with the language's defaults in place of the ``None`` settings that depend on the dataset."""
        from medrank.data.questions import dataset_language

        language = dataset_language(self.dataset)
        others = [d for d in SAME_LANGUAGE[language] if d != self.dataset]
        out = copy.deepcopy(self)
        if out.word2vec.extra_datasets is None:
            out.word2vec = replace(out.word2vec, extra_datasets=list(others))
        if out.transfer.datasets is None:
            out.transfer = replace(out.transfer, datasets=list(others))
        if out.cross_encoder.model is None:
            out.cross_encoder = replace(out.cross_encoder, model="e5-small" if language == "zh" else "minilm")
        if out.tfidf.ngram is None:
            out.tfidf = replace(out.tfidf, ngram=[1, 2])
        return out

    def to_dict(self) -> dict[str, Any]:
        """The file's shape: sections as mappings, the :data:`TRAIN_SECTION` fields under ``train``."""
        flat = asdict(self)
        out = {k: v for k, v in flat.items() if k not in TRAIN_SECTION}
        out["train"] = {k: flat[k] for k in TRAIN_SECTION}
        return out


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` read into :class:`SimilarConfig`, validated, the language's defaults filled in, as a dict."""
    return SimilarConfig.from_dict(config).resolved().to_dict()
