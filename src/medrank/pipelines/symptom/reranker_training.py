"""Training the symptom term re-ranker (:mod:`~medrank.pipelines.symptom.reranker`): task ``symptom-reranker``.

Each training phrase of the first stage's run makes a group: its gold term first, then negatives drawn from the
first stage's own top candidates for it and, for a share of the groups, one of the gold term's is-a siblings.
The cross-encoder scores the group jointly and is trained with the listwise softmax
(:class:`~medrank.losses.listwise_softmax.ListwiseSoftmaxLoss`) by the core :class:`~medrank.training.Trainer`
(checkpoints every epoch, resumable); the epoch with the best re-ranked validation Acc@1 is kept, then the set
decision is fitted over the re-ranked spans (:func:`~medrank.pipelines.symptom.synthetic.fit_layperson_sets`).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.pipelines.symptom.reranker import META_FILE, META_FORMAT, TERM_TEXT, PathLike, TermReranker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RerankerSettings:
    """The re-ranker's recipe (the ``symptom-reranker`` config keys besides ``first_stage`` and ``output_dir``)."""

    #: the weights it starts from: an encoder alias or folder, or ``"first-stage"`` for the run's own trained encoder
    #: (it already maps layperson words to the terms' vocabulary; the head is new either way)
    base: str = "first-stage"
    max_length: int = 48
    #: the gold term and ``group - 1`` negatives per training phrase
    group: int = 8
    #: the first stage's top ``negatives_from`` candidates are the pool of negatives
    negatives_from: int = 10
    #: the share of groups whose last negative is one of the gold term's is-a siblings
    sibling_share: float = 0.5
    #: candidates re-scored per query at inference (and at validation)
    depth: int = 10
    batch_size: int = 16
    epochs: int = 2
    lr: float = 5e-5
    warmup_ratio: float = 0.1
    seed: int = 13
    threads: int | None = None
    show_progress: bool = True

    def __post_init__(self) -> None:
        for name in ("max_length", "group", "negatives_from", "depth", "batch_size", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (2 if name == "group" else 1):
                raise ValueError(f"{name} must be a whole number >= {2 if name == 'group' else 1}, got {value!r}")
        if not 0.0 <= self.sibling_share <= 1.0:
            raise ValueError(f"sibling_share must be in [0, 1], got {self.sibling_share!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RerankerSettings:
        from medrank.config import known_keys_only

        return cls(**known_keys_only(cls, d, "re-ranker settings"))


@dataclass(frozen=True)
class TrainingGroup:
    """One phrase, its gold term first, then the pool of first-stage negatives and the gold term's siblings."""

    phrase: str
    gold: str
    negatives: tuple[str, ...]
    siblings: tuple[str, ...]


def training_groups(phrases: Sequence[str], gold: Sequence[set[str]], hits: Sequence[Sequence[str]],
                    siblings: Callable[[str], Sequence[str]], negatives_from: int) -> list[TrainingGroup]:
    """One :class:`TrainingGroup` per (phrase, gold term): the negatives are the first ``negatives_from`` hits that
    are not gold, the siblings those of the gold term that are not gold either."""
    groups = []
    for phrase, g, row in zip(phrases, gold, hits, strict=True):
        negatives = tuple(c for c in row if c not in g)[:negatives_from]
        for term in sorted(g):
            groups.append(TrainingGroup(phrase, term, negatives, tuple(s for s in siblings(term) if s not in g)))
    return groups


def sample_group(group: TrainingGroup, size: int, sibling_share: float, vocabulary: Sequence[str],
                 rng: random.Random) -> list[str]:
    """``[gold, negative, …]`` (``size`` terms): negatives drawn from the group's pool, the last one a sibling for
    ``sibling_share`` of the draws (when the term has one), random vocabulary terms when the pool runs short."""
    need = size - 1
    picked = rng.sample(list(group.negatives), min(need, len(group.negatives)))
    siblings = [s for s in group.siblings if s not in picked]
    if siblings and rng.random() < sibling_share:
        if len(picked) == need:
            picked[-1] = rng.choice(siblings)
        else:
            picked.append(rng.choice(siblings))
    taken = {group.gold, *picked}
    while len(picked) < need:
        term = rng.choice(vocabulary)
        if term not in taken:
            picked.append(term)
            taken.add(term)
    return [group.gold, *picked]


def reranked_accuracy(reranker: TermReranker, phrases: Sequence[str], gold: Sequence[set[str]],
                      hits: Sequence[Sequence[tuple[str, float]]]) -> dict[str, float]:
    """Acc@1 and Acc@5 of the first stage's hits and of the same hits re-ranked (fractions)."""
    reranked = reranker.rerank(list(phrases), hits)

    def acc(rows: Sequence[Sequence[tuple[str, float]]], k: int) -> float:
        return float(np.mean([bool({c for c, _ in row[:k]} & g) for row, g in zip(rows, gold, strict=True)])) if gold else 0.0

    return {"acc@1": acc(reranked, 1), "acc@5": acc(reranked, 5), "first_stage_acc@1": acc(hits, 1),
            "first_stage_acc@5": acc(hits, 5), f"first_stage_recall@{reranker.depth}": acc(hits, reranker.depth)}


#: the first-stage weights tried (the first stage's scores are cosines, the cross-encoder's logits span several units)
FIRST_STAGE_WEIGHTS = (0.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)


class ScoredPairs:
    """A pair scorer that looks up logits computed once (``score_pairs`` of ``scorer`` over ``hits``' top ``depth``
    for each phrase), so the same pairs re-ranked several ways (weights, depths) are scored only once."""

    def __init__(self, reranker: TermReranker, phrases: Sequence[str], hits: Sequence[Sequence[tuple[str, float]]]) -> None:
        pairs = [(p, reranker.text(c)) for p, row in zip(phrases, hits, strict=True) for c, _ in row[: reranker.depth]]
        scores = reranker.scorer.score_pairs([p for p, _ in pairs], [t for _, t in pairs])
        self.logits = dict(zip(pairs, scores, strict=True))

    def score_pairs(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return np.array([self.logits[pair] for pair in zip(queries, texts, strict=True)], dtype=np.float32)


def choose_first_stage_weight(reranker: TermReranker, phrases: Sequence[str], gold: Sequence[set[str]],
                              hits: Sequence[Sequence[tuple[str, float]]],
                              weights: Sequence[float] = FIRST_STAGE_WEIGHTS, scored: ScoredPairs | None = None) -> float:
    """The weight of :data:`FIRST_STAGE_WEIGHTS` with the best re-ranked Acc@1 on ``phrases`` (the smallest of the
    best); the cross-encoder scores each pair once (``scored``, when given, holds those scores already)."""
    scored = scored or ScoredPairs(reranker, phrases, hits)
    best, best_acc = 0.0, -1.0
    for w in weights:
        acc = reranked_accuracy(TermReranker(scored, reranker.concepts, reranker.depth, first_stage_weight=w),
                                phrases, gold, hits)["acc@1"]
        if acc > best_acc + 1e-12:
            best, best_acc = float(w), acc
    return best


def train_term_reranker(config: Mapping[str, Any], output_dir: PathLike | None = None, resume: bool = True) -> dict[str, Any]:
    """Train the re-ranker of a trained ``hpo-layperson`` run (``config["first_stage"]``) and fit its set decision;
    writes ``FIRST_STAGE/reranker/`` unless ``output_dir`` says otherwise (see the module docstring)."""
    from medrank.config import seed_everything, set_run_threads
    from medrank.losses.listwise_softmax import ListwiseSoftmaxLoss
    from medrank.models.pair_classifier import PairScorer, load_pair_classifier
    from medrank.pipelines.symptom.config import SymptomConfig
    from medrank.pipelines.symptom.sets import HpoHierarchy
    from medrank.pipelines.symptom.task import load_task_data
    from medrank.training import Trainer
    from medrank.training.trainer import check_run_config
    from medrank.utils.io import atomic_dir, atomic_write_json

    config = dict(config)
    config.pop("task", None)
    config.pop("name", None)
    first_stage = config.pop("first_stage", None)
    out = config.pop("output_dir", None)
    if not first_stage:
        raise ValueError("a symptom-reranker config needs first_stage: the trained hpo-layperson run it re-ranks")
    run_dir = Path(first_stage)
    run_config_path = run_dir / "config.json"
    if not run_config_path.is_file() or not (run_dir / "index-vocab").exists():
        raise FileNotFoundError(f"{run_dir} is not a finished symptom run (config.json and index-vocab expected)")
    run_cfg = SymptomConfig.from_dict(json.loads(run_config_path.read_text(encoding="utf-8")))
    if run_cfg.dataset != "hpo-layperson":
        raise ValueError(f"the term re-ranker is trained on hpo-layperson runs, {run_dir} is a {run_cfg.dataset!r} run")
    settings = RerankerSettings.from_dict(config)
    output_dir = Path(output_dir or out or TermReranker.folder(run_dir))
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    set_run_threads(settings.threads)
    seed_everything(settings.seed)
    check_run_config(output_dir, {**asdict(settings), "first_stage": str(run_dir)}, resume)

    # the first stage as trained: its encoder over its own validation vocabulary (the run's index-vocab)
    from medrank.pipelines.symptom.artefacts import open_run_index

    data = load_task_data(run_cfg)
    first = open_run_index(run_dir, run_dir / "index-vocab", "torch", "exact")
    vocabulary = list(first.concepts)

    def first_hits(queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [list(zip(r.ids, r.scores, strict=True)) for r in first.search(list(queries), k=k)]

    train_phrases = [q.text for q in data.train.queries]
    train_gold = [set(data.train.qrels.relevant(q.id)) for q in data.train.queries]
    valid_phrases = [q.text for q in data.valid.queries]
    valid_gold = [set(data.valid.qrels.relevant(q.id)) for q in data.valid.queries]
    log.info("first-stage candidates for %d training and %d validation phrases", len(train_phrases), len(valid_phrases))
    train_top = [[c for c, _ in row] for row in first_hits(train_phrases, settings.negatives_from + 5)]
    valid_hits = first_hits(valid_phrases, max(settings.depth, 5))
    hierarchy = HpoHierarchy()
    children: dict[str, list[str]] = {}
    for cid in vocabulary:
        for parent in hierarchy.parents(cid):
            children.setdefault(parent, []).append(cid)

    def siblings(term: str) -> list[str]:
        return sorted({c for p in hierarchy.parents(term) for c in children.get(p, []) if c != term})

    groups = training_groups(train_phrases, train_gold, train_top, siblings, settings.negatives_from)
    model, tokenizer = load_pair_classifier(str(run_dir / "model") if settings.base == "first-stage" else settings.base)
    scorer = PairScorer(model, tokenizer, settings.max_length)
    reranker = TermReranker(scorer, first.concepts, settings.depth)
    loss = ListwiseSoftmaxLoss()

    def batches(epoch: int) -> list[list[list[str]]]:
        # one generator per epoch: a resumed run draws the same groups as an uninterrupted one
        rng = random.Random(settings.seed * 1000 + epoch)
        order = list(range(len(groups)))
        rng.shuffle(order)
        drawn = [(groups[i].phrase, sample_group(groups[i], settings.group, settings.sibling_share, vocabulary, rng))
                 for i in order]
        return [[[p, *g] for p, g in drawn[s : s + settings.batch_size]] for s in range(0, len(drawn), settings.batch_size)]

    def loss_fn(batch: list[list[str]]) -> torch.Tensor:
        queries = [row[0] for row in batch for _ in row[1:]]
        texts = [reranker.text(c) for row in batch for c in row[1:]]
        logits = scorer.logits(scorer.features(queries, texts))
        return loss(logits.view(len(batch), settings.group))

    def evaluate(epoch: int) -> dict[str, float]:
        return reranked_accuracy(reranker, valid_phrases, valid_gold, valid_hits)

    trainer = Trainer(model, loss_fn, batches, output_dir, epochs=settings.epochs, lr=settings.lr,
                      warmup_ratio=settings.warmup_ratio, steps_per_epoch=-(-len(groups) // settings.batch_size),
                      evaluate=evaluate, select_metric="acc@1", keep_checkpoints=1, seed=settings.seed,
                      show_progress=settings.show_progress)
    trainer.fit(resume=resume)
    best = trainer.load_best()
    model.eval()
    # the weight of the first stage's score in the re-ranked score, chosen on the validation phrases (the smallest of
    # the best): the cross-encoder alone can rank below its first stage, and the two err apart
    scored = ScoredPairs(reranker, valid_phrases, valid_hits)
    weight = choose_first_stage_weight(reranker, valid_phrases, valid_gold, valid_hits, scored=scored)
    reranker.first_stage_weight = weight

    def validation(depth: int, w: float) -> dict[str, float]:
        return reranked_accuracy(TermReranker(scored, first.concepts, depth, first_stage_weight=w), valid_phrases,
                                 valid_gold, valid_hits)

    meta = {"format": META_FORMAT, "term_text": TERM_TEXT, "first_stage": str(run_dir), "base": settings.base,
            "max_length": settings.max_length, "depth": settings.depth, "first_stage_weight": weight,
            "best_epoch": best, "groups": len(groups), "settings": asdict(settings),
            "validation": validation(settings.depth, weight),
            "validation_cross_encoder_alone": validation(settings.depth, 0.0),
            # the same validation re-ranking only the top 5 (half the pairs per span, half the time)
            "validation_depth_5": validation(5, weight)}
    with atomic_dir(output_dir / "model") as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
    # the set decision over the re-ranked search, fitted as the run's own (synthetic complaints from its validation terms)
    from medrank.pipelines.symptom.synthetic import fit_layperson_sets

    valid_terms = [t for g in valid_gold for t in sorted(g)]
    # the first stage's query encoder (open_run_index loaded it with the settings its index recorded)
    sets = fit_layperson_sets(first.index.encoder, valid_terms, output_dir, seed=run_cfg.seed,
                              use_definitions=run_cfg.use_definitions, reranker=reranker, write_index=False,
                              data_root=run_cfg.data_root)
    meta["sets_hpo"] = sets
    meta["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_json(output_dir / META_FILE, meta)
    return meta
