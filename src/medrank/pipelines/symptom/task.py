"""One symptom run's task: its data, model, loss, miner, E-FN, batches and per-epoch evaluation.

:class:`SymptomTask` is what :func:`~medrank.pipelines.symptom.training.train_symptom` hands to the
shared :class:`~medrank.training.Trainer`; :class:`MiningCallback` re-mines negatives every epoch.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from medrank.pipelines.symptom.config import NCE_LOSSES, SymptomConfig
from medrank.pipelines.symptom.data import PairData, build_pair_data, no_duplicate_batches
from medrank.pipelines.symptom.efn import AlphaSchedule, FalseNegativeElimination
from medrank.records import Concept, ConceptDataset
from medrank.training import Callback, Trainer
from medrank.training.miners import RandomMiner, make_miner, mine_candidates

if TYPE_CHECKING:
    from medrank.retrieval.concept import ConceptRetriever

log = logging.getLogger(__name__)

EVAL_METRICS = ("ndcg@5", "recall@5", "acc@1", "acc@5", "mrr")
BC5CDR_SPLIT_SEED = 13
HPO_LAYPERSON_SPLIT_SEED = 13


# -- data ------------------------------------------------------------------------------------------


@dataclass
class TaskData:
    train: ConceptDataset
    valid: ConceptDataset
    mining_concepts: tuple[Concept, ...]
    candidate_names: list[str]
    root: str | None

    def candidates(self, name: str) -> tuple[Concept, ...]:
        from medrank.retrieval.concept_data import load_candidates

        dataset = self.valid.name.split("/")[0].split(":")[0]
        if dataset not in ("chip-cdn", "ncbi-disease", "bc5cdr", "hpo-layperson"):
            dataset = "chip-cdn"
        if dataset != "chip-cdn" and name in ("gold", "vocab", "medic"):
            return self.valid.vocabulary
        return load_candidates(dataset, name, eval_set=self.valid, root=self.root)


def load_task_data(cfg: SymptomConfig) -> TaskData:
    """Training queries, validation split, mining term set for ``cfg.dataset`` (fixed-seed splits)."""
    from medrank import data
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    root = cfg.data_root
    if cfg.dataset == "chip-cdn":
        # the same split as `medrank evaluate --dataset chip-cdn --split valid` (seed 13, 20 %, by text)
        train, valid = load_eval_set("chip-cdn", "train", root=root), load_eval_set("chip-cdn", "valid", root=root)
        if cfg.mining_terms == "train-gold":
            vocab = {c.id: c for c in valid.vocabulary}
            mining = tuple(vocab.get(n, Concept(n, n)) for n in data.gold_terms(train))
        else:
            mining = load_candidates("chip-cdn", cfg.mining_terms, eval_set=valid, root=root)
    elif cfg.dataset == "ncbi-disease":
        train = data.load_ncbi_disease("train", root)
        valid = data.load_ncbi_disease("devel", root, vocabulary=train.vocabulary)
        mining = train.vocabulary
    elif cfg.dataset == "hpo-layperson":
        from medrank.data.hpo import load_hpo_layperson

        # layperson synonyms of the terms outside the check set; a fixed tenth of those terms validates
        full = load_hpo_layperson()
        train, valid = data.split_queries(full, valid_fraction=0.1, seed=HPO_LAYPERSON_SPLIT_SEED, group_by="term")
        if cfg.extra_queries:
            train = with_knowledge_base_queries(train, full.vocabulary, cfg.extra_queries)
        mining = full.vocabulary
    else:
        full = data.load_bc5cdr(root)
        train, valid = data.split_queries(full, valid_fraction=0.2, seed=BC5CDR_SPLIT_SEED, group_by="pmid")
        mining = full.vocabulary
    return TaskData(train, valid, tuple(mining), list(cfg.eval_candidates), root)


def with_knowledge_base_queries(train: ConceptDataset, vocabulary: Sequence[Concept],
                                kinds: Sequence[str]) -> ConceptDataset:
    """``train`` plus, for each term it has a query of, the term's own knowledge-base texts as more queries of it:
    its synonyms (``"synonyms"``) and the first sentence of its definition (``"definitions"``). Only ``train``'s
    terms, so a validation or check term's texts never become a training query; a text that is also a training
    query is not repeated."""
    from medrank.records import Qrels, Query
    from medrank.retrieval.concept import concept_texts

    by_id = {c.id: c for c in vocabulary}
    terms = list(dict.fromkeys(t for q in train.queries for t in sorted(train.qrels.relevant(q.id))))
    seen = {q.text.lower() for q in train.queries}
    queries, qrels = list(train.queries), Qrels(train.qrels.to_dict())
    for term in terms:
        concept = by_id.get(term)
        if concept is None:
            continue
        # the concept's own texts (concept_texts) without its name, which is already what the query must reach
        texts = concept_texts(concept, "synonyms" in kinds, "definitions" in kinds)[1:]
        for i, text in enumerate(texts):
            if text.lower() in seen:
                continue
            seen.add(text.lower())
            qid = f"{term}#kb{i}"
            queries.append(Query(qid, text, {"term": term, "source": "knowledge base"}))
            qrels.add(qid, term)
    return ConceptDataset(train.name, tuple(queries), qrels, train.vocabulary, train.unmapped)


# -- the task --------------------------------------------------------------------------------------


class MiningCallback(Callback):
    """Re-mines negatives at the start of every epoch; checkpoints E-FN's calibration log."""

    def __init__(self, task: SymptomTask) -> None:
        self.task = task

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        self.task.prepare_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        return {"efn": self.task.efn.log if self.task.efn else [], "epoch_stats": self.task.epoch_stats}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.task.efn is not None:
            self.task.efn.log = list(state.get("efn", []))
        self.task.epoch_stats = {int(k): v for k, v in state.get("epoch_stats", {}).items()}


class SymptomTask:
    """Everything one bi-encoder run needs: data, model, loss, miner, E-FN, batches and evaluation."""

    def __init__(self, cfg: SymptomConfig, output_dir: str | Path, data: TaskData | None = None) -> None:
        from medrank.encoders import load_encoder
        from medrank.models import BiEncoder

        self.cfg = cfg
        self.output_dir = Path(output_dir)
        self.data = data or load_task_data(cfg)
        self.pairs: PairData = build_pair_data(
            self.data.train,
            self.data.mining_concepts,
            use_synonyms=cfg.use_synonyms,
            positives=cfg.positives,
            drop_labels=cfg.drop_labels,
            use_definitions=cfg.use_definitions,
        )
        self.queries_of_term = self.pairs.queries_of_term()
        self.valid_queries = list(dict.fromkeys(q.text for q in self.data.valid.queries))
        self.valid_gold = self._valid_gold_entries()
        encoder = load_encoder(cfg.encoder, max_length=cfg.max_length, device=cfg.device)
        self.model = BiEncoder(encoder, train_layers=cfg.train_layers, cache=cfg.cache)
        self.cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
        if self.model.use_cache:
            loaded = self.model.load_cache(self.cache_dir)
            log.info("frozen-layer cache: %d texts loaded from %s", loaded, self.cache_dir)
        self.loss = self.make_loss()
        self.miner = make_miner(cfg.miner, cfg.temperature, cfg.topk) if cfg.miner not in ("random",) else None
        self.efn = FalseNegativeElimination(AlphaSchedule(cfg.alpha_start, cfg.alpha_step, cfg.alpha_max)) if cfg.efn else None
        self.epoch_batches: list[dict[str, np.ndarray]] = []
        self.epoch_stats: dict[int, dict[str, Any]] = {}
        self._eval_concepts: dict[str, tuple[Concept, ...]] = {}
        self._cached_texts = self.model.cache_size()

    def save_cache_if_grown(self) -> None:
        """Persist the frozen-layer cache when new texts were added (later runs reuse it)."""
        if self.model.use_cache and self.model.cache_size() > self._cached_texts:
            self.model.save_cache(self.cache_dir)
            self._cached_texts = self.model.cache_size()

    # -- helpers -----------------------------------------------------------------------------
    def _valid_gold_entries(self) -> list[set[int]]:
        """Per validation query text, the mining-term indices of its gold concepts (for E-FN)."""
        entries: dict[str, list[int]] = {}
        for i, item in enumerate(self.pairs.term_items):
            entries.setdefault(item, []).append(i)
        by_text: dict[str, set[int]] = {}
        drop = set(self.cfg.drop_labels)
        for q in self.data.valid.queries:
            s = by_text.setdefault(q.text, set())
            for item in self.data.valid.qrels.relevant(q.id):
                if item not in drop:
                    s.update(entries.get(item, ()))
        return [by_text.get(t, set()) for t in dict.fromkeys(q.text for q in self.data.valid.queries)]

    def make_loss(self) -> nn.Module:
        return _make_loss(self.cfg, self.model.dim)

    def training_module(self) -> nn.Module:
        return nn.ModuleDict({"encoder": self.model.trainable, "loss": self.loss})

    def eval_set(self) -> ConceptDataset:
        """The validation split, or a fixed-seed subset of ``eval_queries`` queries (costly models)."""
        n = self.cfg.eval_queries
        valid = self.data.valid
        if not n or n >= len(valid.queries):
            return valid
        from medrank.data import subset

        if not hasattr(self, "_eval_subset"):
            rng = np.random.default_rng(self.cfg.seed)
            ids = [valid.queries[i].id for i in sorted(rng.choice(len(valid.queries), n, replace=False))]
            self._eval_subset = subset(valid, ids, name=f"{valid.name}:subset{n}")
        return self._eval_subset

    def steps_per_epoch(self) -> int:
        n = math.ceil(len(self.pairs.pairs) / self.cfg.batch_size)
        return min(n, self.cfg.max_steps_per_epoch) if self.cfg.max_steps_per_epoch else n

    def eval_concepts(self, name: str) -> tuple[Concept, ...]:
        if name not in self._eval_concepts:
            self._eval_concepts[name] = self.data.candidates(name)
        return self._eval_concepts[name]

    # -- mining ------------------------------------------------------------------------------
    def calibrate_efn(self, epoch: int, query_emb: np.ndarray, term_emb: np.ndarray) -> float | None:
        """β for the mining before ``epoch``: validation queries × mining terms, top ``pool`` per query."""
        if self.efn is None:
            return None
        valid_emb = self.model.encode(self.valid_queries, "query", show_progress=False)
        cands = mine_candidates(valid_emb, term_emb, [np.array([], dtype=np.int64)] * len(valid_emb), pool=200)
        labels = np.array([[int(c) in gold for c in row] for row, gold in zip(cands.index, self.valid_gold, strict=True)])
        n_gold = sum(len(g) for g in self.valid_gold)
        beta = self.efn.calibrate(epoch, cands.score[cands.valid], labels[cands.valid], n_gold=n_gold)
        return beta if math.isfinite(beta) else None

    def prepare_epoch(self, epoch: int) -> None:
        """Batches of this epoch with their negatives (mined with the current model)."""
        cfg = self.cfg
        rng = np.random.default_rng([cfg.seed, epoch])
        t0 = time.perf_counter()
        # the last pairs of an epoch are the ones that conflict with everything left (queries of
        # the most frequent terms: 高血压 is gold for 335 training queries, more than there are
        # batches); a batch of 2 gives almost no in-batch negatives, so a batch under half size
        # ends the epoch and its pairs wait for the next shuffle
        batches = no_duplicate_batches(
            self.pairs, np.arange(len(self.pairs.pairs)), cfg.batch_size, rng, min_size=max(2, cfg.batch_size // 2)
        )
        if cfg.max_steps_per_epoch:
            batches = batches[: cfg.max_steps_per_epoch]
        used = np.concatenate(batches)
        q_of_pair, t_of_pair = self.pairs.pairs[used, 0], self.pairs.pairs[used, 1]
        neg_t = neg_q = None
        stats: dict[str, Any] = {"epoch": epoch, "pairs": int(len(used)), "batches": len(batches)}
        if cfg.miner == "random":
            if cfg.uses_term_negatives:
                miner = RandomMiner(self.pairs.n_terms, self.pairs.gold)
                neg_t = miner.sample(None, q_of_pair, None, cfg.n_hard_terms, rng)  # type: ignore[arg-type]
            if cfg.uses_query_negatives:
                miner = RandomMiner(self.pairs.n_queries, self.queries_of_term)
                neg_q = miner.sample(None, t_of_pair, None, cfg.n_hard_queries, rng)  # type: ignore[arg-type]
        elif self.miner is not None:
            q_emb = self.model.encode(self.pairs.query_texts, "query")
            t_emb = self.model.encode(self.pairs.term_texts, "passage")
            t_enc = time.perf_counter()
            beta = self.calibrate_efn(epoch, q_emb, t_emb)
            stats.update(efn_alpha=self.efn.schedule(epoch) if self.efn else None, efn_beta=beta)
            pos = np.einsum("pd,pd->p", q_emb[q_of_pair], t_emb[t_of_pair])
            excluded = 0
            if cfg.uses_term_negatives:
                queries = np.unique(q_of_pair)
                row = np.full(self.pairs.n_queries, -1, dtype=np.int64)
                row[queries] = np.arange(len(queries))
                cands = mine_candidates(q_emb[queries], t_emb, [self.pairs.gold[q] for q in queries], cfg.pool, beta)
                excluded += cands.efn_excluded
                neg_t = self.miner.sample(cands, row[q_of_pair], pos, cfg.n_hard_terms, rng)
                stats["term_pool_mean"] = float(cands.valid.sum(1).mean())
            if cfg.uses_query_negatives:
                terms = np.unique(t_of_pair)
                row = np.full(self.pairs.n_terms, -1, dtype=np.int64)
                row[terms] = np.arange(len(terms))
                cands = mine_candidates(t_emb[terms], q_emb, [self.queries_of_term[t] for t in terms], cfg.pool, beta)
                excluded += cands.efn_excluded
                neg_q = self.miner.sample(cands, row[t_of_pair], pos, cfg.n_hard_queries, rng)
                stats["query_pool_mean"] = float(cands.valid.sum(1).mean())
            stats.update(efn_excluded=excluded, encode_seconds=round(t_enc - t0, 2))
        stats["mining_seconds"] = round(time.perf_counter() - t0, 2)
        self.epoch_stats[epoch] = stats
        self.save_cache_if_grown()
        self.epoch_batches = []
        start = 0
        for b in batches:
            sl = slice(start, start + len(b))
            start += len(b)
            batch = {"pairs": self.pairs.pairs[b]}
            if neg_t is not None:
                batch["neg_terms"], batch["neg_terms_valid"] = neg_t[0][sl], neg_t[1][sl]
            if neg_q is not None:
                batch["neg_queries"], batch["neg_queries_valid"] = neg_q[0][sl], neg_q[1][sl]
            self.epoch_batches.append(batch)
        log.info("epoch %d: %s", epoch, stats)

    def batches(self, epoch: int) -> list[dict[str, np.ndarray]]:
        return self.epoch_batches

    # -- the loss of one batch -----------------------------------------------------------------
    def loss_fn(self, batch: dict[str, np.ndarray]) -> torch.Tensor:
        cfg = self.cfg
        q_idx, t_idx = batch["pairs"][:, 0], batch["pairs"][:, 1]
        neg_t, neg_t_ok = batch.get("neg_terms"), batch.get("neg_terms_valid")
        neg_q, neg_q_ok = batch.get("neg_queries"), batch.get("neg_queries_valid")
        # each distinct text is encoded once per step, however many pairs use it
        q_all = np.unique(np.concatenate([q_idx, neg_q[neg_q_ok]] if neg_q is not None else [q_idx]))
        t_all = np.unique(np.concatenate([t_idx, neg_t[neg_t_ok]] if neg_t is not None else [t_idx]))
        q_emb = self.model.embed([self.pairs.query_texts[i] for i in q_all], "query")
        t_emb = self.model.embed([self.pairs.term_texts[i] for i in t_all], "passage")
        q_row = {int(v): i for i, v in enumerate(q_all)}
        t_row = {int(v): i for i, v in enumerate(t_all)}

        def rows(idx: np.ndarray, table: dict[int, int]) -> torch.Tensor:
            return torch.as_tensor(np.vectorize(lambda v: table.get(int(v), 0), otypes=[np.int64])(idx), device=q_emb.device)

        anchors, positives = q_emb[rows(q_idx, q_row)], t_emb[rows(t_idx, t_row)]
        hard_t = t_emb[rows(neg_t, t_row)] if neg_t is not None else None
        hard_q = q_emb[rows(neg_q, q_row)] if neg_q is not None else None
        ok_t = torch.as_tensor(neg_t_ok, device=q_emb.device) if neg_t_ok is not None else None
        ok_q = torch.as_tensor(neg_q_ok, device=q_emb.device) if neg_q_ok is not None else None
        loss_name = cfg.loss
        if loss_name in NCE_LOSSES:
            fn = torch.as_tensor(
                np.stack([np.isin(t_idx, self.pairs.gold[q]) for q in q_idx]), device=q_emb.device
            )
            if loss_name == "nce-forward":
                return self.loss(anchors, positives, hard_t, fn, ok_t)
            if loss_name == "nce-backward":
                return self.loss(anchors, positives, hard_q, fn.T, ok_q)
            return self.loss(anchors, positives, hard_t, hard_q, fn, ok_t, ok_q)
        if loss_name == "triplet":
            return self.loss(anchors, positives, hard_t, ok_t)
        # pairwise: every gold pair (label 1) and every valid negative pair (label 0)
        n = hard_t.shape[1]
        flat_ok = ok_t.reshape(-1)
        qs = torch.cat([anchors, anchors.repeat_interleave(n, dim=0)[flat_ok]])
        ts = torch.cat([positives, hard_t.reshape(-1, hard_t.shape[-1])[flat_ok]])
        labels = torch.cat([torch.ones(len(anchors)), torch.zeros(int(flat_ok.sum()))]).to(q_emb.device)
        return self.loss(qs, ts, labels)

    # -- evaluation -----------------------------------------------------------------------------
    def retriever(self, candidates: str) -> ConceptRetriever:
        from medrank.retrieval.concept import ConceptRetriever

        return ConceptRetriever.build(
            self.eval_concepts(candidates), method="dense", encoder=self.model.as_encoder(self.cfg.name),
            use_definitions=self.cfg.use_definitions,
        )

    def evaluate(self, epoch: int) -> dict[str, float]:
        from medrank.retrieval.concept import evaluate_retriever

        t0 = time.perf_counter()
        res = evaluate_retriever(self.retriever(self.cfg.eval_candidates[0]), self.eval_set(), EVAL_METRICS)
        out: dict[str, Any] = {k: round(float(v), 6) for k, v in res["metrics"].items()}
        stats = self.epoch_stats.get(epoch, {})
        for key in ("efn_alpha", "efn_beta", "efn_excluded", "mining_seconds"):
            if key in stats:
                out[key] = stats[key]
        out["eval_seconds"] = round(time.perf_counter() - t0, 2)
        return out


def _make_loss(cfg: SymptomConfig, dim: int) -> nn.Module:
    from medrank.pipelines.symptom import losses as L

    if cfg.loss == "nce-forward":
        return L.NCEForwardLoss(cfg.temperature)
    if cfg.loss == "nce-backward":
        return L.NCEBackwardLoss(cfg.temperature)
    if cfg.loss == "bi-nce":
        return L.BiNCELoss(cfg.temperature, cfg.backward_weight)
    if cfg.loss == "bi-hardnce":
        return L.BiHardNCELoss(cfg.temperature, cfg.backward_weight)
    if cfg.loss == "triplet":
        return L.TripletLoss(cfg.margin or 0.2, cfg.distance)
    if cfg.loss == "contrastive":
        return L.ContrastiveLoss(cfg.margin or 0.5, cfg.distance)
    if cfg.loss == "sentbert":
        return L.SoftmaxClassifierLoss(dim)
    raise ValueError(f"loss {cfg.loss!r} is not a bi-encoder loss")


def default_cache_dir() -> Path:
    """Where the symptom runs' frozen-bottom cache lives (``$MEDRANK_CACHE/symptom-frozen``)."""
    from medrank.config import cache_dir

    return cache_dir() / "symptom-frozen"
