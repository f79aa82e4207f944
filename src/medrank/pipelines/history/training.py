"""Training recipes for the history re-rankers (task ``history-global`` / ``history-cross-encoder`` /
``history-bi-encoder``), all through :class:`medrank.training.Trainer`.

Config keys (:class:`~medrank.pipelines.history.config.HistoryConfig`): ``dataset`` (``mts-aci`` or ``ddxplus``), ``data_dir``
(a built folder; default the cache's ``history/<dataset>``), ``train_split`` / ``valid_split``, ``base`` (``"minilm"`` or ``"e5-small"``),
``layers`` (keep the base's first N transformer blocks; default all), ``loss`` (global re-ranker: one of :data:`~medrank.pipelines.history.losses.LOSSES`),
``loss_kwargs``, ``epochs``, ``lr``, ``scheduler`` (cosine), ``warmup_ratio``, ``batch_size``
(samples per step), ``max_train_samples`` / ``max_eval_samples`` (CPU-recipe caps, seeded
subsets), ``eval_shuffles`` (final evaluation), ``eval_each_epoch``, ``max_dialogue_tokens``,
``max_question_tokens``, ``position_mode``, ``type_embeddings``, ``candidate_attention``,
``shuffle_candidates``,
``ce_negatives`` (cross-encoder negatives per sample), ``bi_negatives`` / ``temperature``
(bi-encoder InfoNCE), ``seed``, ``threads``.

The GPU recipe is the same code with the caps removed: ``max_train_samples: null``,
``epochs: 3``, ``batch_size: 8``, AdamW ``lr: 5e-5``, cosine schedule with 10% warm-up
(``configs/history/*-gpu.yaml``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.pipelines.history.config import resolve_config
from medrank.pipelines.history.data import Sample, bank_texts, read_bank, read_samples, render_dialogue
from medrank.pipelines.history.evaluation import evaluate_scorer, first_stage_metrics, subsample


def data_dir(cfg: dict[str, Any]) -> Path:
    from medrank.pipelines.history.builders import default_out_dir

    return Path(cfg["data_dir"]).expanduser() if cfg.get("data_dir") else default_out_dir(cfg["dataset"])


class SampleBatches:
    """``epoch -> list of batches`` of samples, reshuffled every epoch with a fixed seed."""

    def __init__(self, samples: list[Sample], batch_size: int, seed: int) -> None:
        self.samples, self.batch_size, self.seed = samples, batch_size, seed

    def __call__(self, epoch: int) -> list[list[Sample]]:
        order = np.random.default_rng(self.seed + epoch).permutation(len(self.samples))
        return [[self.samples[i] for i in order[s : s + self.batch_size]] for s in range(0, len(order), self.batch_size)]

    def __len__(self) -> int:
        return (len(self.samples) + self.batch_size - 1) // self.batch_size


def _global_parts(cfg, texts, rng) -> tuple[torch.nn.Module, Callable, Callable]:
    from medrank.pipelines.history.losses import make_loss
    from medrank.pipelines.history.models import GlobalInputConfig, GlobalReranker

    model = GlobalReranker.from_pretrained(cfg["base"], GlobalInputConfig(
        cfg["max_dialogue_tokens"], cfg["max_question_tokens"], cfg["position_mode"], cfg["type_embeddings"],
        cfg["candidate_attention"]), layers=cfg["layers"])
    loss = make_loss(cfg["loss"], **cfg["loss_kwargs"])
    dialogue_cache: dict[str, list[int]] = {}

    def dialogue_ids(s: Sample) -> list[int]:
        if s.id not in dialogue_cache:
            from medrank.pipelines.history.models.inputs import dialogue_tail_ids

            dialogue_cache[s.id] = dialogue_tail_ids(model.tokenizer, render_dialogue(s.context), cfg["max_dialogue_tokens"])
        return dialogue_cache[s.id]

    def loss_fn(batch: list[Sample]) -> torch.Tensor:
        encoded, labels = [], []
        for s in batch:
            order = rng.permutation(len(s.candidates)) if cfg["shuffle_candidates"] else np.arange(len(s.candidates))
            y = s.labels()
            encoded.append(model.encode("", [texts[s.candidates[i]] for i in order], dialogue_ids(s)))
            labels.append([y[i] for i in order])
        feats = model.collate(encoded)
        target = torch.zeros(feats["candidate_mask"].shape)
        for i, y in enumerate(labels):
            target[i, : len(y)] = torch.tensor(y, dtype=torch.float32)
        return loss(model(feats), target, feats["candidate_mask"])

    return model, loss_fn, model.score


def _cross_encoder_parts(cfg, texts, rng) -> tuple[torch.nn.Module, Callable, Callable]:
    from medrank.pipelines.history.losses import BCELoss
    from medrank.pipelines.history.models import HistoryCrossEncoder

    model = HistoryCrossEncoder.from_pretrained(cfg["base"], max_dialogue_tokens=cfg["max_dialogue_tokens"],
                                                max_question_tokens=cfg["max_question_tokens"], layers=cfg["layers"])
    loss = BCELoss()

    def loss_fn(batch: list[Sample]) -> torch.Tensor:
        dias, qs, ys = [], [], []
        for s in batch:
            d = model.dialogue_ids(render_dialogue(s.context))
            y = s.labels()
            pos = [i for i, v in enumerate(y) if v]
            neg = [i for i, v in enumerate(y) if not v]
            neg = rng.permutation(neg)[: cfg["ce_negatives"]].tolist()
            for i in pos + neg:
                dias.append(d)
                qs.append(texts[s.candidates[i]])
                ys.append(float(y[i]))
        logits = model(model.features(dias, qs))
        return loss(logits, torch.tensor(ys))

    return model, loss_fn, model.score


def _bi_encoder_parts(cfg, texts, rng) -> tuple[torch.nn.Module, Callable, Callable]:
    from medrank.losses import ListwiseSoftmaxLoss
    from medrank.pipelines.history.models import HistoryBiEncoder

    model = HistoryBiEncoder.from_pretrained(cfg["base"], cfg["max_dialogue_tokens"], layers=cfg["layers"])
    loss = ListwiseSoftmaxLoss(temperature=cfg["temperature"])
    n_neg = cfg["bi_negatives"]

    def loss_fn(batch: list[Sample]) -> torch.Tensor:
        groups = []
        for s in batch:
            y = s.labels()
            pos = [i for i, v in enumerate(y) if v]
            neg = [i for i, v in enumerate(y) if not v]
            # negatives from the candidate list; pad by repetition for short lists so every row has n_neg
            picked = rng.permutation(neg)[:n_neg].tolist() if neg else []
            while len(picked) < n_neg and neg:
                picked.append(int(rng.choice(neg)))
            groups.append([int(rng.choice(pos))] + picked)
        d = model.embed_dialogues([render_dialogue(s.context) for s in batch])
        q = model.embed_questions([texts[batch[b].candidates[i]] for b, g in enumerate(groups) for i in g])
        q = q.view(len(batch), n_neg + 1, -1)
        return loss(torch.einsum("bd,bnd->bn", d, q))

    return model, loss_fn, model.score


PARTS = {"global": _global_parts, "cross-encoder": _cross_encoder_parts, "bi-encoder": _bi_encoder_parts}


def system_name(cfg: dict[str, Any]) -> str:
    if cfg["model"] == "global":
        extra = []
        if cfg["position_mode"] != "restart":
            extra.append("sequential positions")
        if not cfg["type_embeddings"]:
            extra.append("no type emb.")
        if not cfg["shuffle_candidates"]:
            extra.append("no shuffling")
        if cfg["candidate_attention"] != "blocks":
            extra.append(f"{cfg['candidate_attention']} attention")
        if cfg["max_dialogue_tokens"] != 256:
            extra.append(f"dialogue {cfg['max_dialogue_tokens']}")
        if cfg["train_split"] != "train":
            extra.append(f"trained on {cfg['train_split']}")
        if cfg["base"] != "minilm":
            extra.append(str(cfg["base"]))
        if cfg["layers"] is not None:
            extra.append(f"{cfg['layers']} layers")
        return f"global re-ranker ({cfg['loss']}{', ' + ', '.join(extra) if extra else ''})"
    extra = ([] if cfg["base"] == "minilm" else [str(cfg["base"])]) + (
        [] if cfg["layers"] is None else [f"{cfg['layers']} layers"])
    return f"{cfg['model']} ({', '.join(extra)})" if extra else cfg["model"]


def train_history(config: dict[str, Any], output_dir: Path, resume: bool = True) -> dict[str, Any]:
    """Train one re-ranker, save it under ``output_dir/model`` and evaluate it on the validation split."""
    from medrank.config import seed_everything, set_run_threads
    from medrank.training import GeneratorState, Trainer, check_run_config
    from medrank.utils.io import atomic_write_json

    cfg = resolve_config(config)
    set_run_threads(cfg["threads"])
    seed_everything(cfg["seed"])
    output_dir = Path(output_dir)
    check_run_config(output_dir, cfg, resume)
    folder = data_dir(cfg)
    texts = bank_texts(read_bank(folder / "bank.jsonl"))
    train = subsample(read_samples(folder / f"{cfg['train_split']}.jsonl"), cfg["max_train_samples"], cfg["seed"])
    valid = subsample(read_samples(folder / f"{cfg['valid_split']}.jsonl"), cfg["max_eval_samples"], cfg["seed"] + 1)
    if not train or not valid:
        raise ValueError(f"{folder}: empty training or validation split")
    rng = np.random.default_rng(cfg["seed"])
    model, loss_fn, score = PARTS[cfg["model"]](cfg, texts, rng)
    shuffles = cfg["eval_shuffles"] if cfg["model"] == "global" else 1  # pointwise baselines ignore order

    def run_eval(epoch: int, n_shuffles: int = 1) -> dict[str, Any]:
        model.eval()
        return evaluate_scorer(score, valid, texts, n_shuffles, cfg["seed"], desc=f"eval epoch {epoch}")

    batches = SampleBatches(train, cfg["batch_size"], cfg["seed"])
    t0 = time.perf_counter()
    trainer = Trainer(
        model, loss_fn, batches, output_dir, epochs=cfg["epochs"], lr=cfg["lr"], scheduler=cfg["scheduler"],
        warmup_ratio=cfg["warmup_ratio"], steps_per_epoch=len(batches), seed=cfg["seed"],
        evaluate=(lambda e: run_eval(e)["metrics"]) if cfg["eval_each_epoch"] else None,
        select_metric="ndcg" if cfg["eval_each_epoch"] else None,
        callbacks=[GeneratorState(rng)],  # negatives and candidate shuffles continue their stream on resume
    )
    state = trainer.fit(resume=resume)
    train_seconds = time.perf_counter() - t0
    best_epoch = trainer.load_best() if cfg["eval_each_epoch"] else None  # the epoch the validation picked
    model.eval()
    model.save(output_dir / "model")
    final = run_eval(cfg["epochs"], shuffles)
    report = {
        "system": config.get("name") or system_name(cfg),
        "config": cfg,
        "data_dir": str(folder),
        "train_samples": len(train),
        "valid_samples": len(valid),
        "first_stage": first_stage_metrics(valid),
        "valid": final,
        "steps": state.global_step,
        "best_epoch": best_epoch,
        "train_seconds": round(train_seconds, 1),
        "threads": torch.get_num_threads(),  # the count that ran (a global --threads overrides the config's)
        "final_train_loss": state.history[-1].get("train_loss") if state.history else None,
    }
    atomic_write_json(output_dir / "eval_valid.json", report)
    return report
