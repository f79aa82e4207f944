"""Scores of the procedure pipeline: exact-set accuracy (the paper's Table 2), count-head accuracy,
recall@k of the candidate generator, MTCG's evaluation on a split, and the ``chip2019-procedures``
evaluator behind ``medrank evaluate``."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medrank.config import task_option
from medrank.metrics import evaluate, evaluate_sets, exact_set_accuracy
from medrank.pipelines.procedures.artefacts import default_run
from medrank.pipelines.procedures.data import Mention, TermBase
from medrank.pipelines.procedures.normalizer import Prediction, ProcedureNormalizer
from medrank.records import Qrels, Ranking


def set_accuracy(mentions: Sequence[Mention], predicted: Sequence[set[str]] | Sequence[Prediction]) -> dict[str, float]:
    """Exact-set accuracy (%) over all, single-term and multi-term mentions (the paper's Table 2)."""
    if not mentions:
        return {"single": math.nan, "multi": math.nan, "total": math.nan, "n_single": 0, "n_multi": 0}
    pred = [set(p.terms) if isinstance(p, Prediction) else set(p) for p in predicted]
    res = evaluate_sets([set(m.terms) for m in mentions], pred)

    def percent(value: float) -> float:
        return value if math.isnan(value) else round(100.0 * value, 2)

    return {"single": percent(res["single"]), "multi": percent(res["multi"]), "total": percent(res["total"]),
            "n_single": res["n_single"], "n_multi": res["n_multi"]}


def count_accuracy(mentions: Sequence[Mention], count_classes: Sequence[int]) -> dict[str, float]:
    """Implication-count accuracy (%), overall and per gold class (the paper's Table 8)."""
    gold = [{str(m.count_class)} for m in mentions]
    pred = [{str(int(c))} for c in count_classes]
    out = {"total": round(100.0 * exact_set_accuracy(gold, pred), 2)}
    for cls, name in enumerate(("1", "2", ">=3")):
        idx = [i for i, m in enumerate(mentions) if m.count_class == cls]
        if idx:
            out[name] = round(100.0 * exact_set_accuracy([gold[i] for i in idx], [pred[i] for i in idx]), 2)
        out[f"n_{name}"] = len(idx)
    return out


def recall_at(mentions: Sequence[Mention], rows: np.ndarray, terms: TermBase, ks: Sequence[int] = (2, 5, 7, 10)) -> dict[str, float]:
    """Recall@k (%) of candidate lists (core ``medrank.metrics.evaluate``; gold terms found / gold terms per mention)."""
    qrels = Qrels({m.id: {t: 1 for t in m.terms} for m in mentions})
    run = {
        m.id: Ranking(m.id, tuple(terms.names[i] for i in r), tuple(float(-j) for j in range(len(r))))
        for m, r in zip(mentions, rows, strict=True)
    }
    res = evaluate(qrels, run, [f"recall@{k}" for k in ks])
    return {k: round(100.0 * float(v), 2) for k, v in res.items()}


def evaluate_mtcg_on(task: Any, mentions: list[Mention]) -> dict[str, Any]:
    """An MTCG task's recall@2/5/7/10, count accuracy and recall throughput (mentions/s, nothing cached for the mentions)."""
    texts = [m.text for m in mentions]
    task.retriever.term_embeddings()  # the names are indexed once, not per mention
    t0 = time.perf_counter()
    emb, probs = task.model.encode_mentions(texts, use_cache=False)
    rows, _ = task.retriever.retrieve(emb, texts, k=10)
    seconds = time.perf_counter() - t0
    return {
        "recall": recall_at(mentions, rows, task.terms, (2, 5, 7, 10)),
        "count": count_accuracy(mentions, probs.argmax(1)),
        "mentions_per_second": round(len(texts) / seconds, 1),
        "threads": torch.get_num_threads(),
        "n": len(mentions),
    }


#: the ``--set`` options the evaluator takes
OPTIONS = ("fusion", "recall", "theta", "baselines", "data", "backend")


def evaluate_procedures(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """Exact-set accuracy of a trained normaliser (and, with ``baselines=1``, TF-IDF / edit distance)."""
    from medrank.pipelines.procedures.baselines import edit_distance_top, tfidf_top
    from medrank.pipelines.procedures.data import load_mentions, load_term_base, read_mentions
    from medrank.pipelines.procedures.fusion import check_theta

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown options {unknown}; chip2019-procedures takes {list(OPTIONS)}")
    root = options.get("data")
    if test is not None:
        mentions = read_mentions(test)
        where = str(test)
    else:
        split = split or "val"
        mentions = load_mentions(split, root)
        where = split
    if not mentions:
        raise ValueError(f"{where}: no mentions")
    terms = load_term_base(root)
    unknown = sorted({t for m in mentions for t in m.terms if t not in terms.row})
    if unknown:
        raise ValueError(f"{len(unknown)} gold names are not in kb.tsv (e.g. {unknown[:3]})")
    systems: dict[str, dict[str, float]] = {}
    texts = [m.text for m in mentions]
    kwargs: dict[str, Any] = {}
    for key in ("fusion", "recall"):
        if key in options:
            kwargs[key] = str(options[key])
    if "theta" in options:
        kwargs["theta"] = check_theta(task_option(options, "theta", None, float))
    backend = str(options.get("backend", "torch"))
    norm = ProcedureNormalizer.load(model or default_run(), terms=terms, data_root=root, backend=backend, **kwargs)
    if "theta" in kwargs and norm.learned is not None:
        norm.learned = norm.learned.with_theta(kwargs["theta"])
    theta = norm.learned.theta if norm.fusion == "learned" and norm.learned is not None else norm.theta
    served_by = f", backend={backend}" if backend != "torch" else ""
    name = f"mtcg+kar (recall={norm.recall}, fusion={norm.fusion}, theta={theta}{served_by})"
    systems[name] = set_accuracy(mentions, norm.predict(texts))
    if str(options.get("baselines", "0")).lower() in ("1", "true", "yes"):
        systems["tf-idf"] = set_accuracy(mentions, [set(p) for p in tfidf_top(texts, terms)])
        systems["edit-distance"] = set_accuracy(mentions, [set(p) for p in edit_distance_top(texts, terms)])
    return {
        "systems": systems, "metric_names": ["single", "multi", "total"], "metric_scale": 1,  # already percentages
        "dataset": "chip2019-procedures", "split": where, "n": len(mentions),
    }
