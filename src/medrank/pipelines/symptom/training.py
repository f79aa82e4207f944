"""The iterative mine → train → re-mine loop of Bi-HardNCE (and every baseline), on the shared Trainer.

:func:`train_symptom` runs one model from a :class:`~medrank.pipelines.symptom.config.SymptomConfig`:

1. **data** — training queries, the validation split, the mining term set and the evaluation
   candidate sets (:func:`load_task_data`); positive pairs with merged duplicate texts
   (:func:`~medrank.pipelines.symptom.data.build_pair_data`);
2. **every epoch** (``on_epoch_begin`` of :class:`MiningCallback`) — pack the pairs into
   batches without in-batch false negatives, encode all training queries and terms with the
   previous epoch's model, calibrate E-FN's ``β`` on the validation pairs, mine each pair's
   hard-negative terms and queries (or draw random ones);
3. **train** one epoch with :class:`medrank.training.Trainer` (checkpoint per epoch, resume,
   progress bar), then **evaluate** NDCG@5 / Recall@5 on the validation split through the
   same :func:`~medrank.retrieval.concept.evaluate_retriever` protocol as the zero-shot
   baselines;
4. **finish** — reload the best epoch, evaluate on every candidate set (the ~4k gold terms
   and the 40k vocabulary), calibrate the detection threshold ``β``, save the encoder
   (``TransformerEncoder.save``) and a :class:`~medrank.retrieval.concept.ConceptRetriever`
   per candidate set, which ``medrank evaluate --index RUN/index-gold`` and
   ``medrank detect --model RUN`` load.

The run directory holds ``config.json``, ``history.json`` (metrics, ``β`` and mining time per
epoch), ``efn.json``, ``results.json``, ``curve.png``, ``checkpoints/`` and, with
``save_model``, ``model/`` and ``index-<candidates>/``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER
from medrank.pipelines.symptom.baselines import CrossEncoderTask
from medrank.pipelines.symptom.config import SymptomConfig
from medrank.pipelines.symptom.efn import AlphaSchedule
from medrank.pipelines.symptom.evaluation import detection_threshold
from medrank.pipelines.symptom.task import EVAL_METRICS, MiningCallback, SymptomTask
from medrank.training import Trainer, check_run_config, plot_history, recipe_settings
from medrank.utils.io import atomic_write_json

log = logging.getLogger(__name__)


# -- the whole run ---------------------------------------------------------------------------------


def make_trainer(task: Any, cfg: SymptomConfig, output_dir: Path) -> Trainer:
    return Trainer(
        task.training_module(),
        task.loss_fn,
        task.batches,
        output_dir,
        steps_per_epoch=task.steps_per_epoch(),
        **recipe_settings(cfg),
        evaluate=task.evaluate,
        select_metric=cfg.select_metric,
        callbacks=[MiningCallback(task)],
    )


def write_training_memory(train_set: Any, run_dir: Path, data_root: str | None = None) -> Any:
    """The :class:`.memory.TrainingMemory` of the texts a Chinese run was trained on, cut into clauses as the set
    detector cuts complaints, saved as ``run_dir/sets-memory.json``; ``None`` for an English dataset or no texts."""
    from medrank.pipelines.symptom.sets import MEMORY_FILE, SetDetector, span_lexicon
    from medrank.pipelines.symptom.spans import is_chinese

    texts = [q.text for q in train_set.queries]
    if not texts or not is_chinese("".join(texts[:50])):
        return None
    cutter = SetDetector(lambda queries, k: [], {}, language="zh", lexicon=span_lexicon(data_root))  # never searches
    memory = cutter.memorise(texts, [set(train_set.qrels.relevant(q.id)) for q in train_set.queries])
    memory.save(run_dir / MEMORY_FILE)
    return memory


def fit_set_decision(retriever: Any, eval_set: Any, path: Path, data_root: str | None = None,
                     memory: Any = None) -> dict[str, Any] | None:
    """Fit the set-level decision of a Chinese run (:meth:`.sets.SetDetector.fit`: which terms, how many) on the
    validation texts and their gold sets, and save it to ``path``; its set F1 on those texts, or ``None`` for an
    English dataset or when the texts cannot calibrate it (too few, or every candidate right or wrong).

    With ``memory`` (:func:`write_training_memory` of the texts the run was trained on) the decision also reads it.
    The model stays logistic: boosted trees decide CHIP-CDN's own texts better but do not carry over to colloquial
    complaints (发烧 → 发热 falls below their threshold), which are what the service reads."""
    from medrank.pipelines.symptom.spans import is_chinese

    texts = [q.text for q in eval_set.queries]
    if not texts or not is_chinese("".join(texts[:50])):
        return None
    gold = [set(eval_set.qrels.relevant(q.id)) for q in eval_set.queries]
    from medrank.pipelines.symptom.sets import SetDetector, span_lexicon

    detector = SetDetector.from_retriever(retriever, language="zh", lexicon=span_lexicon(data_root), memory=memory)
    t0 = time.perf_counter()
    try:
        calibration = detector.fit(texts, gold)
    except ValueError as exc:
        log.warning("no set decision fitted for %s: %s", path.name, exc)
        return None
    calibration.save(path)
    # the fit already decided every text with the chosen threshold: its F1 is the decided sets' on these texts
    return {"file": path.name, "features": list(calibration.features), "f1": calibration.info["fit_f1"],
            "seconds": round(time.perf_counter() - t0, 1)}


def finish_run(task: Any, trainer: Trainer, cfg: SymptomConfig, output_dir: Path, started: float) -> dict[str, Any]:
    """Best epoch → final metrics per candidate set, detection β, saved model and indexes, plots."""
    from medrank.retrieval.concept import evaluate_retriever

    best = trainer.load_best()
    if cfg.save_model and hasattr(task.model, "encoder") and cfg.loss != "cross-encoder":
        task.model.encoder.save((output_dir / "model").resolve())
    final: dict[str, Any] = {}
    alpha = AlphaSchedule(cfg.alpha_start, cfg.alpha_step, cfg.alpha_max)((best or 0) + 1)
    eval_set = task.eval_set()
    memory = None  # the training texts' memory, built once for every candidate set's decision
    for cand in cfg.eval_candidates:
        t0 = time.perf_counter()
        retriever = task.retriever(cand)
        res = evaluate_retriever(retriever, eval_set, EVAL_METRICS)
        if hasattr(task, "first_stage"):  # a re-ranker: report the stage it re-ranks on the same queries
            res["first_stage"] = evaluate_retriever(task.first_stage(cand), eval_set, EVAL_METRICS)
        res["detect_beta"] = detection_threshold(task.model, eval_set, retriever, alpha)
        res["detect_alpha"] = alpha
        res["build_and_eval_seconds"] = round(time.perf_counter() - t0, 2)
        final[cand] = res
        if cfg.save_model and cfg.loss != "cross-encoder":
            retriever.save(output_dir / f"index-{cand}")
            if cfg.fit_sets:
                memory = memory or write_training_memory(task.data.train, output_dir, cfg.data_root)
                res["sets"] = fit_set_decision(retriever, eval_set, output_dir / f"sets-{cand}.json", cfg.data_root,
                                               memory=memory)
        log.info("%s / %s: %s", cfg.name, cand, res["metrics"])
    layperson = None
    if cfg.dataset == "hpo-layperson" and cfg.save_model and cfg.fit_sets and cfg.loss != "cross-encoder":
        # what the service serves for English complaints: every HPO name and synonym, with its set decision
        from medrank.pipelines.symptom.synthetic import fit_layperson_sets

        valid_terms = [t for q in eval_set.queries for t in eval_set.qrels.relevant(q.id)]
        layperson = fit_layperson_sets(task.model.as_encoder(cfg.name), valid_terms, output_dir, seed=cfg.seed,
                                       use_definitions=cfg.use_definitions, data_root=cfg.data_root)
    history = trainer.state.history
    try:
        plot_history({cfg.name: history}, cfg.select_metric, output_dir / "curve.png", title=f"{cfg.name}: validation {cfg.select_metric}")
    except Exception as exc:  # noqa: BLE001 - a missing plot must not lose a finished run
        log.warning("could not plot the learning curve: %s", exc)
    efn_log = task.efn.log if getattr(task, "efn", None) is not None else []
    atomic_write_json(output_dir / "efn.json", efn_log)
    summary = {
        "name": cfg.name,
        "dataset": cfg.dataset,
        "best_epoch": best,
        "select_metric": cfg.select_metric,
        "results": final,
        **({"sets_hpo": layperson} if layperson else {}),
        "history": history,
        "efn": efn_log,
        "mining": list(task.epoch_stats.values()),
        "train_pairs": int(len(task.pairs.pairs)),
        "train_queries": task.pairs.n_queries,
        "mining_terms": task.pairs.n_terms,
        "valid_queries": len(eval_set.queries),
        "seconds": round(time.perf_counter() - started, 1),
        "config": cfg.to_dict(),
    }
    atomic_write_json(output_dir / "results.json", summary)
    if cfg.save_model and cfg.loss != "cross-encoder":
        atomic_write_json(
            output_dir / DETECTOR_MARKER,
            {
                "name": cfg.name,
                "candidates": {c: f"index-{c}" for c in cfg.eval_candidates} | ({"hpo": "index-hpo"} if layperson else {}),
                "beta": {c: final[c]["detect_beta"] for c in cfg.eval_candidates},
                "alpha": alpha,
                "k": 5,
            },
        )
    return summary


def train_symptom(config: dict[str, Any] | SymptomConfig, output_dir: str | Path, resume: bool = True) -> dict[str, Any]:
    """Train and evaluate one model; the ``medrank train`` entry point for ``task: symptom``."""
    from medrank.config import seed_everything, set_run_threads

    cfg = config if isinstance(config, SymptomConfig) else SymptomConfig.from_dict(dict(config))
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    set_run_threads(cfg.threads)
    seed_everything(cfg.seed)
    check_run_config(output_dir, cfg.to_dict(), resume)
    if cfg.loss == "cross-encoder":
        task: Any = CrossEncoderTask(cfg, output_dir)
    else:
        task = SymptomTask(cfg, output_dir)
    trainer = make_trainer(task, cfg, output_dir)  # fit(resume=False) clears earlier checkpoints
    trainer.fit(resume=resume)
    summary = finish_run(task, trainer, cfg, output_dir, started)
    task.save_cache_if_grown()
    return summary
