"""The training recipe of one history re-ranker (tasks ``history-global`` / ``history-cross-encoder`` /
``history-bi-encoder``), read from a YAML/JSON config; unknown keys are an error."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from medrank.config import check_config_types
from medrank.training.args import TrainingArgs

MODELS = ("global", "cross-encoder", "bi-encoder")


@dataclass
class HistoryConfig(TrainingArgs):
    """One re-ranker's recipe; the defaults are the CPU recipe (the GPU one removes the caps)."""

    epochs: int = 1
    lr: float = 5e-5
    scheduler: str = "cosine"
    batch_size: int = 2  # samples per step
    model: str = "global"
    dataset: str = "mts-aci"
    data_dir: str | None = None
    train_split: str = "train"
    valid_split: str = "valid"
    base: str = "minilm"
    layers: int | None = None  # keep the base's first N transformer blocks (None: all)
    loss: str = "listnet"
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    max_train_samples: int | None = 400
    max_eval_samples: int | None = 150
    eval_shuffles: int = 5
    eval_each_epoch: bool = False
    max_dialogue_tokens: int = 256
    max_question_tokens: int = 24
    position_mode: str = "restart"
    type_embeddings: bool = True
    candidate_attention: str = "blocks"
    shuffle_candidates: bool = True
    ce_negatives: int = 7
    bi_negatives: int = 7
    temperature: float = 0.05


#: every recipe key with its default (``output_dir`` is where ``medrank train`` writes, not a recipe key)
DEFAULTS: dict[str, Any] = {k: v for k, v in asdict(HistoryConfig()).items() if k != "output_dir"}


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """Defaults merged with ``config``, validated (unknown keys, value types, model, sizes)."""
    cfg = {**DEFAULTS, **{k: v for k, v in config.items() if k not in ("task", "description", "name", "output_dir")}}
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown history config keys: {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    check_config_types(cfg, DEFAULTS, "history config")
    if cfg["model"] not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {cfg['model']!r}")
    if cfg["batch_size"] < 1 or cfg["epochs"] < 1:
        raise ValueError("batch_size and epochs must be >= 1")
    layers = cfg["layers"]
    if layers is not None and (not isinstance(layers, int) or isinstance(layers, bool) or layers < 1):
        raise ValueError(f"layers must be a positive number of transformer blocks or null, got {cfg['layers']!r}")
    return cfg
