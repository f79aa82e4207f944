"""One configured experiment: data split → word2vec → matcher → (transfer) → training → summary.

This is what ``medrank train configs/similar/*.yaml`` runs (task ``similar``)
and what the benchmark scripts call. The settings, their defaults and the file's
layout are :class:`~.config.SimilarConfig`; an example::

    task: similar
    dataset: chip-sts
    model: stmt
    seed: 13
    word2vec: {dim: 100, window: 5, epochs: 20}
    arch: {layers: 6, heads: 10, ff_dim: 200, hidden: 100, dropout: 0.1, head_features: concat-diff-prod}
    transfer: {enabled: true, loss: am-softmax, margin: 0.35, scale: 20, epochs: 4, lr: 0.001}
    train: {epochs: 8, batch_size: 64, lr: 0.001, scheduler: linear, warmup_ratio: 0.1, patience: 3,
            time_budget_minutes: 60}    # the budget covers data preparation, pre-training and training

Data hygiene: the validation side is carved from the visible file with
:func:`medrank.data.questions.split_pairs` (no question text on both sides);
every other source (word2vec corpus, transfer groups, extra pairs) drops any
question that appears on the validation side.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from medrank.config import seed_everything, set_run_threads
from medrank.data.questions import (
    QuestionPair,
    dataset_language,
    load_pairs_jsonl,
    load_question_pairs,
    question_groups,
    split_pairs,
    unique_questions,
)
from medrank.pipelines.similar.config import resolve_config
from medrank.pipelines.similar.matchers import (
    CrossEncoderMatcher,
    LinearMatcher,
    NeuralMatcher,
    PairMatcher,
)
from medrank.pipelines.similar.models.linear import TfidfFeaturizer
from medrank.pipelines.similar.text import QuestionTokenizer, TokenizerSpec, Word2VecConfig, cached_word2vec
from medrank.pipelines.similar.training import fit_matcher, pretrain_on_groups
from medrank.training import check_run_config
from medrank.utils.io import atomic_write_json

log = logging.getLogger(__name__)

def display_name(cfg: dict[str, Any]) -> str:
    if cfg.get("name"):
        return str(cfg["name"])
    name = cfg["model"]
    if cfg["model"] == "cross-encoder":
        name = f"cross-encoder ({cfg['cross_encoder']['model']})"
    if cfg["transfer"]["enabled"]:
        name += f" + transfer ({cfg['transfer']['loss']})"
    return name


def _outside(pairs: list[QuestionPair], banned: set[str]) -> list[QuestionPair]:
    return [p for p in pairs if p.text1 not in banned and p.text2 not in banned]


def prepare_data(cfg: dict[str, Any]) -> dict[str, Any]:
    """Split the target dataset and load the auxiliary datasets (validation texts removed)."""
    pairs = load_question_pairs(cfg["dataset"], cfg["data"])
    split = split_pairs(pairs, cfg["split"]["valid_fraction"], cfg["split"]["seed"])
    valid_texts = set(unique_questions(split.valid))
    extra: dict[str, list[QuestionPair]] = {}
    for name in sorted(set(cfg["word2vec"]["extra_datasets"]) | set(cfg["transfer"]["datasets"])):
        extra[name] = _outside(load_question_pairs(name, cfg["data"]), valid_texts)
    train = list(split.train) if cfg["use_labelled_train"] else []
    n_extra_pairs = 0
    if cfg["extra_train_pairs"]:
        generated = _outside(load_pairs_jsonl(cfg["extra_train_pairs"]), valid_texts)
        n_extra_pairs = len(generated)
        train += generated
    return {"train": train, "valid": split.valid, "dropped": len(split.dropped), "extra": extra,
            "valid_texts": valid_texts, "n_extra_train_pairs": n_extra_pairs}


def word2vec_corpus(cfg: dict[str, Any], data: dict[str, Any]) -> list[str]:
    """Training-side questions: the target's train side plus the extra datasets (validation texts removed)."""
    texts = unique_questions(data["train"])
    seen = set(texts)
    for name in cfg["word2vec"]["extra_datasets"]:
        for t in unique_questions(data["extra"][name]):
            if t not in seen:
                seen.add(t)
                texts.append(t)
    return texts


def transfer_groups(cfg: dict[str, Any], data: dict[str, Any]) -> list[list[str]]:
    """Groups = connected components of positive pairs (target train side + transfer datasets).

    KUAKE-QQR contributes its label-2 (equivalent) pairs: ``QuestionPair.label``
    is 1 exactly for those.
    """
    pairs = list(data["train"])
    for name in cfg["transfer"]["datasets"]:
        pairs += data["extra"][name]
    return question_groups(pairs)


def build_matcher(cfg: dict[str, Any], data: dict[str, Any]) -> tuple[PairMatcher, dict[str, Any]]:
    """The (untrained) matcher of ``cfg['model']`` and facts about its inputs."""
    language = dataset_language(cfg["dataset"])
    spec = TokenizerSpec(language=language, zh_mode=cfg["tokenizer"]["zh_mode"])
    info: dict[str, Any] = {"language": language, "tokenizer": vars(spec)}
    model = cfg["model"]
    if model == "cross-encoder":
        ce = cfg["cross_encoder"]
        return CrossEncoderMatcher(ce["model"], max_length=ce["max_length"], name=display_name(cfg)), info
    tokenizer = QuestionTokenizer(spec)
    if model == "lr-tfidf":
        train_texts = unique_questions(data["train"])
        tfidf = TfidfFeaturizer.fit(tokenizer.batch(train_texts), tuple(cfg["tfidf"]["ngram"]))
        info["tfidf_terms"] = tfidf.dim
        return LinearMatcher("tfidf", spec, tfidf=tfidf, name=display_name(cfg)), info
    w2v_cfg = {k: v for k, v in cfg["word2vec"].items() if k != "extra_datasets"}
    corpus = word2vec_corpus(cfg, data)
    t0 = time.perf_counter()
    vocab, vectors = cached_word2vec(tokenizer.batch(corpus), Word2VecConfig(seed=cfg["seed"], **w2v_cfg))
    info.update(word2vec_questions=len(corpus), vocabulary=len(vocab), word2vec_seconds=round(time.perf_counter() - t0, 1))
    if model == "lr-w2v":
        return LinearMatcher("w2v", spec, vocab=vocab, vectors=vectors, name=display_name(cfg)), info
    arch_args = {"dim": cfg["word2vec"]["dim"], **cfg["arch"]}
    return NeuralMatcher(model, spec, vocab, vectors, max_len=cfg["max_len"], arch_args=arch_args, name=display_name(cfg)), info


def run_experiment(config: dict[str, Any], output_dir: str | Path, resume: bool = True, show_progress: bool = True) -> dict[str, Any]:
    """Run one configured experiment and write ``summary.json`` (also returned)."""
    cfg = resolve_config(config)
    output_dir = Path(output_dir)
    check_run_config(output_dir, cfg, resume)
    if cfg["threads"] is not None:
        set_run_threads(cfg["threads"])
    seed_everything(cfg["seed"])
    t0 = time.perf_counter()
    data = prepare_data(cfg)
    matcher, info = build_matcher(cfg, data)
    summary: dict[str, Any] = {
        "name": display_name(cfg), "dataset": cfg["dataset"], "model": cfg["model"],
        "n_train_pairs": len(data["train"]), "n_valid_pairs": len(data["valid"]),
        "n_split_dropped_pairs": data["dropped"], "n_extra_train_pairs": data["n_extra_train_pairs"], **info,
    }
    if cfg["transfer"]["enabled"]:
        tr = cfg["transfer"]
        groups = transfer_groups(cfg, data)
        summary["transfer"] = pretrain_on_groups(
            matcher, groups, output_dir / "pretrain", loss=tr["loss"], margin=tr["margin"], scale=tr["scale"],  # type: ignore[arg-type]
            epochs=tr["epochs"], batch_size=tr["batch_size"], lr=tr["lr"], gamma=tr["gamma"],
            time_budget_s=60 * tr["time_budget_minutes"], seed=cfg["seed"], resume=resume, show_progress=show_progress,
        )
        summary["transfer"]["datasets"] = [cfg["dataset"] + " (train side)", *tr["datasets"]]
    t = cfg["train"]
    summary.update(fit_matcher(
        matcher, data["train"], data["valid"], output_dir,
        epochs=t["epochs"], batch_size=t["batch_size"], lr=t["lr"], weight_decay=t["weight_decay"],
        scheduler=t["scheduler"], gamma=t["gamma"], warmup_ratio=t["warmup_ratio"],
        max_steps_per_epoch=t["max_steps_per_epoch"], max_grad_norm=t["max_grad_norm"], patience=t["patience"],
        # the budget covers the whole experiment: pre-training time is taken out of the training budget
        time_budget_s=max(60.0, 60 * t["time_budget_minutes"] - (time.perf_counter() - t0)) if t["time_budget_minutes"] else None,
        eval_reserve_s=60 * t["eval_reserve_minutes"], eval_untrained=t["eval_untrained"],
        threshold=t["threshold"], seed=cfg["seed"], resume=resume, show_progress=show_progress,
    ))
    summary["total_seconds"] = round(time.perf_counter() - t0, 1)
    atomic_write_json(output_dir / "summary.json", summary)
    return summary
