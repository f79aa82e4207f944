"""The training recipe of one symptom-detection model, read from a YAML/JSON config.

Every model of the paper's comparison is one config: the loss, the miner, E-FN on/off, the
encoder and the budget. Unknown keys are an error (a typo must not silently fall back to a
default). See ``configs/symptom/`` for the CPU recipes and the paper's full (GPU) recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from medrank.training.args import TrainingArgs

LOSSES = (
    "nce-forward",
    "nce-backward",
    "bi-nce",
    "bi-hardnce",
    "triplet",
    "contrastive",
    "sentbert",
    "cross-encoder",
)
MINERS = ("none", "random", "topk", "higher-than-true", "hd-sampling")
#: losses that contrast a query against several terms / a term against several queries
NCE_LOSSES = ("nce-forward", "nce-backward", "bi-nce", "bi-hardnce")
#: losses over labelled (query, term, 0/1) pairs: one positive and n negatives per query
PAIR_LOSSES = ("contrastive", "sentbert", "cross-encoder")
DATASETS = ("chip-cdn", "ncbi-disease", "bc5cdr", "hpo-layperson")
#: knowledge-base texts an ``hpo-layperson`` run may also train on (``extra_queries``)
EXTRA_QUERIES = ("synonyms", "definitions")


@dataclass
class SymptomConfig(TrainingArgs):
    """One model's recipe. Defaults are the paper's full recipe (Zhang et al., KDD 2022, §5.2)."""

    task: str = "symptom"
    name: str = "bi-hardnce"
    dataset: str = "chip-cdn"
    encoder: str = "e5-small"
    max_length: int = 64
    # -- objective ---------------------------------------------------------------------------
    loss: str = "bi-hardnce"
    miner: str = "hd-sampling"
    efn: bool = True
    alpha_start: float = 0.8
    alpha_step: float = 0.05
    alpha_max: float = 0.95
    n_hard_queries: int = 10
    n_hard_terms: int = 3
    topk: int | None = None
    pool: int = 100
    temperature: float = 0.05
    backward_weight: float = 1.0
    margin: float | None = None
    distance: str = "cosine"
    # -- data --------------------------------------------------------------------------------
    mining_terms: str = "gold"
    eval_candidates: list[str] = field(default_factory=lambda: ["gold", "vocab"])
    positives: str = "name"
    use_synonyms: bool = True
    #: index each concept's definition (first sentence) as one more entry, in training and in every index the run
    #: builds (HPO has definitions; a vocabulary without them is unchanged)
    use_definitions: bool = False
    #: ``hpo-layperson`` only: more training queries from the knowledge base itself, for the training terms (never a
    #: validation or check term): ``"synonyms"`` (each clinical synonym → its term) and ``"definitions"`` (the first
    #: sentence of the definition → its term). A layperson phrase often describes rather than names ("Fewer teeth
    #: than normal"), which is how a definition reads.
    extra_queries: list[str] = field(default_factory=list)
    drop_labels: list[str] = field(default_factory=lambda: ["O"])
    # -- optimisation ------------------------------------------------------------------------
    batch_size: int = 32
    lr: float = 2e-5
    weight_decay: float = 0.01
    epochs: int = 8
    max_steps_per_epoch: int | None = None
    train_layers: int | None = None
    cache: bool = True
    select_metric: str = "ndcg@5"
    rerank_depth: int = 20
    eval_queries: int | None = None
    # -- run ---------------------------------------------------------------------------------
    device: str = "cpu"
    save_model: bool = True
    #: fit the set-level decision after training (what ``/symptoms`` serves): Chinese runs on the validation split
    #: (``sets-<candidates>.json``); ``hpo-layperson`` runs on synthetic complaints from their validation terms, over
    #: every HPO name and synonym (``index-hpo`` + ``sets-hpo.json``, :mod:`.synthetic`)
    fit_sets: bool = True
    keep_checkpoints: int = 1
    data_root: str | None = None
    cache_dir: str | None = None
    show_progress: bool = True

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> SymptomConfig:
        return cls.checked(cfg, "symptom config", "unknown {what} key(s) {unknown}; known: {known}")

    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ValueError(f"symptom config {self.name!r}: {msg}")

        need(self.task == "symptom", f"task must be 'symptom', got {self.task!r}")
        need(self.dataset in DATASETS, f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        need(self.loss in LOSSES, f"loss must be one of {LOSSES}, got {self.loss!r}")
        need(self.miner in MINERS, f"miner must be one of {MINERS}, got {self.miner!r}")
        need(self.batch_size >= 2, f"batch_size must be >= 2, got {self.batch_size}")
        need(self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}")
        need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        need(self.temperature > 0, f"temperature must be > 0, got {self.temperature}")
        need(self.n_hard_terms >= 0 and self.n_hard_queries >= 0, "n_hard_* must be >= 0")
        need(self.pool >= max(1, self.n_hard_terms, self.n_hard_queries), "pool must be >= n_hard_*")
        need(self.max_length >= 8, f"max_length must be >= 8, got {self.max_length}")
        need(self.train_layers is None or self.train_layers >= 1, "train_layers must be >= 1 or null (all)")
        need(bool(self.eval_candidates), "eval_candidates must name at least one candidate set")
        need(self.positives in ("name", "all"), f"positives must be 'name' or 'all', got {self.positives!r}")
        need(isinstance(self.extra_queries, list), f"extra_queries must be a list, got {self.extra_queries!r}")
        unknown = sorted(set(self.extra_queries) - set(EXTRA_QUERIES))
        need(not unknown, f"extra_queries must be among {EXTRA_QUERIES}, got {unknown}")
        need(not self.extra_queries or self.dataset == "hpo-layperson",
             f"extra_queries only applies to dataset 'hpo-layperson', not {self.dataset!r}")
        if self.loss == "bi-hardnce":
            need(self.miner not in ("none",), "bi-hardnce needs a miner (hd-sampling in the paper)")
            need(self.n_hard_terms >= 1 and self.n_hard_queries >= 1, "bi-hardnce needs n_hard_terms, n_hard_queries >= 1")
        if self.loss in ("triplet", *PAIR_LOSSES):
            need(self.miner != "none", f"{self.loss} needs negatives: miner 'random' or a hard-negative miner")
            need(self.n_hard_terms >= 1, f"{self.loss} needs n_hard_terms >= 1 (negatives per query)")
        if self.loss == "cross-encoder":
            need(self.miner == "random", "the cross-encoder baseline is trained with random negatives")
        if self.efn:
            need(self.miner in ("topk", "higher-than-true", "hd-sampling"), "efn only applies to a hard-negative miner")

    @property
    def uses_term_negatives(self) -> bool:
        if self.miner == "none":
            return False
        return self.loss in ("nce-forward", "bi-nce", "bi-hardnce", "triplet", *PAIR_LOSSES) and self.n_hard_terms > 0

    @property
    def uses_query_negatives(self) -> bool:
        if self.miner == "none":
            return False
        return self.loss in ("nce-backward", "bi-nce", "bi-hardnce") and self.n_hard_queries > 0
