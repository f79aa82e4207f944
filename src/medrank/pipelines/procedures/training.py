"""Training of MTCG and KAR on the shared :class:`~medrank.training.Trainer`, and their evaluation.

``medrank train configs/procedures/mtcg.yaml`` (task ``procedures-mtcg``):

1. split ``train.tsv`` into fit / train-valid (fixed seed, :func:`~.data.carve_validation`);
   one training pair per (mention, gold term);
2. every epoch, the negative strategy prepares (``online`` re-mines with the current model) and
   draws ``k_n`` negatives per pair; the loss is triplet + count cross-entropy;
3. evaluate recall@10 on train-valid each epoch (selects the best epoch); at the end, recall@2/5/7/10,
   recall throughput (mentions/s) and count-head accuracy on the visible ``val.tsv``.

``medrank train configs/procedures/kar.yaml`` (task ``procedures-kar``) loads a trained MTCG,
retrieves its top-``k`` candidates for every fit mention (gold terms it misses are added as
positives), trains KAR with BCE (the paper's loss; with ``kar_listwise_weight > 0``, plus that
weight times ListNet over each mention's candidate list, batched by whole lists — the CPU
recipe, not in the paper), selects the epoch by the end-to-end exact-set accuracy on
train-valid, tunes FB's ``θ`` there, and writes ``normalizer.json`` so the run directory is a
complete normaliser (``medrank normalize -m RUN``, ``medrank evaluate --dataset
chip2019-procedures --model RUN``).

``medrank train configs/procedures/fusion.yaml`` (task ``procedures-fusion``; not in the paper)
reads a KAR run, scores train-valid with it (prior and mention memory restricted to the fit
split), fits :class:`~.fusion.LearnedFusion` on those candidates, tunes its ``θ`` there, and
writes a normaliser run directory that adds the learned fusion and the memory of every
training mention to the KAR run it points at.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.pipelines.procedures.config import ProcedureConfig, default_cache_dir
from medrank.pipelines.procedures.data import (
    Mention,
    TermBase,
    carve_validation,
    load_keywords,
    load_mentions,
    load_term_base,
)
from medrank.pipelines.procedures.evaluation import count_accuracy, evaluate_mtcg_on, recall_at, set_accuracy
from medrank.training import Callback, Trainer, recipe_settings
from medrank.utils.io import atomic_dir, atomic_write_json

log = logging.getLogger(__name__)


def _setup(cfg: ProcedureConfig, output_dir: Path, resume: bool) -> None:
    from medrank.config import seed_everything, set_run_threads
    from medrank.training import check_run_config

    check_run_config(output_dir, cfg.to_dict(), resume)
    set_run_threads(cfg.threads)
    seed_everything(cfg.seed)


def _base_encoder(cfg: ProcedureConfig) -> Any:
    from medrank.encoders import load_encoder

    return load_encoder(cfg.encoder, max_length=cfg.max_length)


# -- MTCG -------------------------------------------------------------------------------------------------


class MTCGTask:
    """Data, model, negatives, batches and evaluation of one MTCG run."""

    def __init__(self, cfg: ProcedureConfig, output_dir: Path) -> None:
        from medrank.pipelines.procedures.mtcg import MTCG
        from medrank.pipelines.procedures.negatives import make_strategy
        from medrank.pipelines.procedures.normalizer import ProcedureNormalizer

        self.cfg, self.output_dir = cfg, output_dir
        self.terms: TermBase = load_term_base(cfg.data_root)
        self.fit, self.valid = carve_validation(load_mentions("train", cfg.data_root))
        encoder = _base_encoder(cfg)
        if cfg.add_unknown_characters:
            from medrank.encoders.vocab import unknown_characters

            chars = unknown_characters(encoder.tokenizer, [*self.terms.names, *(m.text for m in self.fit)])
            encoder.add_characters(chars, seed=cfg.seed)
            log.info("%d characters the tokenizer cannot spell got tokens of their own", len(chars))
        _check_run_vocabulary(output_dir, encoder)
        self.model = MTCG(encoder, train_layers=cfg.train_layers)
        self.cache_dir = cfg.cache_dir or default_cache_dir()
        self._cached = self.model.bi.load_cache(self.cache_dir)
        self.pairs = np.array([(i, self.terms.index(t)) for i, m in enumerate(self.fit) for t in m.terms], dtype=np.int64)
        self.strategy = make_strategy(
            cfg.negatives, self.fit, self.terms, load_keywords(cfg.data_root) if cfg.negatives == "keyword-replacing" else None, cfg.negative_pool
        )
        self.loss = _mtcg_loss(cfg, [m.count_class for m in self.fit])
        self.retriever = ProcedureNormalizer(self.model, None, self.terms, k=10, fusion="recall", show_progress=cfg.show_progress)
        self.epoch_batches: list[dict[str, Any]] = []

    def steps_per_epoch(self) -> int:
        n = math.ceil(len(self.pairs) / self.cfg.batch_size)
        return min(n, self.cfg.max_steps_per_epoch) if self.cfg.max_steps_per_epoch else n

    def save_cache(self) -> None:
        if self.model.bi.cache_size() > self._cached:
            self.model.bi.save_cache(self.cache_dir)
            self._cached = self.model.bi.cache_size()

    def prepare_epoch(self, epoch: int) -> None:
        cfg = self.cfg
        rng = np.random.default_rng([cfg.seed, epoch])
        t0 = time.perf_counter()
        self.strategy.prepare(epoch, self.model)
        order = rng.permutation(len(self.pairs))
        if cfg.max_steps_per_epoch:
            order = order[: cfg.max_steps_per_epoch * cfg.batch_size]
        chosen = self.pairs[order]
        negs = self.strategy.sample(chosen[:, 0], [self.terms.names[t] for t in chosen[:, 1]], cfg.n_negatives, rng)
        self.epoch_batches = [
            {"pairs": chosen[s : s + cfg.batch_size], "negatives": negs[s : s + cfg.batch_size]}
            for s in range(0, len(chosen), cfg.batch_size)
        ]
        self.save_cache()
        log.info("epoch %d: %d batches of %s negatives in %.1fs", epoch, len(self.epoch_batches), cfg.negatives, time.perf_counter() - t0)

    def loss_fn(self, batch: dict[str, Any]) -> torch.Tensor:
        pairs, negs = batch["pairs"], batch["negatives"]
        m_idx = np.unique(pairs[:, 0])
        m_row = {int(v): i for i, v in enumerate(m_idx)}
        m_emb, logits = self.model.embed_mentions([self.fit[i].text for i in m_idx])
        labels = torch.tensor([self.fit[i].count_class for i in m_idx], dtype=torch.long)
        pos_texts = [self.terms.names[t] for t in pairs[:, 1]]
        texts = list(dict.fromkeys(pos_texts + [t for row in negs for t in row]))
        t_row = {t: i for i, t in enumerate(texts)}
        t_emb = self.model.embed_terms(texts)
        anchors = m_emb[torch.tensor([m_row[int(i)] for i in pairs[:, 0]])]
        positives = t_emb[torch.tensor([t_row[t] for t in pos_texts])]
        negatives = t_emb[torch.tensor([[t_row[t] for t in row] for row in negs])]
        return self.loss(anchors, positives, negatives, logits, labels)

    def evaluate_split(self, mentions: list[Mention], ks: tuple[int, ...] = (10,)) -> dict[str, float]:

        emb, probs = self.model.encode_mentions([m.text for m in mentions])
        rows, _ = self.retriever.retrieve(emb, [m.text for m in mentions], k=max(ks))
        out = recall_at(mentions, rows, self.terms, ks)
        out["count_acc"] = count_accuracy(mentions, probs.argmax(1))["total"]
        return out

    def evaluate(self, epoch: int) -> dict[str, float]:
        t0 = time.perf_counter()
        out = self.evaluate_split(self.valid, (2, 5, 10))
        out["eval_seconds"] = round(time.perf_counter() - t0, 2)
        self.save_cache()
        return out


VOCABULARY = "vocabulary.json"


def _check_run_vocabulary(output_dir: Path, encoder: Any) -> None:
    """Record the characters added to the vocabulary at a run's start; refuse to resume under other ones.

    Checkpoints hold the trained blocks only; the added rows are drawn again from the data and the
    seed. A resumed run whose term base or mentions changed (``data_root`` is not compared by
    :func:`~medrank.training.check_run_config`), or a run started before ``add_unknown_characters``
    existed, would otherwise continue blocks trained under one vocabulary with another.
    """
    from medrank.utils.io import atomic_write_text

    record = {"added_characters": "".join(encoder.added_characters), "added_rows": encoder.added_rows_digest()}
    path = output_dir / VOCABULARY
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved != record:
            raise ValueError(
                f"{output_dir} was started with added characters {saved.get('added_characters')!r} "
                f"(rows {saved.get('added_rows')}), this run has {record['added_characters']!r} (rows {record['added_rows']}): "
                "the data or add_unknown_characters changed; use a new output_dir"
            )
    elif any((output_dir / "checkpoints").glob("*")) and record["added_characters"]:
        raise ValueError(f"{output_dir} has checkpoints from before add_unknown_characters: use a new output_dir")
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, ensure_ascii=False))


def _mtcg_loss(cfg: ProcedureConfig, count_labels: list[int]) -> torch.nn.Module:
    from medrank.pipelines.procedures.losses import MultiTaskTripletLoss, count_class_weights

    weight = count_class_weights(count_labels) if cfg.count_class_weighting == "sqrt-inverse" else None
    return MultiTaskTripletLoss(margin=cfg.margin, count_weight=cfg.count_weight, scale=cfg.distance_scale, class_weight=weight)


class _EpochHook(Callback):
    def __init__(self, prepare: Any) -> None:
        self.prepare = prepare

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        self.prepare(epoch)


def _optimizer(cfg: ProcedureConfig, module: torch.nn.Module, heads: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW with the randomly initialised heads at ``head_lr`` (a linear head at the encoder's 2e-5 barely moves in a CPU budget)."""
    head_ids = {id(p) for p in heads}
    body = [p for p in module.parameters() if p.requires_grad and id(p) not in head_ids]
    groups = [{"params": body, "lr": cfg.lr}]
    head = [p for p in heads if p.requires_grad]
    if head:
        groups.append({"params": head, "lr": cfg.head_lr or cfg.lr})
    return torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _trainer(
    cfg: ProcedureConfig, module: torch.nn.Module, task: Any, output_dir: Path, select: str, heads: list[torch.nn.Parameter]
) -> Trainer:
    return Trainer(
        module,
        task.loss_fn,
        lambda epoch: task.epoch_batches,
        output_dir,
        steps_per_epoch=task.steps_per_epoch(),
        **recipe_settings(cfg),
        optimizer=_optimizer(cfg, module, heads),
        evaluate=task.evaluate,
        select_metric=select,
        callbacks=[_EpochHook(task.prepare_epoch)],
    )


def train_mtcg(config: dict[str, Any] | ProcedureConfig, output_dir: str | Path, resume: bool = True) -> dict[str, Any]:
    """Train MTCG; writes ``model/``, ``history.json``, ``results.json`` under ``output_dir``."""
    cfg = config if isinstance(config, ProcedureConfig) else ProcedureConfig.from_dict(dict(config))
    output_dir = Path(output_dir)
    _setup(cfg, output_dir, resume)
    started = time.perf_counter()
    task = MTCGTask(cfg, output_dir)
    trainer = _trainer(cfg, task.model.trainable, task, output_dir, "recall@10", list(task.model.count_head.parameters()))
    trainer.fit(resume=resume)
    best = trainer.load_best()
    task.model.save(output_dir / "model")
    prior = _tune_term_prior(task) if cfg.term_prior else None
    summary: dict[str, Any] = {
        "name": cfg.name,
        "negatives": cfg.negatives,
        "term_prior": None if prior is None else {"weight": prior[0].weight, "train_valid_top1": prior[1]},
        "best_epoch": best,
        "history": trainer.state.history,
        "train_valid": task.evaluate_split(task.valid, (2, 5, 7, 10)),
        "fit_mentions": len(task.fit),
        "valid_mentions": len(task.valid),
        "train_pairs": int(len(task.pairs)),
        "train_seconds": round(time.perf_counter() - started, 1),
        "threads": torch.get_num_threads(),  # the count that ran (a global --threads overrides the config's)
        "config": cfg.to_dict(),
    }
    if cfg.eval_val:
        val = load_mentions("val", cfg.data_root)
        summary["val"] = evaluate_mtcg_on(task, val)
        if prior is not None:
            task.retriever.prior = prior[0]
            summary["val_with_prior"] = evaluate_mtcg_on(task, val)
            task.retriever.prior = None
    task.save_cache()
    atomic_write_json(output_dir / "results.json", summary)
    return summary


def _tune_term_prior(task: MTCGTask) -> tuple[Any, dict[float, float]]:
    """Tune the prior weight on train-valid with the fit split's names; save it with every training name."""
    from medrank.pipelines.procedures.normalizer import TermPrior, tune_prior

    emb, _ = task.model.encode_mentions([m.text for m in task.valid])
    fit_names = {t for m in task.fit for t in m.terms}
    weight, scores = tune_prior(emb, task.valid, task.retriever.term_embeddings(), task.terms, fit_names)
    prior = TermPrior(frozenset(fit_names | {t for m in task.valid for t in m.terms}), weight)
    prior.save(task.output_dir / "model")
    log.info("term prior: weight %.3f (train-valid top-1 by weight: %s)", weight, scores)
    return prior, scores


# -- KAR --------------------------------------------------------------------------------------------------


class KARTask:
    """KAR training over a trained MTCG's candidates."""

    def __init__(self, cfg: ProcedureConfig, output_dir: Path) -> None:
        from medrank.pipelines.procedures.kar import KeywordAttentiveRanker, kar_bottom_for
        from medrank.pipelines.procedures.mtcg import MTCG, SPEC
        from medrank.pipelines.procedures.normalizer import ProcedureNormalizer, TermPrior

        if not cfg.mtcg:
            raise ValueError("a KAR config needs 'mtcg': the model folder of a trained MTCG run (RUN/model)")
        mtcg_dir = Path(cfg.mtcg)
        if not (mtcg_dir / SPEC).exists():
            raise FileNotFoundError(f"{mtcg_dir} is not an MTCG model folder (no {SPEC}); train configs/procedures/mtcg.yaml first")
        self.cfg, self.output_dir, self.mtcg_dir = cfg, output_dir, mtcg_dir.resolve()
        import json

        spec = json.loads((mtcg_dir / SPEC).read_text(encoding="utf-8"))
        self.terms = load_term_base(cfg.data_root)
        self.fit, self.valid = carve_validation(load_mentions("train", cfg.data_root))
        from medrank.pipelines.procedures.mtcg import add_saved_characters, read_weights

        mtcg_state, mtcg_digest = read_weights(mtcg_dir)
        encoder = _base_encoder(cfg)
        add_saved_characters(encoder, spec, mtcg_state)
        self.mtcg = MTCG(encoder, train_layers=spec["train_layers"])
        kw = load_keywords(cfg.data_root)
        kar_bottom = kar_bottom_for(self.mtcg, cfg.kar_train_layers, trained_key=mtcg_digest)
        # KAR copies the *base* top blocks before MTCG's trained weights are loaded over them
        self.kar = KeywordAttentiveRanker(
            kar_bottom, kw.sites, kw.types, hidden=cfg.ffn_hidden, dropout=cfg.dropout, interaction=cfg.kar_interaction,
            keyword_attention=cfg.kar_keyword_attention, list_context=cfg.kar_list_context,
        )
        self.mtcg.load_state(mtcg_state, mtcg_digest)
        if cfg.kar_init == "mtcg":
            # start the joint blocks from MTCG's domain-tuned top instead of the base model's
            from medrank.encoders.blocks import encoder_blocks

            # MTCG's trained top goes into KAR's last blocks; deeper joint blocks below them keep
            # the base weights (the blocks MTCG kept frozen). A shallower KAR takes MTCG's last blocks only
            mtcg_top = encoder_blocks(self.mtcg.bi.encoder.model)[self.mtcg.bi.n_frozen :][-len(self.kar.top) :]
            for dst, src in zip(self.kar.top[len(self.kar.top) - len(mtcg_top) :], mtcg_top, strict=True):
                dst.load_state_dict(src.state_dict())
        for p in self.mtcg.parameters():
            p.requires_grad_(False)
        self.cache_dir = cfg.cache_dir or default_cache_dir()
        # MTCG's training-label prior, if it has one: KAR trains, selects its epoch and tunes θ on
        # candidates recalled with the prior restricted to the fit split's names (train-valid's own
        # gold names must not get the bonus); the saved normaliser uses every training name
        self.prior = TermPrior.load(mtcg_dir)
        fit_prior = None if self.prior is None else TermPrior(frozenset(t for m in self.fit for t in m.terms), self.prior.weight)
        self.normalizer = ProcedureNormalizer(
            self.mtcg, self.kar, self.terms, k=cfg.k, prior=fit_prior, recall=cfg.kar_recall, fusion=cfg.kar_fusion,
            show_progress=cfg.show_progress,
        )
        self._cached = sum(b.load_cache(self.cache_dir) for b in self.normalizer.frozen_bottoms())
        emb, _ = self.mtcg.encode_mentions([m.text for m in self.fit])
        self.fit_emb = torch.from_numpy(emb)
        self.term_emb = torch.from_numpy(self.normalizer.term_embeddings())
        rows, _ = self.normalizer.retrieve(emb, [m.text for m in self.fit])
        self.examples: list[tuple[int, int, float]] = []
        rng = np.random.default_rng(cfg.seed)
        for i, (m, r) in enumerate(zip(self.fit, rows, strict=True)):
            gold = {self.terms.index(t) for t in m.terms}
            negs = [int(c) for c in r if int(c) not in gold]
            if cfg.negatives_per_mention is not None and len(negs) > cfg.negatives_per_mention:
                negs = sorted(rng.choice(negs, cfg.negatives_per_mention, replace=False).tolist())
            self.examples += [(i, g, 1.0) for g in sorted(gold)] + [(i, c, 0.0) for c in negs]
        self.rows = np.array(self.examples, dtype=np.float64).reshape(-1, 3)
        # the rows of fit mention i (examples are appended mention by mention, so column 0 is sorted)
        bounds = np.searchsorted(self.rows[:, 0], np.arange(len(self.fit) + 1))
        self.mention_rows = [self.rows[bounds[i] : bounds[i + 1]] for i in range(len(self.fit))]
        from medrank.pipelines.procedures.losses import CrossEncoderBCELoss, ListNetLoss

        self.loss = CrossEncoderBCELoss()
        self.listwise = ListNetLoss() if cfg.kar_listwise_weight > 0 else None
        self.epoch_batches: list[np.ndarray] = []
        self.save_cache()

    def save_cache(self) -> None:
        size = sum(b.cache_size() for b in self.normalizer.frozen_bottoms())
        if size > self._cached:
            for b in self.normalizer.frozen_bottoms():
                b.save_cache(self.cache_dir)
            self._cached = size

    def _mentions_per_batch(self) -> int:
        """Listwise batches hold whole candidate lists: about ``batch_size`` pairs."""
        return max(1, round(self.cfg.batch_size * len(self.fit) / max(len(self.rows), 1)))

    def steps_per_epoch(self) -> int:
        if self.listwise is not None:
            n = math.ceil(sum(len(r) > 0 for r in self.mention_rows) / self._mentions_per_batch())
        else:
            n = math.ceil(len(self.rows) / self.cfg.batch_size)
        return min(n, self.cfg.max_steps_per_epoch) if self.cfg.max_steps_per_epoch else n

    def prepare_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng([self.cfg.seed, epoch])
        if self.listwise is None:
            ex = self.rows[rng.permutation(len(self.rows))]
            self.epoch_batches = [ex[s : s + self.cfg.batch_size] for s in range(0, len(ex), self.cfg.batch_size)]
            return
        # whole mentions, shuffled; the rows of one mention stay together
        lists = [self.mention_rows[i] for i in rng.permutation(len(self.mention_rows)) if len(self.mention_rows[i])]
        step = self._mentions_per_batch()
        self.epoch_batches = [np.concatenate(lists[s : s + step]) for s in range(0, len(lists), step)]

    def loss_fn(self, batch: np.ndarray) -> torch.Tensor:
        m_idx, c_idx = batch[:, 0].astype(np.int64), batch[:, 1].astype(np.int64)
        mentions = [self.fit[int(i)].text for i in m_idx]
        cands = [self.terms.names[int(c)] for c in c_idx]
        logits = self.kar(mentions, cands, self.fit_emb[m_idx], self.term_emb[c_idx])
        labels = torch.as_tensor(batch[:, 2], dtype=torch.float32)
        loss = self.loss(logits, labels)
        if self.listwise is not None:
            scores, list_labels, mask = _as_lists(m_idx, logits, labels)
            loss = loss + self.cfg.kar_listwise_weight * self.listwise(scores, list_labels, mask)
        return loss

    def evaluate(self, epoch: int) -> dict[str, float]:

        t0 = time.perf_counter()
        preds = self.normalizer.predict([m.text for m in self.valid])
        out = {f"acc_{k}": v for k, v in set_accuracy(self.valid, preds).items() if not k.startswith("n_")}
        out["eval_seconds"] = round(time.perf_counter() - t0, 2)
        return out


def _as_lists(group: np.ndarray, scores: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pair rows ``(P,)`` grouped by ``group`` (a mention index per row) → padded ``(B, N)`` scores, labels, mask."""
    keys, inverse = np.unique(group, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse, minlength=len(keys))
    width = int(sizes.max())
    col = np.arange(len(group)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows_t, cols_t = torch.as_tensor(inverse[order]), torch.as_tensor(col)
    order_t = torch.as_tensor(order)
    out_s = scores.new_zeros((len(keys), width)).index_put((rows_t, cols_t), scores[order_t])
    out_l = labels.new_zeros((len(keys), width)).index_put((rows_t, cols_t), labels[order_t])
    mask = torch.zeros((len(keys), width), dtype=torch.bool).index_put((rows_t, cols_t), torch.ones(len(group), dtype=torch.bool))
    return out_s, out_l, mask


def _path_from_run(path: Path, run_dir: Path) -> str:
    """``path`` relative to the run directory (as ``ProcedureNormalizer.load`` resolves it), so a
    ``runs/`` tree can be moved or copied to another machine as a whole; absolute only where no
    relative path exists (another drive)."""
    try:
        return os.path.relpath(Path(path).resolve(), Path(run_dir).resolve())
    except ValueError:
        return str(Path(path).resolve())


def train_kar(config: dict[str, Any] | ProcedureConfig, output_dir: str | Path, resume: bool = True) -> dict[str, Any]:
    """Train KAR over a trained MTCG, tune θ on train-valid, write a complete normaliser run directory."""
    from medrank.pipelines.procedures.fusion import tune_theta
    from medrank.pipelines.procedures.normalizer import MANIFEST

    cfg = config if isinstance(config, ProcedureConfig) else ProcedureConfig.from_dict(dict(config))
    output_dir = Path(output_dir)
    _setup(cfg, output_dir, resume)
    started = time.perf_counter()
    task = KARTask(cfg, output_dir)
    heads = [*task.kar.ffn.parameters(), task.kar.special, task.kar.segment]
    if task.kar.list_context:
        heads += [*task.kar.trainable["list"].parameters()]
    trainer = _trainer(cfg, task.kar.trainable, task, output_dir, "acc_total", heads)
    trainer.fit(resume=resume)
    best = trainer.load_best()
    task.kar.save(output_dir / "model")
    preds = task.normalizer.predict([m.text for m in task.valid])
    theta, theta_acc = tune_theta(
        [p.candidates for p in preds], [p.final for p in preds], [p.count_class for p in preds],
        [set(m.terms) for m in task.valid], cfg.theta_grid,
    )
    task.normalizer.theta = theta
    atomic_write_json(
        output_dir / MANIFEST,
        {"mtcg": _path_from_run(task.mtcg_dir, output_dir), "theta": theta, "k": cfg.k, "cache_dir": task.cache_dir, "encoder": cfg.encoder,
         "recall": cfg.kar_recall, "fusion": cfg.kar_fusion},
    )
    summary: dict[str, Any] = {
        "name": cfg.name,
        "best_epoch": best,
        "theta": theta,
        "theta_train_valid_acc": round(100 * theta_acc, 2),
        "history": trainer.state.history,
        "train_examples": len(task.examples),
        "train_seconds": round(time.perf_counter() - started, 1),
        "threads": torch.get_num_threads(),  # the count that ran (a global --threads overrides the config's)
        "config": cfg.to_dict(),
    }
    if cfg.eval_val:
        val = load_mentions("val", cfg.data_root)
        task.normalizer.prior = task.prior  # as ProcedureNormalizer.load will use it
        summary["val"] = set_accuracy(val, task.normalizer.predict([m.text for m in val]))
    task.save_cache()
    atomic_write_json(output_dir / "results.json", summary)
    return summary


# -- learned fusion (not in the paper) -----------------------------------------------------------------


def train_fusion(config: dict[str, Any] | ProcedureConfig, output_dir: str | Path) -> dict[str, Any]:
    """Fit the learned fusion of a KAR run on train-valid and write a normaliser run directory.

    Train-valid is scored exactly as KAR's epoch selection scored it (candidates recalled with the
    prior of the fit split's names) and its memory votes come from the fit split only, so no
    train-valid mention sees its own label; the saved memory holds every training mention.
    """
    from medrank.pipelines.procedures.memory import MentionMemory
    from medrank.pipelines.procedures.normalizer import MANIFEST, ProcedureNormalizer

    cfg = config if isinstance(config, ProcedureConfig) else ProcedureConfig.from_dict(dict(config))
    if not cfg.kar:
        raise ValueError("a fusion config needs 'kar': a KAR run directory written by `medrank train configs/procedures/kar.yaml`")
    kar_dir = Path(cfg.kar).resolve()
    if not (kar_dir / MANIFEST).exists():
        raise FileNotFoundError(f"{kar_dir} has no {MANIFEST}: train configs/procedures/kar.yaml first")
    output_dir = Path(output_dir)
    _setup(cfg, output_dir, resume=False)  # one fit, no checkpoints to resume
    started = time.perf_counter()
    norm = ProcedureNormalizer.load(kar_dir, data_root=cfg.data_root, fusion="fb", learned=None, memory=None)
    valid, preds, s_c, s_r, votes, labels = fusion_training_data(norm, cfg.memory_k, cfg.data_root)
    learned, theta_acc = _fit_fusion(cfg, valid, preds, s_c, s_r, votes, labels, np.arange(len(valid)))
    theta = learned.theta
    fb_valid = set_accuracy(valid, preds)
    cv_acc = _fusion_cv_accuracy(cfg, valid, preds, s_c, s_r, votes, labels)
    train = load_mentions("train", cfg.data_root)
    with atomic_dir(output_dir / "model") as model_dir:  # the fusion and its memory are replaced together
        learned.save(model_dir)
        MentionMemory([m.text for m in train], [m.terms for m in train], k=cfg.memory_k).save(model_dir)
    manifest = json.loads((kar_dir / MANIFEST).read_text(encoding="utf-8"))
    mtcg = Path(manifest["mtcg"])
    manifest.update(
        {
            "mtcg": _path_from_run(mtcg if mtcg.is_absolute() else kar_dir / mtcg, output_dir),
            "kar_model": _path_from_run(kar_dir / "model", output_dir),
            "fusion": "learned",
        }
    )
    atomic_write_json(output_dir / MANIFEST, manifest)
    summary: dict[str, Any] = {
        "name": cfg.name,
        "kar": str(kar_dir),
        "weights": dict(zip(learned.feature_names, [round(c, 4) for c in learned.coef], strict=True)),
        "theta": theta,
        "train_valid_fb": fb_valid,
        "train_valid_learned_in_sample": round(100 * theta_acc, 2),
        "train_valid_learned_cv": cv_acc,
        "train_valid_mentions": len(valid),
        "config": cfg.to_dict(),
    }
    if cfg.eval_val:
        val = load_mentions("val", cfg.data_root)
        final = ProcedureNormalizer.load(output_dir, data_root=cfg.data_root)
        val_preds = final.predict([m.text for m in val])
        summary["val"] = set_accuracy(val, val_preds)
        final.fusion = "fb"
        summary["val_fb"] = set_accuracy(val, final.predict([m.text for m in val]))
    summary["train_seconds"] = round(time.perf_counter() - started, 1)
    summary["threads"] = torch.get_num_threads()
    atomic_write_json(output_dir / "results.json", summary)
    return summary


def _fit_fusion(
    cfg: ProcedureConfig, valid: Any, preds: Any, s_c: np.ndarray, s_r: np.ndarray, votes: np.ndarray, labels: np.ndarray, rows: np.ndarray
) -> tuple[Any, float]:
    """The learned fusion fitted on the train-valid ``rows``, with its θ tuned there: ``(fusion, in-sample accuracy)``."""
    from medrank.pipelines.procedures.fusion import LearnedFusion, tune_theta

    feats = LearnedFusion.features(s_c[rows], s_r[rows], votes[rows], cfg.fusion_ranker)
    model = LearnedFusion.fit(
        feats.reshape(-1, feats.shape[-1]), labels[rows].reshape(-1), c=cfg.fusion_c, seed=cfg.seed, ranker=cfg.fusion_ranker
    )
    probs = model.score(s_c[rows], s_r[rows], votes[rows])
    theta, acc = tune_theta([preds[i].candidates for i in rows], probs.tolist(), [preds[i].count_class for i in rows],
                            [set(valid[i].terms) for i in rows], cfg.theta_grid)
    return model.with_theta(theta), acc


def _fusion_cv_accuracy(
    cfg: ProcedureConfig, valid: Any, preds: Any, s_c: np.ndarray, s_r: np.ndarray, votes: np.ndarray, labels: np.ndarray, folds: int = 5
) -> float:
    """Exact-set accuracy (%) of the learned fusion on train-valid, each fold scored by a fusion (and θ) fitted on the others.

    The in-sample figure flatters every setting alike; this one compares fusion settings (features,
    ``memory_k``, ``fusion_c``) on mentions the regression did not see, without touching val. With
    400 mentions one mention is 0.25 points: differences under ~2 points are noise.
    """
    from medrank.pipelines.procedures.fusion import select_terms

    order = np.random.default_rng(cfg.seed).permutation(len(valid))
    correct = 0
    for f in range(folds):
        test = order[f::folds]
        model, _ = _fit_fusion(cfg, valid, preds, s_c, s_r, votes, labels, np.setdiff1d(order, test))
        for i, p in zip(test, model.score(s_c[test], s_r[test], votes[test]), strict=True):
            chosen = select_terms(preds[i].candidates, p.tolist(), preds[i].count_class, model.theta)
            correct += int(set(chosen) == set(valid[i].terms))
    return round(100.0 * correct / len(valid), 2)


def fusion_training_data(norm: Any, memory_k: int, data_root: str | None = None) -> tuple[Any, ...]:
    """Train-valid as the learned fusion sees it: ``(mentions, predictions, s_c, s_r, votes, labels)``.

    ``norm`` (a FB normaliser over a KAR run) recalls with the prior of the fit split's names only
    and the votes come from a memory of the fit split, so no train-valid mention sees its own label.
    """
    from medrank.pipelines.procedures.memory import MentionMemory
    from medrank.pipelines.procedures.normalizer import TermPrior

    fit, valid = carve_validation(load_mentions("train", data_root))
    full_prior = norm.prior
    if full_prior is not None:
        norm.prior = TermPrior(frozenset(t for m in fit for t in m.terms), full_prior.weight)
    try:
        preds = norm.predict([m.text for m in valid])
    finally:
        norm.prior = full_prior
    votes = MentionMemory([m.text for m in fit], [m.terms for m in fit], k=memory_k).votes([m.text for m in valid], [p.candidates for p in preds])
    s_c = np.array([p.recall_score for p in preds])
    s_r = np.array([p.ranker_score for p in preds])
    labels = np.array([[c in m.terms for c in p.candidates] for m, p in zip(valid, preds, strict=True)])
    return valid, preds, s_c, s_r, votes, labels
