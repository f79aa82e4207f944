"""Similar questions with no trained matcher: what the zero-shot form should rank by.

The service's similar-question list is BM25 top-20 over its corpus (English: medical-question-pairs + RQE + MedQuAD
questions, 52,915; Chinese: CHIP-STS + KUAKE-QQR questions), re-ranked by a trained STMT matcher when one is found.
On a fresh checkout there is none: the list is BM25's order. This bench asks whether a pretrained sentence encoder
does better there, with no training:

* ``BM25``: as served (top-20 recall, its order);
* ``BM25 top-20 re-ranked by <encoder> cosine``: the encoder in the matcher's place (the query and its 20 candidates
  encoded per request, no index to build; :class:`~medrank.pipelines.similar.zero_shot.EncoderCosineMatcher`), on
  torch and on the int8 ONNX export the service serves where it agrees with torch; what a fresh checkout serves;
* ``<encoder> dense``: exact cosine search over the whole corpus (every question encoded once), on torch and on int8
  (what the service serves in English once its "similar-questions:vectors" step has encoded the corpus);
* ``hybrid``: reciprocal-rank fusion of BM25 and the dense search (top 20 of each).

Protocol. English: each original question of medical-question-pairs that doctors paired with a rewrite of the same
question (label 1) and with a related but different question (label 0) is a query; the corpus is the service's,
without the query's own text. Reported: the rewrite's recall at 1 and 5 and its reciprocal rank in the top 20 (0
when absent), and how often the related-but-different question ranks above the rewrite (absent counts as below).
The queries are dealt into two halves with a fixed seed: the design is chosen on the first ("choose"), and the
second ("report") is read once for the figures. Nothing is fitted. Chinese: the CHIP-STS pairs of the same intent
(label 1; the visible training side, the validation side the project carves from it included) give the queries
(``text1``) and targets (``text2``), a seeded sample; the encoder is e5-small with its query prompt, re-ranking BM25
top-20 only (a dense index over the Chinese corpus costs e5-small's whole-corpus encoding).

    python bench/similar_zero_shot.py [--threads 1] [--zh-queries 400]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from typing import Any

import common
import numpy as np

from medrank.config import cache_dir, data_root, set_threads
from medrank.data.questions import load_chip_sts, load_medical_question_pairs
from medrank.encoders import CachedEncoder, load_encoder
from medrank.index import BM25Index, DenseIndex
from medrank.index.hybrid import fuse_rankings
from medrank.pipelines.similar.corpus import language_corpus
from medrank.pipelines.similar.zero_shot import EncoderCosineMatcher

SEED = 41
DEPTH = 20


def mqp_queries() -> list[tuple[str, str, str]]:
    """(original, rewrite, related-but-different) for every original question with both pairs."""
    by_original: dict[str, dict[int, str]] = defaultdict(dict)
    for p in load_medical_question_pairs():
        by_original[p.text1][p.label] = p.text2
    return [(q, d[1], d[0]) for q, d in by_original.items() if 1 in d and 0 in d]


def sts_queries(n: int) -> list[tuple[str, str, None]]:
    pairs = [p for p in load_chip_sts() if p.label == 1 and p.text1 != p.text2]
    random.Random(SEED).shuffle(pairs)
    return [(p.text1, p.text2, None) for p in pairs[:n]]


def scores(rankings: list[list[str]], queries: list[tuple[str, str, str | None]]) -> dict[str, float]:
    r1 = r5 = rr = related_first = 0.0
    for ranked, (_, target, related) in zip(rankings, queries, strict=True):
        rank = ranked.index(target) + 1 if target in ranked else None
        r1 += rank == 1
        r5 += rank is not None and rank <= 5
        rr += 1.0 / rank if rank else 0.0
        if related is not None and related in ranked:
            related_first += rank is None or ranked.index(related) + 1 < rank
    n = len(queries)
    out = {"R@1": 100 * r1 / n, "R@5": 100 * r5 / n, "MRR@20": 100 * rr / n}
    if queries and queries[0][2] is not None:
        out["related above the rewrite %"] = 100 * related_first / n
    return {k: round(v, 2) for k, v in out.items()}


def without_query(ids: list[str], texts: dict[str, str], query: str) -> list[str]:
    return [texts[i] for i in ids if texts[i] != query][:DEPTH]


def run_language(language: str, queries: list[tuple[str, str, str | None]], encoder_name: str,
                 dense: bool) -> dict[str, Any]:
    corpus = language_corpus(language, data_root())
    ids = [f"q{i}" for i in range(len(corpus))]
    texts = dict(zip(ids, corpus, strict=True))
    t0 = time.perf_counter()
    bm25 = BM25Index(language=language, zh_mode="char")
    bm25.build(ids, corpus)
    build_s = {"bm25": round(time.perf_counter() - t0, 1)}
    qtexts = [q for q, _, _ in queries]
    bm = bm25.search(qtexts, k=DEPTH + 1)
    systems: dict[str, list[list[str]]] = {"BM25 (as served)": [without_query(list(r.ids), texts, q)
                                                               for r, q in zip(bm, qtexts, strict=True)]}
    encoder = load_encoder(encoder_name)
    ms: dict[str, float] = {}
    # torch fp32, and the int8 ONNX export the service picks where it agrees with torch (--backend auto)
    for backend, reranker in (("torch", encoder), ("onnx-int8", load_encoder(encoder_name, backend="onnx-int8"))):
        matcher = EncoderCosineMatcher(reranker)
        name = f"BM25 top-{DEPTH} re-ranked by {encoder_name} cosine ({backend})"
        t0 = time.perf_counter()
        reranked = []
        for q, cands in zip(qtexts, systems["BM25 (as served)"], strict=True):
            cos = matcher.score([(q, c) for c in cands])
            reranked.append([cands[j] for j in np.argsort(-cos, kind="stable")])
        ms[name] = round(1000 * (time.perf_counter() - t0) / len(qtexts), 1)
        systems[name] = reranked
    if dense:
        for backend, dense_encoder in (("torch", encoder), ("onnx-int8", load_encoder(encoder_name, backend="onnx-int8"))):
            t0 = time.perf_counter()
            index = DenseIndex(CachedEncoder(dense_encoder, cache_dir() / "embeddings"), show_progress=False)
            index.build(ids, corpus)
            build_s[f"dense ({backend})"] = round(time.perf_counter() - t0, 1)
            index.encoder = dense_encoder  # queries are not cached
            t0 = time.perf_counter()
            dn = [index.search([q], k=DEPTH + 1)[0] for q in qtexts]  # one question at a time, as served
            name = f"{encoder_name} dense ({backend})"
            ms[name] = round(1000 * (time.perf_counter() - t0) / len(qtexts), 1)
            systems[name] = [without_query(list(r.ids), texts, q) for r, q in zip(dn, qtexts, strict=True)]
            if backend == "torch":
                fused = [fuse_rankings([a, b]) for a, b in zip(bm, dn, strict=True)]
                systems[f"hybrid (RRF of BM25 and {encoder_name} dense)"] = [
                    without_query([i for i, _ in f], texts, q) for f, q in zip(fused, qtexts, strict=True)]
    idx = list(range(len(queries)))
    random.Random(SEED).shuffle(idx)
    halves = {"choose": sorted(idx[: len(idx) // 2]), "report": sorted(idx[len(idx) // 2:])}
    rows = {name: {half: scores([ranked[i] for i in sel], [queries[i] for i in sel]) for half, sel in halves.items()}
            for name, ranked in systems.items()}
    return {"queries": len(queries), "corpus": len(corpus), "encoder": encoder_name, "systems": rows,
            "ms_per_query": ms, "build_seconds": build_s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--zh-queries", type=int, default=400)
    args = ap.parse_args()
    set_threads(args.threads)
    out: dict[str, Any] = {"en": run_language("en", mqp_queries(), "minilm", dense=True)}
    print(out["en"]["systems"], flush=True)
    out["zh"] = run_language("zh", sts_queries(args.zh_queries), "e5-small", dense=False)
    print(out["zh"]["systems"], flush=True)
    out["environment"] = common.environment(threads=args.threads, seed=SEED, data="../shared/data")
    lines: list[str] = []
    for lang, title in (("en", "English: medical-question-pairs originals → their rewrite"),
                        ("zh", "Chinese: CHIP-STS same-intent pairs (seeded sample) → the paired question")):
        r = out[lang]
        lines += [f"### {title} ({r['queries']} queries, corpus {r['corpus']:,} questions)", ""]
        cols = list(next(iter(r["systems"].values()))["report"])
        lines += ["| system | half | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
        for name, halves in r["systems"].items():
            for half, row in halves.items():
                lines.append(f"| {name} | {half} | " + " | ".join(str(row[c]) for c in cols) + " |")
        lines += ["", "ms per query (a re-ranking encodes the query and its 20 candidates, a dense search the query): "
                  + ", ".join(f"{k}: {v}" for k, v in r["ms_per_query"].items()),
                  "", "seconds to build: " + ", ".join(f"{k}: {v}" for k, v in r["build_seconds"].items()), ""]
    common.write("similar_zero_shot", out, "\n".join(lines))


if __name__ == "__main__":
    main()
