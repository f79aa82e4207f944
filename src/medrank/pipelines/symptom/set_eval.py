"""Set-level evaluation: CHIP-CDN with the CBLUE metric (next to NDCG@5) and DXY self-reports.

* :func:`evaluate_symptom_sets` — a CHIP-CDN file or split, a trained run (or zero-shot e5-small
  hybrid without one), candidates ``vocab`` / ``gold`` / a vocabulary file. The set calibration is
  the run's saved one (``RUN/sets-<candidates>.json``) when present; otherwise it is fitted on the
  visible validation split (seed 13, 20 %, the split the training recipe holds out), and when the
  evaluated texts *are* that split, cross-fitted (each half decided by a calibration fitted on the
  other half, seed 29).
* :func:`evaluate_dxy_symptoms` — self-reports → explicit symptoms of a folder laid out like
  ``dxy-dialog``; the surface lexicon and the calibration come from the visible dialogues (their
  75 % training carve-out when the visible folder itself is scored).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.pipelines.symptom.sets import SetDetector, set_prf, span_lexicon

PathLike = str | os.PathLike[str]
SPLIT_SEED = 29


def _pct(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in d.items()}


def slot_prf(predicted: Sequence[Sequence[str]], slots: Sequence[Sequence[Sequence[str]]]) -> dict[str, float]:
    """Micro P / R / F1 of predicted term sets against gold *slots*: each slot is one symptom the text names, with
    the terms that may stand for it (Knee pain or Arthralgia for "my knee hurts"). Each predicted term fills at most
    one slot that accepts it and each slot takes one term, matched to fill as many slots as possible; a filled slot
    is a true positive, a term that fills none a false positive, an open slot a false negative."""
    if len(predicted) != len(slots):
        raise ValueError(f"{len(predicted)} predicted sets for {len(slots)} gold slot lists")
    tp = n_pred = n_gold = 0
    for terms, gold in zip(predicted, slots, strict=True):
        terms = list(dict.fromkeys(terms))
        accepts = [set(s) for s in gold]
        n_pred += len(terms)
        n_gold += len(accepts)
        tp += _matching(terms, accepts)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _matching(terms: list[str], slots: list[set[str]]) -> int:
    """The size of a maximum matching of terms to the slots that accept them (augmenting paths, Kuhn)."""
    holder: dict[int, int] = {}  # slot -> term index

    def place(i: int, seen: set[int]) -> bool:
        for j, slot in enumerate(slots):
            if terms[i] in slot and j not in seen:
                seen.add(j)
                if j not in holder or place(holder[j], seen):
                    holder[j] = i
                    return True
        return False

    return sum(place(i, set()) for i in range(len(terms)))


def halves(n: int, seed: int = SPLIT_SEED) -> tuple[list[int], list[int]]:
    """A fixed-seed split of ``range(n)`` into two halves (sorted)."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return sorted(idx[: n // 2]), sorted(idx[n // 2:])


def cross_fit(detector: SetDetector, texts: Sequence[str], gold: Sequence[set[str]], model: str = "logistic",
              rules: Sequence[str] = ()) -> tuple[list[set[str]], list[dict[str, Any]]]:
    """Predicted sets where each half of ``texts`` is decided by a calibration fitted on the other half (with the
    optional ``rules`` of :data:`~medrank.pipelines.symptom.sets.RULES`)."""
    a, b = halves(len(texts))
    preds: list[set[str]] = [set() for _ in texts]
    infos = []
    for fit_idx, test_idx in ((a, b), (b, a)):
        cal = detector.fit([texts[i] for i in fit_idx], [gold[i] for i in fit_idx], model=model, rules=rules)
        infos.append({**cal.info, "threshold": cal.threshold, "min_terms": cal.min_terms})
        for i, s in zip(test_idx, detector.detect_many([texts[i] for i in test_idx]), strict=True):
            preds[i] = {t.id for t in s.terms}
    return preds, infos


def _zero_shot_retriever(concepts: Sequence[Any], language: str, encoder_name: str) -> Any:
    from medrank.config import cache_dir
    from medrank.encoders import CachedEncoder, load_encoder
    from medrank.retrieval.concept import ConceptRetriever

    enc = CachedEncoder(load_encoder(encoder_name), cache_dir() / "embeddings")
    return ConceptRetriever.build(list(concepts), method="hybrid", encoder=enc, language=language, show_progress=False)


def evaluate_symptom_sets(dataset: Any, model: PathLike | None = None, candidates: str = "vocab",
                          cross_fitted: bool | None = None, root: PathLike | None = None,
                          calibration: PathLike | None = None) -> dict[str, Any]:
    """CBLUE set P/R/F1 (micro, over name sets), NDCG@5 / Recall@5 of the whole-text ranking, and the
    whole-text top-1 as the no-decision baseline, for a CHIP-CDN ``dataset`` (a ``ConceptDataset``).

    ``cross_fitted`` defaults to "the evaluated texts are the visible validation split". A run that holds a
    training memory (``RUN/sets-memory.json``) is decided with it, as it is served."""
    from medrank.metrics import evaluate
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    t0 = time.perf_counter()
    texts = [q.text for q in dataset.queries]
    gold = [set(dataset.qrels.relevant(q.id)) for q in dataset.queries]
    if not texts:
        raise ValueError("no texts to evaluate")
    valid = load_eval_set("chip-cdn", "valid", root=root)
    if cross_fitted is None:
        cross_fitted = [q.text for q in valid.queries] == texts
    lexicon = span_lexicon(root)
    memory = None
    if model is not None:
        from medrank.pipelines.symptom.inference import SymptomDetector
        from medrank.pipelines.symptom.sets import run_memory

        memory = run_memory(model)
        if candidates in ("vocab", "gold"):
            retriever = SymptomDetector.load(model, candidates).retriever
        else:
            from medrank.retrieval.concept import ConceptRetriever

            base = SymptomDetector.load(model, "gold").retriever
            encoder = getattr(base.index, "encoder", None)
            concepts = load_candidates("chip-cdn", candidates, eval_set=dataset, root=root)
            retriever = ConceptRetriever.build(list(concepts), method="dense", encoder=encoder, show_progress=False)
        name = f"trained {Path(model).name}"
        saved = Path(model) / f"sets-{candidates}.json"
        if calibration is None and saved.exists() and not cross_fitted:
            calibration = saved
    else:
        concepts = load_candidates("chip-cdn", candidates, eval_set=dataset, root=root)
        retriever = _zero_shot_retriever(concepts, "zh", "e5-small")
        name = "zero-shot e5-small hybrid"
    det = SetDetector.from_retriever(retriever, language="zh", lexicon=lexicon, name=name, memory=memory)
    rankings = retriever.search(list(dataset.queries), k=10)  # the queries carry the ids the qrels use
    ranking_metrics = evaluate(dataset.qrels, {r.query_id: r for r in rankings}, ["ndcg@5", "recall@5"])
    top1 = set_prf([{r.ids[0]} if r.ids else set() for r in rankings], gold)
    if calibration is not None:
        from medrank.pipelines.symptom.sets import SetCalibration

        det.calibration = SetCalibration.load(calibration)
        preds = [{t.id for t in s.terms} for s in det.detect_many(texts)]
        how: Any = {"calibration": str(calibration)}
    elif cross_fitted:
        preds, folds = cross_fit(det, texts, gold)
        how = {"calibration": "cross-fitted halves of the evaluated texts (seed 29)", "folds": folds}
    else:
        v_texts = [q.text for q in valid.queries]
        cal = det.fit(v_texts, [set(valid.qrels.relevant(q.id)) for q in valid.queries])
        preds = [{t.id for t in s.terms} for s in det.detect_many(texts)]
        how = {"calibration": "fitted on the visible validation split (seed 13, 20 %)",
               **cal.info, "threshold": cal.threshold, "min_terms": cal.min_terms}
    sets = set_prf(preds, gold)
    systems = {
        f"{name}: whole-text top-1": {**_pct(top1), **_pct(ranking_metrics)},
        f"{name}: set detector": {**_pct(sets), **_pct(ranking_metrics)},
    }
    return {
        "dataset": "chip-cdn", "metric": "CBLUE CHIP-CDN: micro precision / recall / F1 of predicted name sets vs gold sets",
        "candidates": candidates, "n_texts": len(texts), "n_gold_names": sum(len(g) for g in gold),
        "model": str(model) if model is not None else None, "systems": systems,
        "metric_names": ["precision", "recall", "f1", "ndcg@5", "recall@5"], "decision": how,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def dxy_symptom_names(root: PathLike | None = None, folder: PathLike | None = None) -> list[str]:
    """The normalised DXY symptom names (``symptoms_dxy.txt`` of ``folder``, else of the visible data)."""
    from medrank.config import dataset_dir

    for base in ([Path(folder)] if folder is not None else []) + [dataset_dir("dxy-dialog", root)]:
        path = base / "symptoms_dxy.txt"
        if path.exists():
            return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    raise FileNotFoundError("symptoms_dxy.txt not found (the 41 normalised DXY symptoms)")


def dxy_carve_out(records: Sequence[Any], seed: int = SPLIT_SEED, test_fraction: float = 0.25) -> tuple[list[Any], list[Any]]:
    """(training 75 %, test 25 %) of the visible DXY records, fixed seed."""
    idx = list(range(len(records)))
    random.Random(seed).shuffle(idx)
    n_test = int(len(records) * test_fraction)
    return [records[i] for i in sorted(idx[n_test:])], [records[i] for i in sorted(idx[:n_test])]


def evaluate_dxy_symptoms(test_dir: PathLike | None = None, root: PathLike | None = None) -> dict[str, Any]:
    """Set P/R/F1 of self-report → explicit symptoms: exact name lookup, mined surface-form lookup,
    zero-shot e5-small top-k (k tuned on the training records), the set detector and the trained self-report
    model (:class:`~medrank.pipelines.symptom.self_report.SelfReportModel`, fitted on the training records)."""
    from medrank.config import dataset_dir
    from medrank.pipelines.symptom.lexicon import mine_surface_lexicon, read_dxy_folder
    from medrank.pipelines.symptom.self_report import SelfReportModel
    from medrank.pipelines.symptom.spans import find_spans
    from medrank.records import Concept
    from medrank.retrieval.concept import ConceptRetriever

    t0 = time.perf_counter()
    visible = read_dxy_folder(dataset_dir("dxy-dialog", root))
    if test_dir is None:
        train, test = dxy_carve_out(visible)
        where = "visible dxy-dialog, 25 % carve-out (seed 29)"
    else:
        train, test = visible, read_dxy_folder(test_dir)
        where = str(test_dir)
    if not test:
        raise ValueError(f"{where}: no self-reports")
    names = dxy_symptom_names(root, test_dir)
    lex = mine_surface_lexicon(train)
    texts, gold = [r.report for r in test], [set(r.explicit) for r in test]
    tr_texts, tr_gold = [r.report for r in train], [set(r.explicit) for r in train]
    systems: dict[str, dict[str, float]] = {}
    systems["exact name lookup"] = _pct(set_prf([{n for n in names if n in t} for t in texts], gold))
    systems["mined surface-form lookup"] = _pct(set_prf(
        [{s.normalised for s in find_spans(t, lex, "zh") if s.normalised and not s.negated} for t in texts], gold))
    from medrank.config import cache_dir
    from medrank.encoders import CachedEncoder, load_encoder

    enc = CachedEncoder(load_encoder("e5-small"), cache_dir() / "embeddings")
    retriever = ConceptRetriever.build([Concept(n, n) for n in names], method="dense", encoder=enc, show_progress=False)
    det = SetDetector.from_retriever(retriever, language="zh", lexicon=lex, name="dxy")

    def topk(ts: list[str], k: int) -> list[set[str]]:
        return [{cid for cid, _ in row[:k]} for row in det.search(ts, k)]

    best_k = max(range(1, 6), key=lambda k: set_prf(topk(tr_texts, k), tr_gold)["f1"])
    systems[f"zero-shot e5-small top-{best_k} (k tuned on the training records)"] = _pct(set_prf(topk(texts, best_k), gold))
    cal = det.fit(tr_texts, tr_gold)
    systems["set detector (e5-small + mined lexicon + calibration)"] = _pct(set_prf(
        [{t.id for t in s.terms} for s in det.detect_many(texts)], gold))
    model = SelfReportModel.fit(train, names)
    systems["self-report model (lexicon words in context + position, stacked)"] = _pct(set_prf(model.predict(texts), gold))
    return {
        "dataset": "dxy-symptoms", "evaluated": where, "n_reports": len(test), "n_training_reports": len(train),
        "symptoms": len(names), "lexicon_forms": len(lex), "systems": systems, "metric_names": ["precision", "recall", "f1"],
        "calibration": {**cal.info, "threshold": cal.threshold, "min_terms": cal.min_terms},
        "self_report_model": model.info, "seconds": round(time.perf_counter() - t0, 1),
    }
