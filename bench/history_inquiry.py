"""Symptom inquiry with simulated patients (DXY and DDXPlus), beside the published anchors; the paper's
next-question table; the interactive protocol with and without the trained re-rankers; the latency of one
next-question step.

Both datasets are carved (seed 13, 20 %) into training and validation records; the likelihood tables
are fitted on the training part and the stopping rule / differential cut-off tuned on an inner split
of it (seed 14); the figures are on the validation carve-out. ``kb@B`` asks the first stage's best
question until the budget; ``engine@B`` adds the stopping rule.

The next-question table (nDCG / MAP of "which question comes next") scores the first stage's order,
MiniLM / e5-small as a bi-encoder without fine-tuning, and the cross-encoders and global re-rankers
trained by ``configs/history/cpu/inquiry-*-{cross-encoder,global}.yaml`` (when their runs exist) on a
seeded subset of the validation sequences built by ``python -m medrank.pipelines.history.inquiry.sequences
en|zh``; the interactive rows with the global re-ranker run on the first ``--rerank-patients`` validation
patients, beside the first stage alone on the same patients (on the backend the service would choose,
``backend="auto"``).

Step latency, 1 thread, over real mid-inquiry states of validation patients: the first stage
(``next_questions(k=5)``) + ``differential(k=10)`` + stopping rule; the trained global re-ranker
re-ranking the first stage's top 30 on torch, ONNX Runtime fp32 and int8 (timed interleaved, with their
agreement with torch); the backend ``auto`` chooses; and the whole step with that re-ranker attached.

    python bench/history_inquiry.py [--steps 200] [--table-samples 100] [--rerank-patients 20] [--rerank-states 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import common
import numpy as np

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.inquiry.build import build_engine, load_corpus
from medrank.pipelines.history.inquiry.evaluation import evaluate_inquiry
from medrank.pipelines.history.inquiry.simulate import answer, answer_text, opening, opening_text

METRICS_MD = {"en": ["GTPA@1", "PER", "DDF1", "IL"], "zh": ["accuracy", "symptom_recall", "turns"]}
ANCHORS_DXY = [
    {"system": "KR-DS (Xu et al. 2019)", "accuracy": 0.740, "symptom_recall": 0.399, "turns": 5.65},
    {"system": "HRL (Zhong et al. 2022)", "accuracy": 0.779, "symptom_recall": 0.424, "turns": 8.61},
    {"system": "classifier given every implicit symptom (upper bound)", "accuracy": 0.846},
]
ANCHORS_DDX = [
    {"system": "AARLC (DDXPlus paper)", "GTPA@1": 75.39, "PER": 54.55, "DDF1": 78.24, "IL": 25.75},
    {"system": "BASD (DDXPlus paper)", "GTPA@1": 67.71, "PER": 88.18, "DDF1": 83.69, "IL": 17.86},
]
DATA_NOTE = ("The data differ: the anchors are on the official test splits (DXY: 104 dialogues; DDXPlus: the "
             "full release, 134k test patients); these figures are on fixed-seed validation carve-outs of the "
             "visible records (DXY: 85 of the 423 training dialogues; DDXPlus: 418 of the 2,089 patients of the "
             "mini release, fitted on the other 1,671).")

DDF1_NOTE = ("DDR / DDP / DDF1 as the DDXPlus paper's code computes them: the reference differential is the "
             "conditions with probability above 0.01, the engine's differential set is the conditions whose "
             "membership probability reaches the tuned cut-off; per-patient recall, precision and F1, averaged "
             "(an empty set counts as 1 in a denominator).")


def loadavg() -> list[float]:
    return [round(float(x), 2) for x in Path("/proc/loadavg").read_text().split()[:3]]


def mid_inquiry_states(language: str, seed: int) -> tuple[object, list[tuple[list[str], list]]]:
    """Real mid-inquiry states of the validation patients: the opening plus the first ``t`` answered questions
    (``t`` drawn from 0-7), the dialogue worded as the simulated patients and the re-rankers' training
    sequences word it."""
    engine = build_engine(language)
    corpus = load_corpus(language)
    rng = np.random.default_rng(seed)
    states = []
    for p in corpus.valid:
        findings = opening(engine, p)
        dialogue = [opening_text(engine, p, findings)]
        for _ in range(int(rng.integers(0, 8))):
            q = engine.next_questions(dialogue, findings, k=1, rerank=False)
            if not q:
                break
            reply = answer(engine, p, q[0].finding)
            findings += reply
            dialogue += [q[0].text, answer_text(engine, q[0].finding, [f.value for f in reply])]
        states.append((dialogue, findings))
    return engine, states


def step_latency(engine, states: list, steps: int) -> dict:
    """First stage (next_questions k=5) + differential (k=10) + stopping rule, no re-ranker."""
    for dialogue, findings in states[:5]:  # warm-up
        engine.next_questions(dialogue, findings, k=5, rerank=False)
        engine.differential(findings, k=10)
    samples = []
    for i in range(steps):
        dialogue, findings = states[i % len(states)]
        t0 = time.perf_counter()
        engine.next_questions(dialogue, findings, k=5, rerank=False)
        engine.differential(findings, k=10)
        engine.should_stop(findings, len(dialogue) // 2)
        samples.append(time.perf_counter() - t0)
    return common.percentiles(samples)


def rerank_inputs(engine, states: list) -> list[tuple[str, list[str]]]:
    """(dialogue text as the engine hands it to the re-ranker, the first stage's top-30 question texts)."""
    out = []
    for dialogue, findings in states:
        ranked = engine.next_questions(dialogue, findings, k=engine.rerank_k, rerank=False)
        if len(ranked) >= 2:
            out.append((engine.reranker_text(dialogue), [q.text for q in ranked]))
    return out


def rerank_backends(language: str, engine, states: list, limit: int, seed: int) -> dict:
    """The trained global re-ranker on torch / ONNX fp32 / ONNX int8 over the same real states: agreement
    with torch (score correlation, identical top-5 order), latency (timed interleaved), the backend the
    service would choose (``backend="auto"``: its own check states), and one whole step with it attached."""
    from medrank.pipelines.history.inquiry.build import attach_reranker, reranker_checks
    from medrank.pipelines.history.models import GlobalReranker
    from medrank.pipelines.history.models.backend_choice import choose_reranker_backend, compare
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    run = RUNS[language]["global"]
    model = GlobalReranker.load(run / "model") if (run / "model").is_dir() else GlobalReranker.from_pretrained(BASES[language])
    source = run.name if (run / "model").is_dir() else f"{BASES[language]} base, untrained head"
    inputs = rerank_inputs(engine, states)
    picked = [inputs[i] for i in sorted(np.random.default_rng(seed).choice(len(inputs), min(limit, len(inputs)), replace=False))]
    scorers = {"torch": model, "onnx": OnnxGlobalReranker(model), "onnx-int8": OnnxGlobalReranker(model, quantized=True)}
    encoded = [model.encode(d, q) for d, q in picked]
    tokens = [len(e.input_ids) for e in encoded]
    dialogue_tokens = [e.segment_ids.count(0) for e in encoded]  # [CLS] dialogue [SEP]
    for d, q in picked[:3]:  # warm-up
        for s in scorers.values():
            s.score(d, q)
    times: dict[str, list[float]] = {b: [] for b in scorers}
    scores: dict[str, list[list[float]]] = {b: [] for b in scorers}
    load_before = loadavg()
    for d, q in picked:
        for b, s in scorers.items():
            t0 = time.perf_counter()
            out = s.score(d, q)
            times[b].append(time.perf_counter() - t0)
            scores[b].append(out)
    load_after = loadavg()
    agreement = {b: compare(scores["torch"], scores[b]).as_dict() for b in ("onnx", "onnx-int8")}
    # one whole step as served: first stage + the backend the service would choose re-ranking 30 candidates
    # + differential
    if (run / "model").is_dir():
        attach_reranker(engine, run, "auto")
    else:
        choice = choose_reranker_backend(model, reranker_checks(engine))
        engine.reranker = lambda dialogue, texts: choice.scorer.score(dialogue, list(texts))
        engine.reranker_backend = {"kind": "global", "backend": choice.backend, "reason": choice.reason}
    whole = []
    for dialogue, findings in states[: len(picked)]:
        t0 = time.perf_counter()
        engine.next_questions(dialogue, findings, k=5)
        engine.differential(findings, k=10)
        engine.should_stop(findings, len(dialogue) // 2)
        whole.append(time.perf_counter() - t0)
    return {
        "model": source, "states": len(picked), "tokens": {"p50": float(np.median(tokens)), "max": max(tokens),
                                                           "min": min(tokens),
                                                           "dialogue_block_p50": float(np.median(dialogue_tokens))},
        "latency": {b: common.percentiles(v) for b, v in times.items()}, "agreement_with_torch": agreement,
        "load_average_during": {"before": load_before, "after": load_after},
        "service_choice": {"backend": engine.reranker_backend["backend"], "reason": engine.reranker_backend["reason"]},
        "whole_step_with_reranker": common.percentiles(whole),
    }


RUN_ROOT = Path("runs/history")
RUNS = {lang: {kind: RUN_ROOT / f"inquiry-{name}-{kind}" for kind in ("global", "cross-encoder")}
        for lang, name in (("en", "ddxplus"), ("zh", "dxy"))}
BASES = {"en": "minilm", "zh": "e5-small"}
KIND_LABEL = {"global": "global re-ranker", "cross-encoder": "cross-encoder"}


def next_question_table(language: str, samples_limit: int, seed: int) -> dict:
    """nDCG / MAP / MRR of the next question on validation sequences: first stage vs re-rankers."""
    from medrank.pipelines.history.builders import default_out_dir
    from medrank.pipelines.history.data import bank_texts, read_bank, read_samples
    from medrank.pipelines.history.evaluation import (
        evaluate_scorer,
        first_stage_metrics,
        load_reranker,
        subsample,
    )
    from medrank.pipelines.history.models import HistoryBiEncoder

    folder = default_out_dir("inquiry-ddxplus" if language == "en" else "inquiry-dxy")
    if not (folder / "valid.jsonl").exists():
        return {"missing": f"{folder}: build with python -m medrank.pipelines.history.inquiry.sequences {language}"}
    samples = subsample(read_samples(folder / "valid.jsonl"), samples_limit, seed)
    texts = bank_texts(read_bank(folder / "bank.jsonl"))
    rows = {"first stage (expected information gain)": first_stage_metrics(samples)}
    bi = HistoryBiEncoder.from_pretrained(BASES[language])
    rows[f"bi-encoder ({BASES[language]}, not fine-tuned)"] = evaluate_scorer(bi.score, samples, texts)["metrics"]
    missing = []
    for kind in ("cross-encoder", "global"):
        run = RUNS[language][kind]
        if (run / "model").is_dir():
            _, model = load_reranker(run)
            rows[f"{KIND_LABEL[kind]} ({run.name})"] = evaluate_scorer(model.score, samples, texts)["metrics"]
        else:
            missing.append(str(run))
    return {"samples": len(samples), "file": str(folder / "valid.jsonl"), "rows": rows, "runs_missing": missing}


def with_and_without_reranker(language: str, patients: int, kinds: tuple[str, ...] = ("global",)) -> dict:
    """The interactive protocol on the first ``patients`` validation patients: the first stage alone, and the
    engine with each trained re-ranker of ``kinds`` (the global one on the backend the service would choose;
    the cross-encoder costs 30 passes a question, so by default it is scored offline only)."""
    out: dict = {"patients": patients, "systems": {}, "rerankers": {}}
    for kind in kinds:
        run = RUNS[language][kind]
        if not (run / "model").is_dir():
            continue
        report = evaluate_inquiry(language, model=run, max_patients=patients, backend="auto" if kind == "global" else "torch")
        out["patients"] = report["patients"]
        for name, metrics in report["systems"].items():
            if name.startswith("kb@"):
                out["systems"].setdefault(name, metrics)
            else:
                out["systems"][name.replace("engine@", f"kb + {KIND_LABEL[kind]} + stopping rule @")] = metrics
        out["rerankers"][kind] = {**(report.get("reranker") or {}), "run": str(run), "seconds": report["seconds"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--table-samples", type=int, default=100)
    ap.add_argument("--rerank-patients", type=int, default=20)
    ap.add_argument("--rerank-states", type=int, default=40)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    env["command"] = "python bench/history_inquiry.py " + " ".join(sys.argv[1:])
    reports = {lang: evaluate_inquiry(lang) for lang in ("zh", "en")}
    with_reranker = {lang: with_and_without_reranker(lang, args.rerank_patients) for lang in ("zh", "en")}
    tables = {lang: next_question_table(lang, args.table_samples, args.seed) for lang in ("zh", "en")}
    latency = {}
    for lang in ("en", "zh"):
        engine, states = mid_inquiry_states(lang, args.seed)
        first = step_latency(engine, states, args.steps)
        rerank = rerank_backends(lang, engine, states, args.rerank_states, args.seed)
        chosen = rerank["service_choice"]["backend"]
        latency[lang] = {"first stage + differential": first, "rerank": rerank,
                         "sum of p50 (ms)": round(first["p50_ms"] + rerank["latency"][chosen]["p50_ms"], 3)}
    env["load_average_at_end"] = loadavg()
    payload = {"environment": env, "reports": reports, "anchors": {"dxy": ANCHORS_DXY, "ddxplus": ANCHORS_DDX},
               "with_reranker": with_reranker, "next_question_table": tables,
               "latency": latency, "note": DATA_NOTE}
    common.write("history_inquiry", payload, render(payload))


def render(payload: dict) -> str:
    reports, with_reranker = payload["reports"], payload["with_reranker"]
    tables, latency, env = payload["next_question_table"], payload["latency"], payload["environment"]
    md = [f"Command: `{env['command'].strip()}`; load average at the start {env['load_average_1_5_15']}, at the end "
          f"{env['load_average_at_end']} (2 cores shared with other sessions).", "",
          "## DXY (validation carve-out, 85 dialogues)", "",
          "| system | accuracy | symptom recall | turns |", "|---|---|---|---|"]
    for name, m in reports["zh"]["systems"].items():
        md.append(f"| {name} | {m['accuracy']:.3f} | {m['symptom_recall']:.3f} | {m['turns']:.2f} |")
    for a in ANCHORS_DXY:
        md.append(f"| {a['system']} (anchor) | {a['accuracy']:.3f} | {a.get('symptom_recall', '')} | "
                  f"{a.get('turns', '')} |")
    md += ["", "## DDXPlus (validation carve-out, 418 patients of the mini release)", "",
           "| system | GTPA@1 | PER | DDR | DDP | DDF1 | IL |", "|---|---|---|---|---|---|---|"]
    for name, m in reports["en"]["systems"].items():
        md.append(f"| {name} | {m['GTPA@1']:.2f} | {m['PER']:.2f} | {m['DDR']:.2f} | {m['DDP']:.2f} | "
                  f"{m['DDF1']:.2f} | {m['IL']:.2f} |")
    for a in ANCHORS_DDX:
        md.append(f"| {a['system']} (anchor) | {a['GTPA@1']:.2f} | {a['PER']:.2f} | | | {a['DDF1']:.2f} | "
                  f"{a['IL']:.2f} |")
    md += ["", DDF1_NOTE, "", DATA_NOTE]
    for lang, rep in with_reranker.items():
        names = METRICS_MD[lang]
        md += ["", f"## {'DDXPlus' if lang == 'en' else 'DXY'}: with and without the re-rankers "
               f"(first {rep['patients']} validation patients)", ""]
        if not rep["systems"]:
            md.append("no trained re-ranker run")
            continue
        md += ["| system | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for name, m in rep["systems"].items():
            md.append(f"| {name} | " + " | ".join(f"{m[k]:.3f}" for k in names) + " |")
        md.append("")
        md += [f"- {KIND_LABEL[kind]} ({Path(r['run']).name}): {r.get('backend', 'torch')} — {r.get('reason', '')}"
               for kind, r in rep["rerankers"].items()]
    for lang, table in tables.items():
        md += ["", f"## Next question on {'DDXPlus' if lang == 'en' else 'DXY'} validation sequences "
               f"({table.get('samples', 0)} samples)", ""]
        if "rows" not in table:
            md.append(table.get("missing", "not built"))
            continue
        md += ["| system | nDCG | MAP | MRR | nDCG@5 |", "|---|---|---|---|---|"]
        for name, m in table["rows"].items():
            md.append(f"| {name} | {100 * m['ndcg']:.1f} | {100 * m['map']:.1f} | {100 * m['mrr']:.1f} | "
                      f"{100 * m['ndcg@5']:.1f} |")
        if table.get("runs_missing"):
            md += ["", "Not trained (no row): " + ", ".join(table["runs_missing"])]
    md += ["", "## One next-question step, 1 thread (ms)", "",
           "Real mid-inquiry states of the validation patients (the opening and 0-7 answered questions). "
           "The re-rank of the first stage's top 30 is timed on torch, ONNX Runtime fp32 and int8 interleaved on "
           "the same states; agreement is with the torch scores of the same trained model on those states; "
           "\"service\" is the backend `backend=auto` chooses (the fastest that agrees, on its own check states); "
           "the whole step runs next_questions(k=5) with that re-ranker attached + differential + stopping rule.", "",
           "| language | re-ranker | tokens p50 (dialogue block) | first stage + differential p50 | re-rank torch p50 | onnx p50 | "
           "onnx-int8 p50 | service backend | sum of p50 | whole step p50 / p95 | load average during |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for lang, lat in latency.items():
        fs, rr = lat["first stage + differential"], lat["rerank"]
        r = rr["latency"]
        md.append(f"| {lang} | {rr['model']} | {rr['tokens']['p50']:.0f} ({rr['tokens']['dialogue_block_p50']:.0f}) | {fs['p50_ms']:.2f} | {r['torch']['p50_ms']:.1f} | "
                  f"{r['onnx']['p50_ms']:.1f} | {r['onnx-int8']['p50_ms']:.1f} | {rr['service_choice']['backend']} | "
                  f"{lat['sum of p50 (ms)']:.1f} | {rr['whole_step_with_reranker']['p50_ms']:.1f} / "
                  f"{rr['whole_step_with_reranker']['p95_ms']:.1f} | {rr['load_average_during']['before']} → "
                  f"{rr['load_average_during']['after']} |")
    md += ["", "| language | backend | score correlation with torch (min / mean) | same top-5 order | states |",
           "|---|---|---|---|---|"]
    for lang, lat in latency.items():
        for b, a in lat["rerank"]["agreement_with_torch"].items():
            md.append(f"| {lang} | {b} | {a['min_correlation']:.4f} / {a['mean_correlation']:.4f} | "
                      f"{100 * a['same_top5']:.0f} % | {a['inputs']} |")
    md += ["", f"Calibration (tuned on an inner split of the training part): "
           f"DXY threshold {reports['zh']['calibration']['threshold']}; DDXPlus threshold "
           f"{reports['en']['calibration']['threshold']}, differential membership cut-off "
           f"{reports['en']['calibration']['cutoff']}; DXY self-report prior weight "
           f"{reports['zh']['calibration']['text_weight']}."]
    return "\n".join(md)


if __name__ == "__main__":
    main()
