"""BioSyn on CPU: NCBI-disease devel Acc@1 / Acc@5 against MEDIC for zero-shot, top-block and full
fine-tuning, sparse only, dense only and fused, with and without abbreviation expansion; 1-thread latency.

Protocol (BioSyn's, the project's :func:`~medrank.retrieval.concept.evaluate_retriever`): every MEDIC
name and synonym is an entry, a concept scores its best entry, a prediction is right when it shares an
id with the mention's gold set (composite ``|`` / ``+`` mentions: any of their ids). The sparse weight
of each fused row is tuned on a fixed-seed 10 % carve-out of the *training* documents (seed 13); the
devel split is only reported. Trained rows come from the runs of ``configs/concept/ncbi-disease*.yaml``
(``results.json``, abbreviations expanded as trained) and from their saved ``index/`` scored without
expansion (what ``medrank evaluate --dataset ncbi-disease --index RUN/index`` prints).

    python bench/concept_biosyn.py                     # tabulate (zero-shot rows computed here)
    python bench/concept_biosyn.py --reuse-zero-shot   # after more training: the zero-shot rows of the last table
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
RUNS = {"top block (1 of 6 blocks)": ROOT / "runs/concept/ncbi-disease-top1",
        "full fine-tuning (all 6 blocks), dictionary = MEDIC + training mentions": ROOT / "runs/concept/ncbi-disease",
        "top block, dictionary = MEDIC + training mentions": ROOT / "runs/concept/ncbi-disease-top1-dict"}
#: the index whose latency is measured: one mention against MEDIC alone
LATENCY_RUN = ROOT / "runs/concept/ncbi-disease-top1"
GRID = [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0]
#: test-split figures of the papers (NCBI-disease test, 960 mentions), BioBERT-base on a GPU
PUBLISHED = {"BioSyn (Sung et al., ACL 2020, Table 2)": (91.1, 93.9),
             "SapBERT (Liu et al., NAACL 2021, Table 2)": (92.4, 95.8)}


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}"


def zero_shot(settings: tuple[bool, ...]) -> dict[bool, dict[str, object]]:
    """MiniLM without training (max length 32, as trained): dense, sparse and fused (weight tuned on the
    carve-out) on devel, per abbreviation setting. The entries go through the frozen-bottom cache the
    training runs share (:class:`~medrank.models.BiEncoder`: the same function as the plain encoder)."""
    import numpy as np

    from medrank.encoders import load_encoder
    from medrank.index import CharTfidfIndex
    from medrank.models import BiEncoder
    from medrank.pipelines.symptom.biosyn import _cache_dir, load_ncbi, weight_sweep
    from medrank.retrieval.concept import concept_entries

    encoder = load_encoder("minilm")
    encoder.max_length = 32
    bi = BiEncoder(encoder, train_layers=1, cache=True)
    bi.load_cache(_cache_dir())
    out = {}
    for abbreviations in settings:
        data = load_ncbi(None, abbreviations, 0.1, 13)
        if not out:
            ids, texts, items = concept_entries(data.vocabulary)
            sparse = CharTfidfIndex().build(ids, texts, items)
            vectors = bi.encode(texts, "passage", batch_size=256)
            entry_items = np.array(items, dtype=object)
        tuned = weight_sweep(bi.as_encoder(), vectors, sparse, entry_items, data.tune, GRID)
        best = max(GRID, key=lambda w: tuned[w]["acc@1"])
        devel = weight_sweep(bi.as_encoder(), vectors, sparse, entry_items, data.devel, sorted({0.0, best, 1.0, float("inf")}))
        out[abbreviations] = {"dense": devel[0.0], "sparse": devel[float("inf")], "fused": devel[best], "weight": best,
                              "fused_w1": devel[1.0], "tune_sweep": {f"w={w:g}": m for w, m in tuned.items()}}
    return out


def saved_index(run: Path) -> dict[str, float] | None:
    """The run's saved index on devel without abbreviation expansion (the CLI's protocol)."""
    from medrank.retrieval.concept import ConceptRetriever, evaluate_retriever
    from medrank.retrieval.concept_data import load_eval_set

    if not (run / "index").exists():
        return None
    return evaluate_retriever(ConceptRetriever.load(run / "index"), load_eval_set("ncbi-disease", "devel"))["metrics"]


def latency(run: Path, n: int) -> dict[str, object]:
    """One mention at a time against MEDIC through the saved index, after a warm-up: as saved (torch query encoder,
    every entry scored) and as served (:func:`~medrank.retrieval.concept.prepare_for_serving`: the fastest ONNX form
    of the query encoder that agrees with torch, an HNSW graph for the dense half, the exact sum over the pool of
    dense and sparse top entries), the two timed in turn on each mention; devel Acc of both (mentions as written)."""
    from medrank.config import set_threads
    from medrank.retrieval.concept import ConceptRetriever, evaluate_retriever, prepare_for_serving
    from medrank.retrieval.concept_data import load_eval_set

    set_threads(1)  # torch, BLAS, faiss and ONNX Runtime (which reads the requested count)
    devel = load_eval_set("ncbi-disease", "devel")
    saved = ConceptRetriever.load(run / "index")
    served = ConceptRetriever.load(run / "index")
    t0 = time.perf_counter()
    served.serving = prepare_for_serving(served, backend="auto", search="hnsw")
    prepare_seconds = time.perf_counter() - t0
    mentions = [q.text for q in devel.queries][:n]
    for m in mentions[:10]:
        saved.search(m, k=5)
        served.search(m, k=5)
    before = os.getloadavg()
    samples: dict[str, list[float]] = {"saved": [], "served": []}
    for m in mentions:
        for name, retriever in (("saved", saved), ("served", served)):
            t0 = time.perf_counter()
            retriever.search(m, k=5)
            samples[name].append(time.perf_counter() - t0)
    after = os.getloadavg()
    stages = stage_times(saved.index, served.index, mentions)
    accuracy = {name: evaluate_retriever(r, devel)["metrics"] for name, r in (("saved", saved), ("served", served))}
    return {"saved": common.percentiles(samples["saved"]), "served": common.percentiles(samples["served"]),
            "stages_p50_ms": stages,
            "served_as": served.serving, "prepare_seconds": round(prepare_seconds, 1),
            "devel_no_abbreviations": accuracy, "candidates": served.index.candidates,
            "index": str(run.relative_to(ROOT) / "index"), "entries": len(saved.index),
            "load_average_before": [round(x, 2) for x in before], "load_average_after": [round(x, 2) for x in after]}


def stage_times(saved: object, served: object, mentions: list[str]) -> dict[str, float]:
    """p50 ms of each stage of one query, both ways, timed in turn on each mention."""
    import numpy as np

    vectors = saved._vectors
    q = saved.dense.encoder.encode(mentions[:1], kind="query", show_progress=False)
    stages = {
        "encode, torch": lambda m: saved.dense.encoder.encode([m], kind="query", show_progress=False),
        "encode, served backend": lambda m: served.dense.encoder.encode([m], kind="query", show_progress=False),
        "dense, exact product over every entry": lambda m: q @ vectors.T,
        f"dense, HNSW top {served.candidates}": lambda m: served.dense._faiss_search(q, served.candidates),
        "sparse, matrix product": lambda m: (saved.sparse.transform([m]) @ saved.sparse.matrix_t).toarray(),
        "sparse, the mention's postings": lambda m: saved.sparse.entry_scores([m]),
    }
    times: dict[str, list[float]] = {k: [] for k in stages}
    for m in mentions:
        for name, run in stages.items():
            t0 = time.perf_counter()
            run(m)
            times[name].append(time.perf_counter() - t0)
    return {k: round(float(np.median(v)) * 1000, 3) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-mentions", type=int, default=200)
    ap.add_argument("--reuse-zero-shot", action="store_true",
                    help="take the zero-shot rows from the last bench/results/concept_biosyn.json (they do not change)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    out: dict[str, object] = {"environment": common.environment(2, 13, "../shared/data")}
    if args.reuse_zero_shot:
        last = json.loads((common.RESULTS / "concept_biosyn.json").read_text())["zero_shot"]
        zs = {abbr: last["abbreviations" if abbr else "no_abbreviations"] for abbr in (False, True)}
    else:
        zs = zero_shot((False, True))
    trained = {}
    for name, run in RUNS.items():
        res = run / "results.json"
        if res.exists():
            r = json.loads(res.read_text())
            trained[name] = {"results": {k: v for k, v in r.items() if k != "history"}, "history": r["history"],
                             "no_abbreviations_saved_index": saved_index(run)}
    lat_run = LATENCY_RUN if (LATENCY_RUN / "index").exists() else None
    lat = None
    if lat_run is not None:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):  # numpy's BLAS (the dense half's matrix product) on one thread too
            lat = latency(lat_run, args.latency_mentions)
    out.update({"zero_shot": {("abbreviations" if k else "no_abbreviations"): v for k, v in zs.items()},
                "trained": trained, "latency_1_thread": lat, "published_test_split": PUBLISHED})

    md = ["# NCBI-disease devel → MEDIC (BioSyn protocol), CPU", "",
          "787 devel mentions (visible split), 76,237 MEDIC entries (names + synonyms). Sparse = character uni+bigram "
          "TF-IDF (`char_wb`), dense = all-MiniLM-L6-v2 cosine, fused = dense + w · sparse with w tuned on a fixed-seed "
          "10 % carve-out of the training documents (devel only reported). Abbreviations: Schwartz–Hearst definitions of "
          "the mention's own abstract (`medrank.data.abbreviations`). `python bench/concept_biosyn.py`.", "",
          "| system | abbreviations | dense Acc@1 / @5 | sparse Acc@1 / @5 | fused Acc@1 / @5 | w |",
          "|---|---|---:|---:|---:|---:|"]
    for abbr, r in zs.items():
        md.append(f"| zero-shot MiniLM | {'expanded' if abbr else 'no'} | {pct(r['dense']['acc@1'])} / {pct(r['dense']['acc@5'])} | "
                  f"{pct(r['sparse']['acc@1'])} / {pct(r['sparse']['acc@5'])} | {pct(r['fused']['acc@1'])} / {pct(r['fused']['acc@5'])} | {r['weight']:g} |")
    for name, t in trained.items():
        r = t["results"]
        d = r["devel"]
        md.append(f"| {name}, best epoch {r['best_epoch']} | expanded | {pct(d['dense']['acc@1'])} / {pct(d['dense']['acc@5'])} | "
                  f"{pct(d['sparse']['acc@1'])} / {pct(d['sparse']['acc@5'])} | {pct(d['fused_tuned']['acc@1'])} / {pct(d['fused_tuned']['acc@5'])} | "
                  f"{r['tuned_sparse_weight']:g} (learned {r['learned_sparse_weight']:.3f}) |")
        s = t["no_abbreviations_saved_index"]
        if s:
            md.append(f"| {name}, saved `index/` | no | — | — | {pct(s['acc@1'])} / {pct(s['acc@5'])} | {r['tuned_sparse_weight']:g} |")
    for name, (a1, a5) in PUBLISHED.items():
        md.append(f"| {name}: **test split**, BioBERT-base, GPU | Ab3P | — | — | {a1:.1f} / {a5:.1f} | learned |")
    md += ["", "Training time per epoch (`history.json` seconds: mining + training + evaluation), under the load average of each run:", ""]
    for name, t in trained.items():
        if t["results"]["config"].get("dictionary_mentions") and t["results"]["config"].get("train_layers") == 1:
            md.append(f"- {name}: the top-block run's checkpoints, finished again with `dictionary_mentions: true` "
                      f"({t['results']['seconds']:.0f} s: the added names encoded, the weight tuned, the index written)")
            continue
        epochs = [h for h in t["history"] if h["epoch"] > 0]
        rows = ", ".join(f"epoch {h['epoch']}: {h['seconds']:.0f} s" for h in epochs)
        md.append(f"- {name}: {rows}; {sum(h['seconds'] for h in epochs) / 60:.0f} min of epochs, "
                  f"{t['results']['seconds'] / 60:.0f} min for the whole `medrank train` (the last finish included); "
                  f"{t['results']['train_mentions']:,} distinct training mentions, "
                  f"batch {t['results']['config']['batch_size']}, max steps per epoch {t['results']['config']['max_steps_per_epoch']}")
    if lat:
        sv, se, acc = lat["saved"], lat["served"], lat["devel_no_abbreviations"]
        md += ["", f"Latency, one mention against MEDIC through `{lat['index']}` ({lat['entries']:,} entries), 1 thread, "
               f"{sv['n']} devel mentions, the two forms timed in turn on each mention; load average {lat['load_average_before']} "
               f"before, {lat['load_average_after']} after:", "",
               "| form | p50 ms | p95 ms | devel Acc@1 / @5 (mentions as written) |", "|---|---:|---:|---:|",
               f"| as saved: torch query encoder, every entry scored | {sv['p50_ms']:.1f} | {sv['p95_ms']:.1f} | "
               f"{pct(acc['saved']['acc@1'])} / {pct(acc['saved']['acc@5'])} |",
               f"| served: {lat['served_as']}, exact sum over the top {lat['candidates']} dense + top {lat['candidates']} sparse "
               f"entries | {se['p50_ms']:.1f} | {se['p95_ms']:.1f} | {pct(acc['served']['acc@1'])} / {pct(acc['served']['acc@5'])} |",
               "", f"Preparing the served form (agreement check, ONNX export or cache, HNSW graph) took {lat['prepare_seconds']:.0f} s "
               "at load.", "", "Stages of one query, p50 ms over the same mentions (timed in turn): "
               + "; ".join(f"{k} {v:.2f}" for k, v in lat["stages_p50_ms"].items()) + "."]
    common.write("concept_biosyn", out, "\n".join(md))


if __name__ == "__main__":
    main()
