"""Diagnostic: variants of the learned fusion (and int8 quantisation) that were measured and not kept.

The rows of "Measured and not kept" in ``docs/procedures-experiments.md`` dated 2026-11-24 come from
this script. It scores train-valid exactly as ``medrank train configs/procedures/fusion.yaml``
does (``fusion_training_data``: candidates recalled with the fit split's prior, votes from a
memory of the fit split), then for each variant reports

* the 5-fold exact-set accuracy on the 400 train-valid mentions (same folds as the run's
  ``train_valid_learned_cv``; θ tuned on the other folds), and
* val exact-set accuracy with the variant fitted, and its θ tuned, on all of train-valid (votes
  for val from a memory of every training mention, as the fusion run saves it).

Variants: the fusion run's regression (over KAR's probability or its logit, as the run was
fitted; must reproduce the run's CV figure), dense votes (the same three votes from the 10
training mentions nearest by MTCG cosine) added to or instead of the TF-IDF votes, the other
representation of KAR's score, keyword agreement (Jaccard of the site and of the type keywords
of mention and name, as KAR's keyword lists find them, and whether the mention has a site the
name lacks or the reverse), and gradient-boosted trees instead of the regression. ``--int8`` also times PyTorch dynamic int8 quantisation of MTCG's and KAR's linear
layers on the 1-thread latency path and scores val through it (the cached frozen-bottom states
stay fp32; the name embeddings are re-encoded by the quantised top blocks on first use).

    nice -n 10 python bench/procedures_fusion_variants.py [--kar runs/procedures/kar] [--fusion runs/procedures/fusion] [--int8]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import common
import numpy as np

from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.procedures.data import carve_validation, load_keywords, load_mentions
from medrank.pipelines.procedures.evaluation import set_accuracy
from medrank.pipelines.procedures.fusion import LearnedFusion, select_terms, tune_theta
from medrank.pipelines.procedures.kar import KeywordMatcher
from medrank.pipelines.procedures.memory import VOTES, MentionMemory
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer
from medrank.pipelines.procedures.training import fusion_training_data

Scorer = Callable[[np.ndarray], np.ndarray]


def dense_votes(query: np.ndarray, memory: np.ndarray, labels: list[frozenset[str]], candidates: list[list[str]],
                k: int = 10) -> np.ndarray:
    """``(n, k_c, 3)`` votes as :meth:`MentionMemory.votes` gives them, with MTCG cosine as the similarity."""
    sims = query @ memory.T
    out = np.zeros((len(query), max(len(c) for c in candidates), len(VOTES)))
    for i, cands in enumerate(candidates):
        top = np.argsort(-sims[i], kind="stable")[:k]
        for j, name in enumerate(cands):
            hits = [float(sims[i, n]) for n in top if name in labels[n]]
            if hits:
                out[i, j] = (sum(hits), max(hits), float(sims[i, top[0]]) if name in labels[top[0]] else 0.0)
    return out


def keyword_agreement(mentions: list[str], candidates: list[list[str]], sites: KeywordMatcher, types: KeywordMatcher) -> np.ndarray:
    """``(n, k_c, 4)``: site Jaccard, type Jaccard, mention site missing from the name, name site missing from the mention."""

    def jaccard(a: set[str], b: set[str]) -> float:
        return len(a & b) / len(a | b) if a | b else 1.0

    out = np.zeros((len(mentions), max(len(c) for c in candidates), 4))
    for i, (text, cands) in enumerate(zip(mentions, candidates, strict=True)):
        m_sites, m_types = set(sites.find(text)), set(types.find(text))
        for j, name in enumerate(cands):
            c_sites, c_types = set(sites.find(name)), set(types.find(name))
            out[i, j] = (jaccard(m_sites, c_sites), jaccard(m_types, c_types), float(bool(m_sites - c_sites)), float(bool(c_sites - m_sites)))
    return out


def logistic(x: np.ndarray, y: np.ndarray, seed: int) -> Scorer:
    """The learned fusion's model: L2 logistic regression (C = 1) on standardised features."""
    from sklearn.linear_model import LogisticRegression

    flat = x.reshape(-1, x.shape[-1])
    mean, scale = flat.mean(0), flat.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    model = LogisticRegression(max_iter=5000, random_state=seed).fit((flat - mean) / scale, y.reshape(-1).astype(int))
    return lambda z: model.predict_proba(((z - mean) / scale).reshape(-1, z.shape[-1]))[:, 1].reshape(z.shape[:-1])


def boosted(params: dict) -> Callable[[np.ndarray, np.ndarray, int], Scorer]:
    def fit(x: np.ndarray, y: np.ndarray, seed: int) -> Scorer:
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(random_state=seed, **params).fit(x.reshape(-1, x.shape[-1]), y.reshape(-1).astype(int))
        return lambda z: model.predict_proba(z.reshape(-1, z.shape[-1]))[:, 1].reshape(z.shape[:-1])

    return fit


def accuracy(scores: np.ndarray, preds: list, gold: list, theta: float) -> float:
    return float(np.mean([set(select_terms(p.candidates, s.tolist(), p.count_class, theta)) == set(g)
                          for p, s, g in zip(preds, scores, gold, strict=True)]))


def fit_and_tune(fit: Callable, x: np.ndarray, y: np.ndarray, preds: list, gold: list, seed: int) -> tuple[Scorer, float]:
    scorer = fit(x, y, seed)
    theta, _ = tune_theta([p.candidates for p in preds], scorer(x).tolist(), [p.count_class for p in preds],
                          [set(g) for g in gold])
    return scorer, theta


def cross_validated(fit: Callable, x: np.ndarray, y: np.ndarray, preds: list, gold: list, seed: int) -> float:
    """5-fold exact-set accuracy (%), the folds of ``train_valid_learned_cv``."""
    order = np.random.default_rng(seed).permutation(len(x))
    correct = 0.0
    for f in range(5):
        test = order[f::5]
        train = np.setdiff1d(order, test)
        scorer, theta = fit_and_tune(fit, x[train], y[train], [preds[i] for i in train], [gold[i] for i in train], seed)
        correct += accuracy(scorer(x[test]), [preds[i] for i in test], [gold[i] for i in test], theta) * len(test)
    return round(100.0 * correct / len(x), 2)


def features(which: tuple[str, ...], s_c: np.ndarray, s_r: np.ndarray, votes: np.ndarray, dense: np.ndarray, keywords: np.ndarray) -> np.ndarray:
    logit = LearnedFusion.features(s_c, s_r, votes, "logit")[..., 1:2]  # the fusion's own clipped logit
    parts = {"s_c": s_c[..., None], "s_r": s_r[..., None], "logit(s_r)": logit,
             "votes": votes, "dense votes": dense, "keyword agreement": keywords}
    return np.concatenate([parts[w] for w in which], axis=-1)


def int8_check(run: str, n: int) -> dict:
    """p50 of the 1-thread end-to-end path, fp32 vs dynamic int8 (interleaved), and val accuracy through each."""
    import torch

    fp32, int8 = ProcedureNormalizer.load(run), ProcedureNormalizer.load(run)
    fp32.warm_up()
    int8.warm_up()  # the frozen-bottom name states stay fp32; the name embeddings are re-encoded by the int8 top
    int8.mtcg = torch.ao.quantization.quantize_dynamic(int8.mtcg, {torch.nn.Linear}, dtype=torch.qint8)
    int8.kar = torch.ao.quantization.quantize_dynamic(int8.kar, {torch.nn.Linear}, dtype=torch.qint8)
    val = load_mentions("val")
    for m in val[:10]:
        fp32.normalize_one(m.text)
        int8.normalize_one(m.text)
    times: dict[str, list[float]] = {"fp32": [], "int8": []}
    for m in val[:n]:
        for name, norm in (("fp32", fp32), ("int8", int8)):
            t = time.perf_counter()
            norm.normalize_one(m.text)
            times[name].append(time.perf_counter() - t)
    return {name: {**common.percentiles(times[name]), "val": set_accuracy(val, [norm.normalize_one(m.text) for m in val])}
            for name, norm in (("fp32", fp32), ("int8", int8))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kar", default="runs/procedures/kar")
    ap.add_argument("--fusion", default="runs/procedures/fusion", help="the fusion run whose CV figure the base row must reproduce")
    ap.add_argument("--memory-k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--int8", action="store_true")
    ap.add_argument("--int8-n", type=int, default=150)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    norm = ProcedureNormalizer.load(args.kar, fusion="fb", learned=None, memory=None)
    valid, preds, s_c, s_r, votes, labels = fusion_training_data(norm, args.memory_k)
    train = load_mentions("train")
    fit_split, _ = carve_validation(train)
    val = load_mentions("val")
    val_preds = norm.predict([m.text for m in val])
    val_votes = MentionMemory([m.text for m in train], [m.terms for m in train], k=args.memory_k).votes(
        [m.text for m in val], [p.candidates for p in val_preds])

    def unit(ms: list) -> np.ndarray:  # MTCG's unit mention embeddings
        return norm.mtcg.encode_mentions([m.text for m in ms])[0]

    dense = dense_votes(unit(valid), unit(fit_split), [frozenset(m.terms) for m in fit_split], [p.candidates for p in preds], args.memory_k)
    val_dense = dense_votes(unit(val), unit(train), [frozenset(m.terms) for m in train], [p.candidates for p in val_preds], args.memory_k)
    kw = load_keywords()
    sites, types = KeywordMatcher(kw.sites), KeywordMatcher(kw.types)
    keywords = keyword_agreement([m.text for m in valid], [p.candidates for p in preds], sites, types)
    val_keywords = keyword_agreement([m.text for m in val], [p.candidates for p in val_preds], sites, types)
    val_s_c = np.array([p.recall_score for p in val_preds])
    val_s_r = np.array([p.ranker_score for p in val_preds])
    gold, val_gold = [m.terms for m in valid], [m.terms for m in val]

    # the fusion run's own regression (KAR's probability or its logit) is the base every variant changes
    space = LearnedFusion.load(Path(args.fusion) / "model").ranker
    r, other = ("logit(s_r)", "s_r") if space == "logit" else ("s_r", "logit(s_r)")
    base = ("s_c", r, "votes")
    base_name = f"the fusion run's: s_c, {r}, TF-IDF votes (logistic regression)"
    variants: dict[str, tuple[tuple[str, ...], Callable]] = {
        base_name: (base, logistic),
        "+ dense votes": ((*base, "dense votes"), logistic),
        "dense votes instead of the TF-IDF votes": (("s_c", r, "dense votes"), logistic),
        f"{other} instead of {r}": (("s_c", other, "votes"), logistic),
        "+ keyword agreement (site / type Jaccard, missing / extra site)": ((*base, "keyword agreement"), logistic),
    }
    for params in ({"max_depth": 2, "max_iter": 50, "learning_rate": 0.1}, {"max_depth": 3, "max_iter": 100, "learning_rate": 0.05},
                   {"max_depth": 2, "max_iter": 200, "learning_rate": 0.05, "l2_regularization": 1.0},
                   {"max_leaf_nodes": 4, "max_iter": 100, "learning_rate": 0.05, "min_samples_leaf": 40}):
        variants["boosted trees " + json.dumps(params)] = (base, boosted(params))
    rows = {}
    for name, (which, fit) in variants.items():
        x = features(which, s_c, s_r, votes, dense, keywords)
        scorer, theta = fit_and_tune(fit, x, labels, preds, gold, args.seed)
        val_x = features(which, val_s_c, val_s_r, val_votes, val_dense, val_keywords)
        rows[name] = {"train_valid_cv": cross_validated(fit, x, labels, preds, gold, args.seed),
                      "val": round(100 * accuracy(scorer(val_x), val_preds, val_gold, theta), 2), "theta": theta}
        print(name, rows[name], flush=True)
    run_cv = json.loads((Path(args.fusion) / "results.json").read_text(encoding="utf-8"))["train_valid_learned_cv"]
    base_cv = rows[base_name]["train_valid_cv"]
    if base_cv != run_cv:
        raise SystemExit(f"the base row's CV {base_cv} differs from the fusion run's {run_cv}: not the same protocol")
    payload = {"environment": common.environment(args.threads, args.seed, str(data_root())), "kar": args.kar,
               "train_valid_mentions": len(valid), "val_mentions": len(val), "fusion_run_cv": run_cv, "variants": rows}
    md = ["| fusion variant | train-valid 5-fold CV | val |", "|---|---:|---:|",
          *[f"| {k} | {v['train_valid_cv']:.2f} | {v['val']:.2f} |" for k, v in rows.items()], "",
          f"Exact-set accuracy (%). Train-valid = {len(valid)} mentions neither MTCG nor KAR trained on (one mention = "
          f"{100 / len(valid):.2f} points); the base row reproduces the fusion run's `train_valid_learned_cv` ({run_cv})."]
    if args.int8:
        payload["int8"] = q = int8_check(args.fusion, args.int8_n)
        md += ["", "| per-mention path (1 thread) | p50 ms | val total | val multi |", "|---|---:|---:|---:|",
               *[f"| {k} | {v['p50_ms']} | {v['val']['total']:.2f} | {v['val']['multi']:.2f} |" for k, v in q.items()], "",
               f"PyTorch dynamic int8 quantisation (`torch.ao.quantization.quantize_dynamic`) of every `nn.Linear` of MTCG and "
               f"KAR (the cached frozen-bottom states stay fp32); p50 over {args.int8_n} val mentions, fp32 and int8 interleaved."]
    common.write("procedures_fusion_variants", payload, "\n".join(md))


if __name__ == "__main__":
    main()
