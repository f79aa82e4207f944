"""The settings of one procedure run (MTCG, KAR or the learned fusion), read from a YAML/JSON config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.pipelines.procedures.fusion import RANKER_SPACES
from medrank.training.args import TrainingArgs


def default_cache_dir() -> str:
    """Where the frozen-bottom cache of the procedure runs lives (``$MEDRANK_CACHE/procedures-frozen``)."""
    from medrank.config import cache_dir

    return str(cache_dir() / "procedures-frozen")


@dataclass
class ProcedureConfig(TrainingArgs):
    """Settings of one MTCG or KAR run (YAML keys are the field names)."""

    task: str = "procedures-mtcg"
    name: str = "mtcg"
    data_root: str | None = None
    encoder: str = "e5-small"
    max_length: int = 40
    train_layers: int = 2
    # MTCG
    negatives: str = "online"
    n_negatives: int = 4
    negative_pool: int | None = None
    margin: float = 1.0
    count_weight: float = 1.0
    distance_scale: float = 5.0
    term_prior: bool = False  # tune and save the training-label prior (normalizer.TermPrior; not in the paper)
    count_class_weighting: str = "none"  # "none" (the paper) or "sqrt-inverse" (class weights (n/n_c)^0.5)
    # not in the paper: characters of the standard names and training mentions that the tokenizer maps to
    # its unknown token (e5-small: 颞 桡 髂 跖 髌 跗 …) get tokens and embedding rows of their own
    # (medrank.encoders.vocab); saved with MTCG, so KAR and the normaliser read the same vocabulary
    add_unknown_characters: bool = False
    # KAR
    mtcg: str | None = None
    k: int = 10
    negatives_per_mention: int | None = None
    ffn_hidden: int = 256
    kar_interaction: str = "recall"  # extra FFN features: "recall" (MTCG's embeddings), "tokens", "none" (the paper)
    # KAR's joint blocks over its own frozen bottom (None = MTCG's train_layers: the two share one
    # cached bottom); more blocks = more mention-candidate interaction, linearly more KAR time;
    # fewer = KAR reads MTCG's own trained blocks (cached under MTCG's weights digest)
    kar_train_layers: int | None = None
    kar_init: str = "base"  # KAR's top blocks start from the base encoder ("base") or MTCG's trained top ("mtcg")
    kar_keyword_attention: bool = True  # False: [PS]/[PT] attend to every token (a plain point-wise cross-encoder)
    kar_recall: str = "mtcg"  # candidates KAR trains and is evaluated on: "mtcg" or "bm25" (the point-wise baseline)
    kar_fusion: str = "fb"  # the run's fusion: "fb" (the paper) or "ranker" (s_r alone: the point-wise baseline)
    # weight of a listwise term (ListNet over each mention's candidates) added to KAR's BCE; 0 = the
    # paper's BCE alone. > 0 batches whole mentions (batch_size pairs, rounded to whole candidate lists)
    kar_listwise_weight: float = 0.0
    # not in the paper: attention across a mention's candidates inside KAR's head (needs the
    # listwise batches, which keep each mention's candidates together)
    kar_list_context: bool = False
    dropout: float = 0.1
    # learned fusion (task procedures-fusion)
    kar: str | None = None  # the KAR run directory the fusion extends
    memory_k: int = 10  # neighbours of the mention memory
    fusion_c: float = 1.0  # inverse L2 strength of the logistic regression
    fusion_ranker: str = "probability"  # the regression reads KAR's "probability" or its "logit"
    theta_grid: list[float] = field(default_factory=lambda: [round(x, 3) for x in np.arange(0.3, 1.0001, 0.025)])
    # optimisation
    epochs: int = 3
    batch_size: int = 32
    lr: float = 1e-4
    head_lr: float | None = None  # lr of the randomly initialised heads (count head; KAR's FFN/specials); None = lr
    weight_decay: float = 0.01
    max_steps_per_epoch: int | None = None
    autocast: str | None = None  # "bf16": training forward passes in bfloat16 (fast on CPUs with AMX); None: float32
    cache_dir: str | None = None
    keep_checkpoints: int = 1
    show_progress: bool = True
    eval_val: bool = True

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ProcedureConfig:
        cfg = cls.checked(raw, "procedures config", "unknown config keys {unknown}; known keys: {known}")
        if cfg.n_negatives < 1:
            raise ValueError(f"n_negatives must be >= 1, got {cfg.n_negatives}")
        if cfg.batch_size < 1 or cfg.epochs < 1:
            raise ValueError("batch_size and epochs must be >= 1")
        if cfg.count_class_weighting not in ("none", "sqrt-inverse"):
            raise ValueError(f"count_class_weighting must be 'none' or 'sqrt-inverse', got {cfg.count_class_weighting!r}")
        if cfg.kar_init not in ("base", "mtcg"):
            raise ValueError(f"kar_init must be 'base' or 'mtcg', got {cfg.kar_init!r}")
        if cfg.kar_recall not in ("mtcg", "bm25") or cfg.kar_fusion not in ("fb", "ranker"):
            raise ValueError(f"kar_recall must be 'mtcg' or 'bm25' and kar_fusion 'fb' or 'ranker', got {cfg.kar_recall!r}, {cfg.kar_fusion!r}")
        if cfg.memory_k < 1 or cfg.fusion_c <= 0:
            raise ValueError(f"memory_k must be >= 1 and fusion_c > 0, got {cfg.memory_k} and {cfg.fusion_c}")
        if cfg.fusion_ranker not in RANKER_SPACES:
            raise ValueError(f"fusion_ranker must be one of {RANKER_SPACES}, got {cfg.fusion_ranker!r}")
        if cfg.kar_train_layers is not None and cfg.kar_train_layers < 1:
            raise ValueError(f"kar_train_layers must be >= 1 (or null for MTCG's train_layers), got {cfg.kar_train_layers}")
        if cfg.kar_listwise_weight < 0:
            raise ValueError(f"kar_listwise_weight must be >= 0, got {cfg.kar_listwise_weight}")
        if cfg.kar_list_context and cfg.kar_listwise_weight <= 0:
            raise ValueError("kar_list_context needs kar_listwise_weight > 0 (batches of whole candidate lists)")
        if cfg.head_lr is not None and cfg.head_lr <= 0:
            raise ValueError(f"head_lr must be > 0, got {cfg.head_lr}")
        if cfg.autocast not in (None, "bf16"):
            raise ValueError(f"autocast must be null or 'bf16', got {cfg.autocast!r}")
        if cfg.autocast is not None and cfg.task == "procedures-fusion":
            raise ValueError("autocast applies to training MTCG and KAR; the fusion step fits a logistic regression")
        return cfg

