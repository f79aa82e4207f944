"""BioSyn (Sung et al., "Biomedical Entity Representations with Synonym Marginalization", ACL 2020)
on the shared core: English concept normalisation (NCBI-disease → MEDIC) with a sparse and a dense score.

The score of a mention ``q`` and a dictionary entry ``e`` (a MEDIC name or synonym) is
``s(q, e) = cos(f(q), f(e)) + w · tfidf(q, e)``: the encoder's cosine plus ``w`` times the cosine of
character n-gram TF-IDF vectors (:class:`~medrank.index.SparseDenseIndex`). Training:

1. **candidates, every epoch** (:class:`CandidateMining`): each training mention's top ``topk``
   entries, half by the sparse score (fixed) and the rest by the dense score of the *current*
   encoder (re-mined each epoch, skipping entries already taken); a candidate is positive when its
   concept is one of the mention's gold ids (a composite ``|`` / ``+`` mention has several: any counts);
2. **loss**: :class:`~medrank.losses.SynonymMarginalizationLoss` over the candidates' scores, so
   every synonym of the gold concept counts; the encoder (every block, or the top ``train_layers``
   over a cached frozen bottom) and ``w`` are trained together;
3. **selection**: Acc@1 on a fixed-seed carve-out of the training documents (``tune_fraction``;
   the devel split is only reported), which also tunes the final sparse weight over ``weight_grid``
   (the learned ``w`` is one of the candidates);
4. **output**: ``model/`` (the trained encoder) and ``index/``, a
   :class:`~medrank.retrieval.concept.ConceptRetriever` over MEDIC names + synonyms with the
   trained encoder and the tuned weight, which ``medrank evaluate --dataset ncbi-disease --test FILE
   --index RUN/index`` reads.

With ``abbreviations`` a mention's abbreviation is expanded from its own document
(:mod:`medrank.data.abbreviations`) in training and evaluation, as BioSyn does with Ab3P.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.records import Concept, ConceptDataset
from medrank.training import Callback, Trainer, TrainingArgs, check_run_config, recipe_settings
from medrank.utils.io import atomic_write_json

log = logging.getLogger(__name__)

TASK = "biosyn"
REPORT_METRICS = ("acc@1", "acc@5", "mrr")
#: settings that only shape the final index and figures, not the training: a finished run may be finished again
FINISH_ONLY = ("dictionary_mentions", "exact_names_first")
#: ncbi-disease: train (minus the carve-out) / devel; bc5cdr-disease: the training part of the BC5CDR carve-out
#: (minus the carve-out) / its held-out documents, both against MEDIC
DATASETS = ("ncbi-disease", "bc5cdr-disease")


@dataclass
class BioSynConfig(TrainingArgs):
    """One BioSyn run. Defaults: BioSyn's recipe (top 20 candidates, half sparse; batch 16) on MiniLM."""

    task: str = TASK
    name: str = "biosyn"
    dataset: str = "ncbi-disease"
    encoder: str = "minilm"
    max_length: int = 32
    train_layers: int | None = None  # None: every block (full fine-tuning); n: the top n over a cached bottom
    topk: int = 20
    sparse_ratio: float = 0.5  # share of the candidates taken by the sparse score
    temperature: float = 0.05  # cosines live in [-1, 1]: the softmax needs a scale
    sparse_weight: float = 1.0  # initial w
    sparse_weight_lr: float = 0.01
    weight_grid: list[float] = field(default_factory=lambda: [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0])
    abbreviations: bool = True
    # BioSyn's dictionaries: the training documents' mention names join MEDIC as synonyms of their concepts
    # (the carve-out is scored against MEDIC + the names of the other training documents); only the final
    # index and figures use it, so it may change between a run and its resumption
    dictionary_mentions: bool = False
    # with abbreviations and dictionary_mentions: a mention whose form as written is a name the training corpus
    # annotates is looked up as written, not expanded (the exact match against the training annotations runs
    # before abbreviation expansion in sieve-based normalisers, D'Souza & Ng, ACL 2015). MEDIC's own short
    # forms are not such evidence: "DM" is an OMIM synonym, and the corpus means the MeSH concept by it.
    exact_names_first: bool = True
    tune_fraction: float = 0.1
    batch_size: int = 16
    lr: float = 2e-5
    weight_decay: float = 0.01
    epochs: int = 3
    max_steps_per_epoch: int | None = None
    select_metric: str = "acc@1"
    keep_checkpoints: int = 1
    save_model: bool = True
    show_progress: bool = True
    data_root: str | None = None
    cache_dir: str | None = None

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> BioSynConfig:
        """A validated config from a mapping (unknown keys and wrong types are refused)."""
        return cls.checked(cfg, "biosyn config", "unknown {what} key(s) {unknown}; known: {known}")

    def validate(self) -> None:
        checks = (
            (self.task == TASK, f"task must be {TASK!r}, got {self.task!r}"),
            (self.dataset in DATASETS, f"dataset must be one of {DATASETS}, got {self.dataset!r}"),
            (not self.dictionary_mentions or self.dataset == "ncbi-disease",
             "dictionary_mentions is only implemented for ncbi-disease"),
            (self.topk >= 2, f"topk must be >= 2, got {self.topk}"),
            (0.0 <= self.sparse_ratio <= 1.0, f"sparse_ratio must be in [0, 1], got {self.sparse_ratio}"),
            (self.temperature > 0, f"temperature must be > 0, got {self.temperature}"),
            (self.sparse_weight >= 0 and self.sparse_weight_lr >= 0, "sparse_weight and sparse_weight_lr must be >= 0"),
            (all(w >= 0 for w in self.weight_grid), "weight_grid values must be >= 0"),
            (0.0 < self.tune_fraction < 0.5, f"tune_fraction must be in (0, 0.5), got {self.tune_fraction}"),
            (self.batch_size >= 1 and self.epochs >= 1 and self.lr > 0, "batch_size, epochs >= 1 and lr > 0"),
            (self.max_length >= 8, f"max_length must be >= 8, got {self.max_length}"),
            (self.train_layers is None or self.train_layers >= 1, "train_layers must be >= 1 or null (all)"),
            (self.select_metric in REPORT_METRICS, f"select_metric must be one of {REPORT_METRICS}"),
        )
        if problems := [message for ok, message in checks if not ok]:
            raise ValueError(f"biosyn config {self.name!r}: {'; '.join(problems)}")


# -- data ------------------------------------------------------------------------------------------


@dataclass
class BioSynData:
    train: ConceptDataset  # the training documents minus the carve-out
    tune: ConceptDataset  # the fixed-seed carve-out of training documents (selection, weight tuning)
    devel: ConceptDataset  # reported only
    vocabulary: tuple[Concept, ...]


def split_documents(dataset: ConceptDataset, fraction: float, seed: int) -> tuple[ConceptDataset, ConceptDataset]:
    """(rest, carve-out): a fixed-seed ``fraction`` of the documents, every mention of a document on one side."""
    from medrank.data import subset

    pmids = sorted({str(q.meta["pmid"]) for q in dataset.queries})
    rng = np.random.default_rng(seed)
    held = set(rng.permutation(pmids)[: max(1, round(fraction * len(pmids)))].tolist())
    tune = [q.id for q in dataset.queries if str(q.meta["pmid"]) in held]
    rest = [q.id for q in dataset.queries if str(q.meta["pmid"]) not in held]
    return subset(dataset, rest, f"{dataset.name}:train"), subset(dataset, tune, f"{dataset.name}:tune")


def load_ncbi(root: str | None, abbreviations: bool, fraction: float, seed: int) -> BioSynData:
    """NCBI-disease train (minus a carve-out), the carve-out and devel, abbreviations expanded or not."""
    from medrank.config import dataset_dir
    from medrank.data import load_ncbi_disease, parse_pubtator
    from medrank.data.abbreviations import expand_dataset
    from medrank.data.ncbi import SPLIT_FILES

    sets = {}
    for split in ("train", "devel"):
        ds = load_ncbi_disease(split, root=root)
        if abbreviations:
            docs = parse_pubtator(dataset_dir("ncbi-disease", root) / SPLIT_FILES[split])
            ds = expand_dataset(ds, [(d.pmid, d.text) for d in docs])
        sets[split] = ds
    train, tune = split_documents(sets["train"], fraction, seed)
    return BioSynData(train, tune, sets["devel"], sets["devel"].vocabulary)


def load_bc5cdr_disease(root: str | None, abbreviations: bool, fraction: float, seed: int) -> BioSynData:
    """BC5CDR disease mentions against MEDIC: the training part of the fixed-seed document carve-out
    (:func:`medrank.data.bc5cdr.load_bc5cdr_carve_out`) minus a ``fraction`` of its documents for selection,
    and the held-out documents in the place of devel (reported only)."""
    from medrank.config import dataset_dir
    from medrank.data import parse_pubtator
    from medrank.data.abbreviations import expand_dataset
    from medrank.data.bc5cdr import DATASET, TRAIN_FILE, load_bc5cdr_carve_out

    part = load_bc5cdr_carve_out("Disease", root=root)
    train, held = part.train, part.test
    if abbreviations:
        texts = [(d.pmid, d.text) for d in parse_pubtator(dataset_dir(DATASET, root) / TRAIN_FILE)]
        train, held = expand_dataset(train, texts), expand_dataset(held, texts)
    rest, tune = split_documents(train, fraction, seed)
    return BioSynData(rest, tune, held, part.vocabulary)


def training_mentions(dataset: ConceptDataset) -> tuple[list[str], list[frozenset[str]]]:
    """Distinct mention texts and, for each, every gold id it is annotated with (composites: all parts)."""
    gold: dict[str, set[str]] = {}
    for q in dataset.queries:
        gold.setdefault(q.text, set()).update(dataset.qrels.relevant(q.id))
    texts = sorted(gold)
    return texts, [frozenset(gold[t]) for t in texts]


# -- model -----------------------------------------------------------------------------------------


class BioSynModel(nn.Module):
    """The encoder's trainable part and the sparse weight ``w``: what the trainer optimises and checkpoints."""

    def __init__(self, bi: Any, sparse_weight: float) -> None:
        super().__init__()
        self.bi = bi
        self.trainable = bi.trainable
        self.sparse_weight = nn.Parameter(torch.tensor(float(sparse_weight)))

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:  # only what is trained: not the frozen bottom
        out = {f"trainable.{k}": v for k, v in self.trainable.state_dict().items()}
        out["sparse_weight"] = self.sparse_weight.detach()
        return out

    def load_state_dict(self, state: Any, strict: bool = True, assign: bool = False) -> Any:
        self.trainable.load_state_dict({k[len("trainable."):]: v for k, v in state.items() if k.startswith("trainable.")})
        with torch.no_grad():
            self.sparse_weight.copy_(state["sparse_weight"])
        return None


def top_entries(scores: np.ndarray, k: int, exclude: list[set[int]] | None = None) -> list[list[int]]:
    """Per row, the ``k`` highest-scoring entry positions (skipping ``exclude[row]``), best first."""
    out = []
    for r, row in enumerate(scores):
        skip = exclude[r] if exclude is not None else set()
        depth = min(len(row), k + len(skip))
        idx = np.argpartition(-row, depth - 1)[:depth]
        idx = idx[np.argsort(-row[idx], kind="stable")]
        out.append([int(i) for i in idx if int(i) not in skip][:k])
    return out


class BioSynTask:
    """One run's data, model, candidates, loss and evaluation, for the shared :class:`Trainer`."""

    def __init__(self, cfg: BioSynConfig) -> None:
        from medrank.encoders import load_encoder
        from medrank.index import CharTfidfIndex
        from medrank.losses import SynonymMarginalizationLoss
        from medrank.models import BiEncoder
        from medrank.retrieval.concept import concept_entries

        self.cfg = cfg
        load = load_ncbi if cfg.dataset == "ncbi-disease" else load_bc5cdr_disease
        self.data = load(cfg.data_root, cfg.abbreviations, cfg.tune_fraction, cfg.seed)
        self.texts, self.gold = training_mentions(self.data.train)
        self.entry_ids, self.entry_texts, entry_items = concept_entries(self.data.vocabulary)
        self.entry_items = np.array(entry_items, dtype=object)
        self.sparse = CharTfidfIndex().build(self.entry_ids, self.entry_texts, entry_items)
        encoder = load_encoder(cfg.encoder)
        encoder.max_length = min(encoder.max_length, cfg.max_length)
        self.bi = BiEncoder(encoder, train_layers=cfg.train_layers, cache=True)
        self.cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else _cache_dir()
        if self.bi.use_cache:
            self.bi.load_cache(self.cache_dir)
        self._cached = self.bi.cache_size()
        self.model = BioSynModel(self.bi, cfg.sparse_weight)
        self.loss = SynonymMarginalizationLoss(cfg.temperature)
        n_sparse = round(cfg.topk * cfg.sparse_ratio)
        # the sparse half never changes: mined once
        self.sparse_candidates = top_entries(self.sparse.entry_scores(self.texts), n_sparse) if n_sparse else [[] for _ in self.texts]
        self.candidates: list[list[int]] = []
        self.entry_vectors: np.ndarray | None = None  # the current encoder's entry vectors (refreshed by evaluate)
        self.vectors_epoch: int | None = None  # the epoch whose weights made them
        self.rng = np.random.default_rng(cfg.seed)
        self.epoch_stats: dict[int, dict[str, Any]] = {}

    # -- candidates ------------------------------------------------------------------------------
    def encode_entries(self) -> np.ndarray:
        self.entry_vectors = self.bi.encode(self.entry_texts, "passage", batch_size=256)
        return self.entry_vectors

    def mine(self, epoch: int) -> None:
        t0 = time.perf_counter()
        vectors = self.entry_vectors if self.entry_vectors is not None else self.encode_entries()
        queries = self.bi.encode(self.texts, "query", batch_size=256)
        n_dense = self.cfg.topk - len(self.sparse_candidates[0]) if self.sparse_candidates else self.cfg.topk
        dense: list[list[int]] = []
        for start in range(0, len(self.texts), 256):
            block = queries[start : start + 256] @ vectors.T
            taken = [set(c) for c in self.sparse_candidates[start : start + 256]]
            dense += top_entries(block, n_dense, taken)
        self.candidates = [s + d for s, d in zip(self.sparse_candidates, dense, strict=True)]
        with_positive = sum(any(self.entry_items[i] in g for i in c) for c, g in zip(self.candidates, self.gold, strict=True))
        self.epoch_stats[epoch] = {"mining_seconds": round(time.perf_counter() - t0, 2),
                                   "mentions_with_a_positive_candidate": round(with_positive / len(self.texts), 4)}

    # -- training --------------------------------------------------------------------------------
    def steps_per_epoch(self) -> int:
        return -(-len(self.texts) // self.cfg.batch_size)

    def batches(self, epoch: int) -> list[np.ndarray]:
        order = self.rng.permutation(len(self.texts))
        return [order[i : i + self.cfg.batch_size] for i in range(0, len(order), self.cfg.batch_size)]

    def loss_fn(self, batch: np.ndarray) -> torch.Tensor:
        mentions = [self.texts[i] for i in batch]
        cand = np.array([self.candidates[i] for i in batch])
        names = list(dict.fromkeys(self.entry_texts[e] for e in cand.ravel()))
        where = {n: j for j, n in enumerate(names)}
        q = self.bi.embed(mentions, "query")
        c = self.bi.embed(names, "passage")
        cols = torch.as_tensor([[where[self.entry_texts[e]] for e in row] for row in cand])
        dense = torch.einsum("bd,bkd->bk", q, c[cols])
        sparse = torch.as_tensor(self.sparse.pair_scores(mentions, cand))
        scores = dense + self.model.sparse_weight * sparse
        positives = torch.as_tensor([[self.entry_items[e] in self.gold[i] for e in row] for i, row in zip(batch, cand, strict=True)])
        return self.loss(scores, positives)

    # -- evaluation ------------------------------------------------------------------------------
    def scores(self, dataset: ConceptDataset, weights: list[float]) -> dict[float, dict[str, float]]:
        """Acc@1 / Acc@5 / MRR of the current encoder on ``dataset`` for each sparse weight (``inf``: sparse only)."""
        return weight_sweep(self.bi.as_encoder(), self.entry_vectors, self.sparse, self.entry_items, dataset, weights)

    def evaluate(self, epoch: int) -> dict[str, float]:
        t0 = time.perf_counter()
        self.encode_entries()
        self.vectors_epoch = epoch
        w = float(self.model.sparse_weight.detach())
        tune = self.scores(self.data.tune, [w])[w]
        devel = self.scores(self.data.devel, [w])[w]
        out: dict[str, Any] = {**{k: round(v, 6) for k, v in tune.items()}, "sparse_weight": round(w, 5)}
        out.update({f"devel_{k}": round(v, 6) for k, v in devel.items()})
        out.update(self.epoch_stats.get(epoch, {}))
        out["eval_seconds"] = round(time.perf_counter() - t0, 2)
        return out

    def save_cache_if_grown(self) -> None:
        if self.bi.use_cache and self.bi.cache_size() > self._cached:
            self.bi.save_cache(self.cache_dir)
            self._cached = self.bi.cache_size()


def weight_sweep(
    encoder: Any, entry_vectors: np.ndarray | None, sparse: Any, entry_items: np.ndarray,
    dataset: ConceptDataset, weights: list[float], k: int = 5,
) -> dict[float, dict[str, float]]:
    """Metrics of ``dense + w · sparse`` for each ``w`` (``inf``: sparse only), scoring every entry exactly."""
    from medrank.index.char_tfidf import rank_entries
    from medrank.metrics import evaluate

    texts = [q.text for q in dataset.queries]
    runs: dict[float, dict[str, Any]] = {w: {} for w in weights}
    q = encoder.encode(texts, kind="query", batch_size=256, show_progress=False) if entry_vectors is not None else None
    for start in range(0, len(texts), 128):
        sp = sparse.entry_scores(texts[start : start + 128])
        de = q[start : start + 128] @ entry_vectors.T if q is not None else np.zeros_like(sp)
        for w in weights:
            fused = sp if np.isinf(w) else de + w * sp
            for query, row in zip(dataset.queries[start : start + 128], fused, strict=True):
                runs[w][query.id] = rank_entries(query.id, row, entry_items, k)
    return {w: evaluate(dataset.qrels, runs[w], list(REPORT_METRICS)) for w in weights}


class CandidateMining(Callback):
    """Re-mines every mention's candidates with the current encoder at the start of each epoch."""

    def __init__(self, task: BioSynTask) -> None:
        self.task = task

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        self.task.mine(epoch)
        self.task.save_cache_if_grown()


def _cache_dir() -> Path:
    from medrank.config import cache_dir

    return cache_dir() / "symptom-frozen"


# -- the run ---------------------------------------------------------------------------------------


def make_trainer(task: BioSynTask, cfg: BioSynConfig, output_dir: Path) -> Trainer:
    """The shared :class:`Trainer` over the encoder (``lr``) and the sparse weight (``sparse_weight_lr``)."""
    encoder_params = [p for p in task.model.trainable.parameters() if p.requires_grad]
    groups = [{"params": encoder_params, "lr": cfg.lr, "weight_decay": cfg.weight_decay}]
    if cfg.sparse_weight_lr > 0:
        groups.append({"params": [task.model.sparse_weight], "lr": cfg.sparse_weight_lr, "weight_decay": 0.0})
    else:
        task.model.sparse_weight.requires_grad_(False)
    return Trainer(
        task.model, task.loss_fn, task.batches, output_dir, optimizer=torch.optim.AdamW(groups),
        steps_per_epoch=task.steps_per_epoch(), evaluate=task.evaluate, select_metric=cfg.select_metric,
        callbacks=[CandidateMining(task)], **recipe_settings(cfg),
    )


def train_biosyn(config: dict[str, Any] | BioSynConfig, output_dir: str | Path, resume: bool = True) -> dict[str, Any]:
    """Train one BioSyn model; the ``medrank train`` entry point for ``task: biosyn``."""
    from medrank.config import seed_everything, set_run_threads

    cfg = config if isinstance(config, BioSynConfig) else BioSynConfig.from_dict(dict(config))
    output_dir = Path(output_dir)
    started = time.perf_counter()
    set_run_threads(cfg.threads)
    seed_everything(cfg.seed)
    check_run_config(output_dir, cfg.to_dict(), resume, ignore=FINISH_ONLY)
    task = BioSynTask(cfg)
    trainer = make_trainer(task, cfg, output_dir)
    trainer.fit(resume=resume)
    return finish_run(task, trainer, cfg, output_dir, started)


def finish_checkpointed(output_dir: str | Path) -> dict[str, Any]:
    """Write ``results.json``, ``model/`` and ``index/`` of a run stopped before its last epoch, from the
    epochs it completed (its best one by the carve-out). ``medrank train`` on the same config later
    resumes the training after them and writes the final ones."""
    import json

    from medrank.config import seed_everything, set_run_threads

    output_dir = Path(output_dir)
    started = time.perf_counter()
    cfg = BioSynConfig.from_dict(json.loads((output_dir / "config.json").read_text(encoding="utf-8")))
    set_run_threads(cfg.threads)
    seed_everything(cfg.seed)
    task = BioSynTask(cfg)
    trainer = make_trainer(task, cfg, output_dir)
    done = trainer.checkpoints()
    if not done:
        raise ValueError(f"{output_dir}: no complete epoch checkpointed yet")
    trainer.load_checkpoint(done[-1])
    return finish_run(task, trainer, cfg, output_dir, started)


def finish_run(task: BioSynTask, trainer: Trainer, cfg: BioSynConfig, output_dir: Path, started: float) -> dict[str, Any]:
    """Best epoch → the sparse weight tuned on the carve-out, devel figures, ``results.json``, ``model/``, ``index/``."""
    from medrank.index import CharTfidfIndex, DenseIndex, SparseDenseIndex
    from medrank.retrieval.concept import ConceptRetriever

    best = trainer.load_best()
    if task.entry_vectors is None or (best is not None and best != task.vectors_epoch):  # not the best epoch's vectors
        task.encode_entries()
    learned = float(task.model.sparse_weight.detach())
    grid = sorted({*cfg.weight_grid, round(learned, 4)})
    final = Dictionary(task.entry_ids, task.entry_texts, task.entry_items, task.entry_vectors, task.sparse, task.data.vocabulary)
    tune_dictionary = final
    if cfg.dictionary_mentions:
        tune_dictionary, final = mention_dictionaries(task, cfg)
    tuned = tune_dictionary.scores(task, task.data.tune, [*grid, float("inf")])
    chosen = max(grid, key=lambda w: (tuned[w][cfg.select_metric], -abs(w - learned)))
    devel = final.scores(task, task.data.devel, sorted({0.0, learned, chosen, float("inf")}))
    summary: dict[str, Any] = {
        "name": cfg.name,
        "best_epoch": best,
        "epochs_completed": trainer.state.epoch,
        "learned_sparse_weight": learned,
        "tuned_sparse_weight": chosen,
        "tune": {_key(w): m for w, m in tuned.items()},
        "devel": {
            "dense": devel[0.0], "sparse": devel[float("inf")],
            "fused_learned": devel[learned], "fused_tuned": devel[chosen],
        },
        "history": trainer.state.history,
        "train_mentions": len(task.texts),
        "tune_mentions": len(task.data.tune.queries),
        "devel_mentions": len(task.data.devel.queries),
        "dictionary": "MEDIC + training mentions" if cfg.dictionary_mentions else "MEDIC",
        "exact_names_first": bool(cfg.abbreviations and cfg.exact_names_first and cfg.dictionary_mentions),
        "entries": len(final.texts),
        "seconds": round(time.perf_counter() - started, 1),
        "config": cfg.to_dict(),
    }
    if cfg.save_model:
        from medrank.encoders.transformer import TransformerEncoder

        model_dir = (output_dir / "model").resolve()
        task.bi.encoder.save(model_dir)
        encoder = TransformerEncoder(model_dir, max_length=cfg.max_length, name=cfg.name)
        dense = DenseIndex(encoder)
        dense.entry_ids, dense.entry_texts, dense.entry_items = final.ids, final.texts, list(final.items)
        assert final.vectors is not None
        dense.build_from_vectors(final.vectors)
        sparse = CharTfidfIndex()
        sparse.entry_ids, sparse.entry_texts, sparse.entry_items = dense.entry_ids, dense.entry_texts, dense.entry_items
        sparse.matrix, sparse.matrix_t, sparse.vectorizer = final.sparse.matrix, final.sparse.matrix_t, final.sparse.vectorizer
        sparse._items = final.sparse._items
        ConceptRetriever(SparseDenseIndex.from_built(dense, sparse, chosen), final.vocabulary).save(output_dir / "index")
    atomic_write_json(output_dir / "results.json", summary)
    task.save_cache_if_grown()
    return summary


@dataclass
class Dictionary:
    """Entries of one vocabulary (every name and synonym), with the current encoder's vectors and a sparse index."""

    ids: list[str]
    texts: list[str]
    items: np.ndarray
    vectors: np.ndarray | None
    sparse: Any
    vocabulary: tuple[Concept, ...]
    #: the names the training corpus annotates (BioSyn's dictionary only): a mention written as one is not expanded
    annotated_names: tuple[str, ...] = ()

    def scores(self, task: BioSynTask, dataset: ConceptDataset, weights: list[float]) -> dict[float, dict[str, float]]:
        if task.cfg.abbreviations and task.cfg.exact_names_first and self.annotated_names:
            dataset = exact_names_as_written(dataset, self.annotated_names)
        return weight_sweep(task.bi.as_encoder(), self.vectors, self.sparse, self.items, dataset, weights)


def exact_names_as_written(dataset: ConceptDataset, names: Sequence[str]) -> ConceptDataset:
    """``dataset`` with every expanded mention whose form as written (``meta["unexpanded"]``, see
    :func:`medrank.data.abbreviations.expand_dataset`) is one of ``names`` (case-insensitively) put back as written."""
    from dataclasses import replace

    from medrank.records import Query

    known = {n.lower() for n in names}
    queries = tuple(Query(q.id, q.meta["unexpanded"], {k: v for k, v in q.meta.items() if k != "unexpanded"})
                    if str(q.meta.get("unexpanded", "")).lower() in known else q for q in dataset.queries)
    return replace(dataset, queries=queries)


def mention_dictionaries(task: BioSynTask, cfg: BioSynConfig) -> tuple[Dictionary, Dictionary]:
    """(for the carve-out, final): MEDIC + the mention names of the training documents outside the carve-out,
    and MEDIC + those of every training document. MEDIC's vectors are reused; the added names are encoded."""
    from medrank.config import dataset_dir
    from medrank.data import parse_pubtator
    from medrank.data.ncbi import SPLIT_FILES, augment_vocabulary, mention_vocabulary
    from medrank.index import CharTfidfIndex
    from medrank.retrieval.concept import concept_entries

    docs = parse_pubtator(dataset_dir("ncbi-disease", cfg.data_root) / SPLIT_FILES["train"])
    held = {str(q.meta["pmid"]) for q in task.data.tune.queries}
    known = dict(zip(task.entry_texts, range(len(task.entry_texts)), strict=False))
    assert task.entry_vectors is not None
    out = []
    for part in ([d for d in docs if d.pmid not in held], docs):
        mentions = mention_vocabulary(part)
        vocabulary = augment_vocabulary(task.data.vocabulary, mentions)
        ids, texts, items = concept_entries(vocabulary)
        new = sorted({t for t in texts if t not in known})
        new_vectors = task.bi.encode(new, "passage", batch_size=256) if new else np.zeros((0, task.entry_vectors.shape[1]), np.float32)
        extra = dict(zip(new, new_vectors, strict=True))
        vectors = np.stack([task.entry_vectors[known[t]] if t in known else extra[t] for t in texts]).astype(np.float32)
        sparse = CharTfidfIndex().build(ids, texts, items)
        out.append(Dictionary(ids, texts, np.array(items, dtype=object), vectors, sparse, vocabulary,
                              tuple(n for c in mentions for n in c.names)))
    return out[0], out[1]


def _key(w: float) -> str:
    return "sparse-only" if np.isinf(w) else f"w={w:g}"
