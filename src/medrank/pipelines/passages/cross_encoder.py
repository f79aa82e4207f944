"""Cross-encoder re-ranking baseline: MiniLM over ``[CLS] entity ; aspect [SEP] passage [SEP]`` → one score.

Built on the all-MiniLM-L6-v2 weights (``AutoModelForSequenceClassification``,
a fresh 1-output head) and trained on the self-supervised (entity; aspect) →
passage groups of :mod:`medrank.pipelines.passages.pairs` with the listwise
softmax loss (task ``passage-cross-encoder``).

The recipe (keys and defaults) is :class:`~.config.PassageCrossEncoderConfig`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.data.medquad import PassageCorpus, corpus_from_documents
from medrank.models.pair_classifier import PairScorer as CrossEncoderScorer
from medrank.models.pair_classifier import load_pair_classifier
from medrank.pipelines.passages.losses import ListwiseSoftmaxLoss
from medrank.pipelines.passages.pairs import TrainingGroup, query_text, training_groups
from medrank.pipelines.passages.protocol import query_fields
from medrank.records import Query
from medrank.utils.hf import quiet_weight_loading


class CrossEncoderRanker:
    """Re-ranks each query's candidates with a trained cross-encoder."""

    name = "Cross-encoder (MiniLM)"

    def __init__(self, scorer: CrossEncoderScorer, corpus: PassageCorpus, show_progress: bool = False) -> None:
        self.scorer = scorer
        self.texts = {p.id: p.text for p in corpus.passages}
        self.show_progress = show_progress

    @classmethod
    def load(cls, run_dir: str | Path, corpus: PassageCorpus, show_progress: bool = False) -> CrossEncoderRanker:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        run_dir = Path(run_dir)
        model_dir = run_dir / "model" if (run_dir / "model" / "config.json").exists() else run_dir
        if not (model_dir / "config.json").exists():
            raise FileNotFoundError(f"{run_dir} holds no trained cross-encoder (config.json)")
        meta = json.loads((model_dir / "medrank_cross_encoder.json").read_text()) if (
            model_dir / "medrank_cross_encoder.json"
        ).exists() else {}
        with quiet_weight_loading():
            model = AutoModelForSequenceClassification.from_pretrained(str(model_dir))
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        return cls(CrossEncoderScorer(model, tokenizer, int(meta.get("max_length", 128))), corpus, show_progress)

    def score(self, queries: Sequence[Query], candidates: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        qs, ps, owners = [], [], []
        for q in queries:
            qt = query_text(*query_fields(q))
            for c in candidates[q.id]:
                qs.append(qt)
                ps.append(self.texts[c])
                owners.append(q.id)
        flat = self.scorer.score_pairs(qs, ps, show_progress=self.show_progress)
        out: dict[str, np.ndarray] = {}
        pos = 0
        for q in queries:
            n = len(candidates[q.id])
            out[q.id] = flat[pos : pos + n]
            pos += n
        return out


class GroupBatches:
    def __init__(self, groups: list[TrainingGroup], per_batch: int, seed: int) -> None:
        self.groups = groups
        self.per_batch = per_batch
        self.seed = seed

    def __call__(self, epoch: int) -> list[list[TrainingGroup]]:
        order = np.random.default_rng(self.seed + epoch).permutation(len(self.groups))
        return [[self.groups[i] for i in order[s : s + self.per_batch]] for s in range(0, len(order), self.per_batch)]


def train_cross_encoder(config: dict[str, Any], output_dir: Path, resume: bool = True) -> dict[str, Any]:
    from medrank.pipelines.passages.cdv import load_split
    from medrank.pipelines.passages.config import PassageCrossEncoderConfig, start_run
    from medrank.training import Trainer, recipe_settings
    from medrank.utils.io import atomic_dir, atomic_write_json

    output_dir = Path(output_dir)
    recipe = start_run(PassageCrossEncoderConfig, config, output_dir, resume)
    cfg = recipe.to_dict()
    t0 = time.perf_counter()
    train_docs, _ = load_split(cfg)
    groups = training_groups(corpus_from_documents(train_docs, "medquad:train"), cfg["group_size"], cfg["seed"])
    model, tokenizer = load_pair_classifier(cfg["base"])
    scorer = CrossEncoderScorer(model, tokenizer, cfg["max_length"])
    loss = ListwiseSoftmaxLoss()
    g = cfg["group_size"]

    def loss_fn(batch: list[TrainingGroup]) -> torch.Tensor:
        qs = [grp.query for grp in batch for _ in grp.passages]
        ps = [p for grp in batch for p in grp.passages]
        return loss(scorer.logits(scorer.features(qs, ps)).view(len(batch), g))

    batches = GroupBatches(groups, cfg["batch_size"], cfg["seed"])
    trainer = Trainer(model, loss_fn, batches, output_dir, **recipe_settings(recipe), steps_per_epoch=len(batches(0)))
    state = trainer.fit(resume=resume)
    model.eval()
    with atomic_dir(output_dir / "model") as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "medrank_cross_encoder.json").write_text(json.dumps({"max_length": cfg["max_length"], "train_config": cfg}))
    summary = {
        "task": "passage-cross-encoder",
        "model_dir": str(output_dir / "model"),
        "training_groups": len(groups),
        "steps": state.global_step,
        "final_train_loss": state.history[-1].get("train_loss") if state.history else None,
        "train_seconds": round(time.perf_counter() - t0, 1),
    }
    atomic_write_json(output_dir / "summary.json", summary)
    return summary
