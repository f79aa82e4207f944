"""Similar questions with no trained matcher: what an encoder's cosine means, as a probability of the same question.

The zero-shot similar-question list is ordered by a pretrained encoder's cosine (MiniLM in English, e5-small in
Chinese; ``bench/similar_zero_shot.py``), and the page printed it ("match 0.936"), a number that says little: e5-small
puts almost every pair of Chinese questions between 0.9 and 0.97. This bench fits Platt scaling (a logistic curve over
the cosine, :class:`medrank.pipelines.similar.zero_shot.CosineCalibration`) on labelled question pairs and measures it
on pairs it was not fitted on:

* English: medical-question-pairs (the visible pairs; doctors paired each patient question with a rewrite, label 1,
  and with a related but different question, label 0), split by doctor (``dr_id``, whole doctors, seeded);
* Chinese: CHIP-STS (the visible training pairs, label 1 same intent; a seeded sample of ``--zh-pairs``), split by
  the first question (a question's pairs stay on one side).

Reported on the held-out half, against the held-out labels: AUROC of the cosine (what order it gives), and for three
readings of a pair as a probability (the fitted half's share of same-question pairs for every pair; the cosine itself,
clipped to [0, 1], as a person reads "match 0.936"; the calibration): log loss, Brier score and expected calibration
error (ten equal-width bins, |mean probability - share of same-question pairs| weighted by the bin's pairs). The pairs
hold as many same-question pairs as not; where a list is retrieved from a large corpus the share differs, so the
English part also reads the calibration in the served setting: each held-out original question searched (MiniLM dense
search over the service's 52,915 questions, its own text left out), the mean probability of the first result against
how often the first result is the doctors' rewrite (a lower bound of how often it asks the same thing: the corpus may
hold other rewrites).

The calibrations the service ships are then fitted on every visible pair of the language and written to
``src/medrank/pipelines/similar/calibrations/<language>-<encoder>.json``.

    python bench/similar_calibration.py [--threads 1] [--zh-pairs 6000]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from typing import Any

import common
import numpy as np
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from medrank.config import cache_dir, data_root, set_threads
from medrank.data.questions import QuestionPair, load_chip_sts, load_medical_question_pairs
from medrank.encoders import CachedEncoder, load_encoder
from medrank.pipelines.similar.zero_shot import CALIBRATIONS, CosineCalibration, EncoderCosineMatcher

SEED = 43
BINS = 10


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> float:
    """Σ_b (n_b / n) |mean p_b - mean y_b| over ``bins`` equal-width bins of [0, 1] (Guo et al., ICML 2017)."""
    which = np.minimum((p * bins).astype(int), bins - 1)
    return float(sum(np.sum(which == b) / len(p) * abs(p[which == b].mean() - y[which == b].mean())
                     for b in range(bins) if np.any(which == b)))


def readings(p: np.ndarray, y: np.ndarray) -> dict[str, float]:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return {"log loss": round(float(log_loss(y, q, labels=[0, 1])), 4), "Brier": round(float(brier_score_loss(y, q)), 4),
            "ECE %": round(100 * expected_calibration_error(q, y), 2), "mean probability %": round(100 * float(q.mean()), 2),
            "same-question share %": round(100 * float(y.mean()), 2)}


def cosines(encoder: Any, pairs: list[QuestionPair]) -> np.ndarray:
    """Each pair's cosine as the served zero-shot matcher scores it."""
    return EncoderCosineMatcher(encoder).score([(p.text1, p.text2) for p in pairs]).astype(np.float64)


def split(pairs: list[QuestionPair], key: Any) -> tuple[list[int], list[int]]:
    """Two halves of the pairs' indexes, whole groups of ``key(pair)`` on each side, seeded."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        groups[str(key(p))].append(i)
    names = sorted(groups)
    random.Random(SEED).shuffle(names)
    fit, held, half = [], [], len(pairs) / 2
    for g in names:
        (fit if len(fit) < half else held).extend(groups[g])
    return sorted(fit), sorted(held)


def run_language(language: str, pairs: list[QuestionPair], encoder_name: str, key: Any) -> tuple[dict[str, Any], Any]:
    encoder = load_encoder(encoder_name)
    t0 = time.perf_counter()
    cos = cosines(encoder, pairs)
    encode_s = round(time.perf_counter() - t0, 1)
    y = np.array([p.label for p in pairs], dtype=int)
    fit, held = split(pairs, key)
    calibration = CosineCalibration.fit(cos[fit], y[fit], encoder_name, language)
    share = float(y[fit].mean())
    rows = {
        "the fitted half's share of same-question pairs": readings(np.full(len(held), share), y[held]),
        "the cosine read as a probability": readings(np.clip(cos[held], 0.0, 1.0), y[held]),
        "Platt scaling of the cosine (as served)": readings(calibration.probability(cos[held]), y[held]),
    }
    shipped = CosineCalibration.fit(cos, y, encoder_name, language, fitted_on="every visible pair",
                                    data=f"{language}: {'medical-question-pairs' if language == 'en' else 'CHIP-STS'}")
    result = {"pairs": len(pairs), "fit_pairs": len(fit), "held_out_pairs": len(held), "encoder": encoder_name,
              "auroc_cosine": round(100 * float(roc_auc_score(y[held], cos[held])), 2),
              "cosine_quantiles_held_out": {q: round(float(np.quantile(cos[held], q / 100)), 3) for q in (5, 25, 50, 75, 95)},
              "fitted_on_half": {"slope": round(calibration.slope, 4), "intercept": round(calibration.intercept, 4)},
              "rows": rows, "encode_seconds": encode_s,
              "shipped": {"slope": round(shipped.slope, 4), "intercept": round(shipped.intercept, 4), "pairs": len(pairs)}}
    return result, (calibration, shipped, [pairs[i] for i in held])


def served_setting(calibration: CosineCalibration, held: list[QuestionPair]) -> dict[str, Any]:
    """English: held-out originals searched as served (MiniLM dense over the service corpus, own text left out)."""
    from medrank.index import DenseIndex
    from medrank.pipelines.similar.corpus import language_corpus

    rewrite = {p.text1: p.text2 for p in held if p.label == 1}
    queries = sorted(rewrite)
    corpus = language_corpus("en", data_root())
    ids = [f"q{i}" for i in range(len(corpus))]
    encoder = load_encoder("minilm")
    index = DenseIndex(CachedEncoder(encoder, cache_dir() / "embeddings"), show_progress=False)
    index.build(ids, corpus)
    index.encoder = encoder  # queries are not cached
    text = dict(zip(ids, corpus, strict=True))
    first_p, first_is_rewrite, top5_p, top5_rewrite = [], [], [], []
    for q, ranking in zip(queries, index.search(queries, k=6), strict=True):
        kept = [(text[i], s) for i, s in zip(ranking.ids, ranking.scores, strict=True) if text[i] != q][:5]
        p = calibration.probability([s for _, s in kept])
        first_p.append(float(p[0]))
        first_is_rewrite.append(kept[0][0] == rewrite[q])
        top5_p.append(float(p.sum()))
        top5_rewrite.append(any(t == rewrite[q] for t, _ in kept))
    return {"queries": len(queries), "corpus": len(corpus),
            "first result: mean probability %": round(100 * float(np.mean(first_p)), 2),
            "first result is the rewrite %": round(100 * float(np.mean(first_is_rewrite)), 2),
            "top 5: expected same-question results (sum of probabilities)": round(float(np.mean(top5_p)), 2),
            "top 5 holds the rewrite %": round(100 * float(np.mean(top5_rewrite)), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--zh-pairs", type=int, default=6000)
    args = ap.parse_args()
    set_threads(args.threads)
    out: dict[str, Any] = {}
    en, (en_cal, en_shipped, en_held) = run_language("en", load_medical_question_pairs(), "minilm",
                                                    lambda p: p.meta.get("dr_id"))
    en["served_setting"] = served_setting(en_cal, en_held)
    out["en"] = en
    print(en, flush=True)
    zh_pairs = [p for p in load_chip_sts() if p.text1 != p.text2]
    random.Random(SEED).shuffle(zh_pairs)
    zh, (_, zh_shipped, _) = run_language("zh", zh_pairs[: args.zh_pairs], "e5-small", lambda p: p.text1)
    out["zh"] = zh
    print(zh, flush=True)
    CALIBRATIONS.mkdir(exist_ok=True)
    for shipped in (en_shipped, zh_shipped):
        shipped.save(CALIBRATIONS / f"{shipped.language}-{shipped.encoder}.json")
    out["environment"] = common.environment(threads=args.threads, seed=SEED, data="../shared/data")
    lines: list[str] = []
    for lang, title in (("en", "English: medical-question-pairs, MiniLM cosine, halves by doctor"),
                        ("zh", "Chinese: CHIP-STS (seeded sample), e5-small cosine, halves by first question")):
        r = out[lang]
        lines += [f"### {title}", "",
                  f"{r['pairs']:,} pairs, fitted on {r['fit_pairs']:,}, read on {r['held_out_pairs']:,}; AUROC of the "
                  f"cosine {r['auroc_cosine']}; held-out cosines 5 / 25 / 50 / 75 / 95 %: "
                  + " / ".join(str(v) for v in r["cosine_quantiles_held_out"].values()) + ".", ""]
        cols = list(next(iter(r["rows"].values())))
        lines += ["| a pair read as | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        lines += [f"| {name} | " + " | ".join(str(row[c]) for c in cols) + " |" for name, row in r["rows"].items()]
        lines += ["", f"Shipped (fitted on all {r['shipped']['pairs']:,} pairs): P(same) = σ({r['shipped']['slope']} · cos "
                  f"{'+' if r['shipped']['intercept'] >= 0 else '-'} {abs(r['shipped']['intercept'])}).", ""]
        if "served_setting" in r:
            s = r["served_setting"]
            lines += [f"Served setting ({s['queries']} held-out originals, MiniLM dense search over {s['corpus']:,} "
                      "questions, the calibration fitted on the other half): "
                      + "; ".join(f"{k}: {v}" for k, v in s.items() if k not in ("queries", "corpus")) + ".", ""]
    common.write("similar_calibration", out, "\n".join(lines))


if __name__ == "__main__":
    main()
