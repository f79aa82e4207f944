"""Training of pair matchers and of the AM-softmax transfer pre-training, on the shared Trainer.

* :func:`fit_matcher` — supervised pair training (pair cross-entropy), one
  validation evaluation per epoch (epoch 0 = untrained), the best epoch by
  validation F1 restored at the end, early stopping and a wall-clock budget.
* :func:`pretrain_on_groups` — the STMT paper's transfer step: the matcher's
  question encoder is trained as a classifier over question groups with
  AM-softmax (or plain softmax); the fine-tuning then starts from it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from medrank.data.questions import QuestionPair
from medrank.pipelines.similar.evaluation import metric_subset, pair_metrics
from medrank.pipelines.similar.losses import AMSoftmaxLoss, PairCrossEntropyLoss, SoftmaxClassificationLoss
from medrank.pipelines.similar.matchers import NeuralMatcher, PairMatcher
from medrank.training import Callback, Trainer
from medrank.utils.io import atomic_write_json

log = logging.getLogger(__name__)

PRETRAIN_LOSSES = ("am-softmax", "softmax")


class EarlyStopping(Callback):
    """Stop when ``metric`` has not improved for ``patience`` epochs."""

    def __init__(self, metric: str = "f1", patience: int = 4) -> None:
        self.metric, self.patience = metric, patience
        self.best: float | None = None
        self.bad_epochs = 0

    def on_train_begin(self, trainer: Trainer) -> None:
        # a resumed run that had already stopped early stays stopped (re-running a finished run is a no-op)
        if self.patience > 0 and self.bad_epochs >= self.patience:
            trainer.stop_training = True

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        if self.patience <= 0 or self.metric not in metrics:
            return
        value = float(metrics[self.metric])
        if self.best is None or value > self.best:
            self.best, self.bad_epochs = value, 0
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                trainer.stop_training = True

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "bad_epochs": self.bad_epochs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.bad_epochs = state.get("best"), int(state.get("bad_epochs", 0))


class TimeBudget(Callback):
    """Stop before an epoch that would end past ``seconds`` of training (the CPU recipe's bound).

    Counts only this process's time (a resumed run gets a fresh budget).
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()
        self.epoch_start = self.start
        self.longest = 0.0

    def on_train_begin(self, trainer: Trainer) -> None:
        self.start = time.perf_counter()

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        self.epoch_start = time.perf_counter()

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.epoch_start)
        if self.seconds is not None and now - self.start + self.longest > self.seconds:
            log.info("time budget of %.0fs reached after epoch %d", self.seconds, epoch)
            trainer.stop_training = True


def bucketed_batches(n: int, batch_size: int, rng: np.random.Generator, lengths: np.ndarray | None = None,
                     bucket_batches: int = 50) -> list[np.ndarray]:
    """Index batches of a random permutation; with ``lengths``, sorted by length inside windows of
    ``bucket_batches`` batches and then shuffled, so each batch pads to similar lengths."""
    order = rng.permutation(n)
    if lengths is None or bucket_batches <= 1:
        return [order[i : i + batch_size] for i in range(0, n, batch_size)]
    window = batch_size * bucket_batches
    chunks = np.array_split(order, max(1, -(-n // window)))
    order = np.concatenate([c[np.argsort(lengths[c], kind="stable")] for c in chunks])
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


class EpochBatches:
    """Shuffled mini-batches of precomputed pair features, re-shuffled deterministically per epoch.

    When the matcher reports feature lengths, examples are sorted by length
    inside windows of ``bucket_batches`` batches (then the batches are shuffled),
    so a batch pads to similar lengths: the same data and randomness, much less
    wasted compute on padding.
    """

    def __init__(self, matcher: PairMatcher, feats: Sequence[Any], labels: Sequence[int], batch_size: int, seed: int,
                 epoch: int, bucket_batches: int = 50, deadline: float | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.matcher, self.feats, self.batch_size = matcher, feats, batch_size
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        self.batches = bucketed_batches(len(feats), batch_size, np.random.default_rng([seed, epoch]),
                                        matcher.feature_lengths(feats), bucket_batches)
        self.deadline = deadline  # time.perf_counter() value after which the epoch ends early
        self.stopped_early = False

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for idx in self.batches:
            if self.deadline is not None and time.perf_counter() > self.deadline:
                # bounds a long epoch (the cross-encoder's CPU recipe) inside the time budget
                self.stopped_early = True
                log.info("time budget reached inside the epoch; ending it early")
                return
            batch = self.matcher.collate([self.feats[j] for j in idx])
            batch["labels"] = self.labels[torch.as_tensor(idx)]
            yield batch


def fit_matcher(
    matcher: PairMatcher,
    train_pairs: Sequence[QuestionPair],
    valid_pairs: Sequence[QuestionPair],
    output_dir: str | Path,
    *,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    scheduler: str = "exponential",
    gamma: float = 0.9,
    warmup_ratio: float = 0.1,
    max_steps_per_epoch: int | None = None,
    max_grad_norm: float | None = 5.0,
    patience: int = 4,
    time_budget_s: float | None = 3600.0,
    eval_reserve_s: float = 0.0,
    eval_untrained: bool = True,
    threshold: float = 0.5,
    eval_batch_size: int = 256,
    seed: int = 13,
    resume: bool = True,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Train ``matcher`` on ``train_pairs``, select the epoch with the best validation F1, save ``matcher/``.

    Returns a summary with the selected epoch's validation metrics, the
    history and timings. Checkpoints (``checkpoints/epoch-N``) let an
    interrupted run resume.

    ``time_budget_s`` bounds the run: no epoch starts that would end past it,
    and an epoch's batches stop at ``time_budget_s - eval_reserve_s`` (time kept
    for the validation pass). ``eval_untrained=False`` skips the epoch-0
    evaluation (minutes for a cross-encoder on CPU).
    """
    if not train_pairs:
        raise ValueError("no training pairs")
    if not valid_pairs:
        raise ValueError("no validation pairs")
    output_dir = Path(output_dir)
    t0 = time.perf_counter()
    feats = matcher.features([(p.text1, p.text2) for p in train_pairs])
    labels = [p.label for p in train_pairs]
    valid_feats = matcher.features([(p.text1, p.text2) for p in valid_pairs])
    loss = PairCrossEntropyLoss()
    deadline = t0 + time_budget_s - eval_reserve_s if time_budget_s is not None else None

    def evaluate(epoch: int) -> dict[str, float]:
        if epoch == 0 and not eval_untrained:
            return {}
        scores = matcher.score_features(valid_feats, eval_batch_size)
        return metric_subset(pair_metrics(valid_pairs, scores, threshold))

    trainer = Trainer(
        matcher.module,
        lambda batch: loss(matcher.logits(batch), batch["labels"]),
        lambda epoch: EpochBatches(matcher, feats, labels, batch_size, seed, epoch, deadline=deadline),
        output_dir,
        epochs=epochs, lr=lr, weight_decay=weight_decay, scheduler=scheduler, gamma=gamma,
        warmup_ratio=warmup_ratio, steps_per_epoch=(len(feats) + batch_size - 1) // batch_size,
        max_steps_per_epoch=max_steps_per_epoch, max_grad_norm=max_grad_norm, evaluate=evaluate,
        select_metric="f1", callbacks=[EarlyStopping("f1", patience), TimeBudget(time_budget_s)],
        keep_checkpoints=1, seed=seed, show_progress=show_progress,
    )
    state = trainer.fit(resume=resume)
    train_seconds = time.perf_counter() - t0
    best = state.best_epoch or state.epoch
    matcher.module.load_state_dict(load_file(str(trainer.checkpoint_root / f"epoch-{best}" / "model.safetensors")))
    matcher.module.eval()
    t1 = time.perf_counter()
    scores = matcher.score_features(valid_feats, eval_batch_size)
    eval_seconds = time.perf_counter() - t1
    metrics = pair_metrics(valid_pairs, scores, threshold)
    matcher.save(output_dir / "matcher")
    # per-pair validation scores: lets reports combine or re-threshold runs without re-scoring
    atomic_write_json(output_dir / "valid_scores.json", {p.id: round(float(x), 6) for p, x in zip(valid_pairs, scores, strict=True)})
    return {
        "best_epoch": best,
        "epochs_run": state.epoch,
        "valid": metrics,
        "train_seconds": round(train_seconds, 1),
        "valid_pairs_per_second": round(len(valid_pairs) / eval_seconds, 1) if eval_seconds > 0 else None,
        "history": state.history,
        "n_train_pairs": len(train_pairs),
        "n_valid_pairs": len(valid_pairs),
        "n_parameters": sum(p.numel() for p in matcher.module.parameters()),
    }


class GroupPretrainer(nn.Module):
    """The matcher's network (for ``encode``) plus the group classifier of the pre-training loss."""

    def __init__(self, network: nn.Module, classifier: nn.Module) -> None:
        super().__init__()
        self.network = network
        self.classifier = classifier

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.network.encode(ids), labels)


def group_examples(groups: Sequence[Sequence[str]]) -> tuple[list[str], list[int]]:
    """Flatten groups into (question, group index) examples; a text in several groups keeps its first."""
    texts, labels, seen = [], [], set()
    for g, members in enumerate(groups):
        for t in members:
            if t not in seen:
                seen.add(t)
                texts.append(t)
                labels.append(g)
    return texts, labels


def pretrain_on_groups(
    matcher: NeuralMatcher,
    groups: Sequence[Sequence[str]],
    output_dir: str | Path,
    *,
    loss: str = "am-softmax",
    margin: float = 0.35,
    scale: float = 20.0,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    scheduler: str = "exponential",
    gamma: float = 0.9,
    time_budget_s: float | None = 1800.0,
    seed: int = 13,
    resume: bool = True,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Pre-train ``matcher.module``'s question encoder as a classifier over ``groups`` (in place).

    Writes ``output_dir/encoder.safetensors`` (the whole network after
    pre-training; the pair head is untouched) and a summary; with ``resume``
    a finished pre-training is loaded instead of re-run.
    """
    if loss not in PRETRAIN_LOSSES:
        raise ValueError(f"loss must be one of {PRETRAIN_LOSSES}, got {loss!r}")
    if not matcher.supports_transfer:
        raise ValueError(f"matcher {matcher.name!r} cannot embed single questions, so it cannot be pre-trained")
    if len(groups) < 2:
        raise ValueError(f"pre-training needs at least 2 groups, got {len(groups)}")
    output_dir = Path(output_dir)
    done = output_dir / "encoder.safetensors"
    texts, labels = group_examples(groups)
    summary = {"loss": loss, "groups": len(groups), "questions": len(texts), "margin": margin, "scale": scale}
    if resume and done.exists():
        matcher.module.load_state_dict(load_file(str(done)))
        return {**summary, "resumed": True}
    dim = matcher.module.output_dim
    classifier = AMSoftmaxLoss(dim, len(groups), margin, scale) if loss == "am-softmax" else SoftmaxClassificationLoss(dim, len(groups))
    model = GroupPretrainer(matcher.module, classifier)
    ids = [matcher.token_ids(t) for t in texts]
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    label_tensor = torch.as_tensor(labels, dtype=torch.long)

    def batches(epoch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for idx in bucketed_batches(len(ids), batch_size, np.random.default_rng([seed, 1000 + epoch]), lengths):
            seqs = [ids[j] for j in idx]
            length = max(len(s) for s in seqs)
            x = torch.zeros(len(seqs), length, dtype=torch.long)
            for r, s in enumerate(seqs):
                x[r, : len(s)] = torch.as_tensor(s)
            out.append((x, label_tensor[torch.as_tensor(idx)]))
        return out

    t0 = time.perf_counter()
    trainer = Trainer(
        model, lambda b: model(*b), batches, output_dir, epochs=epochs, lr=lr, weight_decay=weight_decay,
        scheduler=scheduler, gamma=gamma, steps_per_epoch=(len(ids) + batch_size - 1) // batch_size,
        max_grad_norm=5.0, callbacks=[TimeBudget(time_budget_s)], keep_checkpoints=1, seed=seed,
        show_progress=show_progress,
    )
    state = trainer.fit(resume=resume)
    tmp = done.with_name(f".{done.name}.tmp")
    save_file({k: v.detach().cpu().contiguous() for k, v in matcher.module.state_dict().items()}, str(tmp))
    os.replace(tmp, done)  # atomic: a crash leaves no half-written encoder that resume would trust
    summary.update(
        epochs=state.epoch, seconds=round(time.perf_counter() - t0, 1),
        final_train_loss=state.history[-1].get("train_loss") if state.history else None,
    )
    atomic_write_json(output_dir / "summary.json", summary)
    return summary
