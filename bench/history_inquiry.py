"""Symptom inquiry with simulated patients (DXY and DDXPlus), beside the published anchors, plus the
latency of one next-question step.

Both datasets are carved (seed 13, 20 %) into training and validation records; the likelihood tables
are fitted on the training part and the stopping rule / differential cut-off tuned on an inner split
of it (seed 14); the figures are on the validation carve-out. ``kb@B`` asks the first stage's best
question until the budget; ``engine@B`` adds the stopping rule. Step latency: one
``next_questions(k=5)`` (first stage over every open question) + ``differential(k=10)`` on 1 thread,
over real mid-inquiry states of validation patients; the re-rank of 30 candidates is timed with the
global re-ranker on the MiniLM base (untrained heads: the cost does not depend on the weights),
reported separately and summed.

The next-question table (nDCG / MAP of "which question comes next") scores the first stage's
order, MiniLM / e5-small as a bi-encoder without fine-tuning, and the global re-rankers trained by
``configs/history/cpu/inquiry-*-global.yaml`` (when their runs exist) on a seeded subset of the
validation sequences built by ``python -m medrank.pipelines.history.inquiry.sequences en|zh``; the
interactive rows with the re-ranker run on the first ``--rerank-patients`` validation patients, beside
the first stage alone on the same patients.

    python bench/history_inquiry.py [--steps 200] [--table-samples 100] [--rerank-patients 20]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import common
import numpy as np

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.inquiry.build import build_engine, load_corpus
from medrank.pipelines.history.inquiry.evaluation import evaluate_inquiry
from medrank.pipelines.history.inquiry.simulate import answer, opening

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


def step_latency(language: str, steps: int, seed: int) -> dict:
    engine = build_engine(language)
    corpus = load_corpus(language)
    rng = np.random.default_rng(seed)
    states = []
    for p in corpus.valid:  # real mid-inquiry states: the opening plus the first t answers
        findings, dialogue = opening(engine, p), [p.text or "self-report"]
        t = int(rng.integers(0, 8))
        for _ in range(t):
            q = engine.next_questions(dialogue, findings, k=1)
            if not q:
                break
            findings += answer(engine, p, q[0].finding)
            dialogue += [q[0].text, "yes"]
        states.append((dialogue, findings))
    for dialogue, findings in states[:5]:  # warm-up
        engine.next_questions(dialogue, findings, k=5)
        engine.differential(findings, k=10)
    samples = []
    for i in range(steps):
        dialogue, findings = states[i % len(states)]
        t0 = time.perf_counter()
        engine.next_questions(dialogue, findings, k=5)
        engine.differential(findings, k=10)
        engine.should_stop(findings, len(dialogue) // 2)
        samples.append(time.perf_counter() - t0)
    return common.percentiles(samples)


def rerank_latency(language: str, steps: int) -> dict:
    from medrank.pipelines.history.models import GlobalReranker

    model = GlobalReranker.from_pretrained("minilm")
    engine = build_engine(language)
    corpus = load_corpus(language)
    texts = [engine.finding_label(n) for n in engine.finding_names()[:30]]
    dialogue = "\n".join([corpus.valid[0].text or "I have a cough and a fever."] + texts[:6])
    for _ in range(3):
        model.score(dialogue, texts)
    samples = []
    for _ in range(steps):
        t0 = time.perf_counter()
        model.score(dialogue, texts)
        samples.append(time.perf_counter() - t0)
    return common.percentiles(samples)


RUNS = {"en": Path("runs/history/inquiry-ddxplus-global"), "zh": Path("runs/history/inquiry-dxy-global")}
BASES = {"en": "minilm", "zh": "e5-small"}


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
    if (RUNS[language] / "model").is_dir():
        kind, model = load_reranker(RUNS[language])
        rows[f"{kind} re-ranker ({RUNS[language].name})"] = evaluate_scorer(model.score, samples, texts)["metrics"]
    return {"samples": len(samples), "file": str(folder / "valid.jsonl"), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--table-samples", type=int, default=100)
    ap.add_argument("--rerank-patients", type=int, default=20)
    ap.add_argument("--rerank-steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--only", choices=("ddxplus",),
                    help="re-run only the DDXPlus validation table and keep every other section of the "
                         "existing bench/results/history_inquiry.json (the Markdown says when each was run)")
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    if args.only:
        payload = json.loads((common.RESULTS / "history_inquiry.json").read_text(encoding="utf-8"))
        payload["reports"]["en"] = evaluate_inquiry("en")
        payload["ddxplus_environment"] = {**env, "command": "python bench/history_inquiry.py --only ddxplus"}
        common.write("history_inquiry", payload, render(payload))
        return
    reports = {lang: evaluate_inquiry(lang) for lang in ("zh", "en")}
    with_reranker = {lang: evaluate_inquiry(lang, model=RUNS[lang], max_patients=args.rerank_patients)
                     for lang in ("zh", "en") if (RUNS[lang] / "model").is_dir()}
    tables = {lang: next_question_table(lang, args.table_samples, args.seed) for lang in ("zh", "en")}
    latency = {lang: {"first stage + differential": step_latency(lang, args.steps, args.seed)} for lang in ("en", "zh")}
    rerank = rerank_latency("en", args.rerank_steps)
    for lang in latency:
        latency[lang]["global re-ranker, 30 candidates (MiniLM base)"] = rerank
        latency[lang]["sum of p50 (ms)"] = round(latency[lang]["first stage + differential"]["p50_ms"] + rerank["p50_ms"], 3)
    payload = {"environment": env, "reports": reports, "anchors": {"dxy": ANCHORS_DXY, "ddxplus": ANCHORS_DDX},
               "with_reranker": with_reranker, "next_question_table": tables,
               "latency": latency, "note": DATA_NOTE}
    common.write("history_inquiry", payload, render(payload))


def render(payload: dict) -> str:
    reports, with_reranker = payload["reports"], payload["with_reranker"]
    tables, latency = payload["next_question_table"], payload["latency"]
    rerank = next(iter(latency.values()))["global re-ranker, 30 candidates (MiniLM base)"]
    md = ["## DXY (validation carve-out, 85 dialogues)", "",
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
    md += ["", DDF1_NOTE]
    if "ddxplus_environment" in payload:
        e = payload["ddxplus_environment"]
        md += ["", f"This DDXPlus table was re-run on its own (`{e['command']}`, {e['date']}, load average "
               f"{e['load_average_1_5_15']}); the other sections are from the run in the header, made with the "
               "earlier DDXPlus first stage (information gain alone) and differential model (fitted on full "
               "records, reference with every listed condition)."]
    md += ["", DATA_NOTE]
    for lang, rep in with_reranker.items():
        names = METRICS_MD[lang]
        md += ["", f"## {'DDXPlus' if lang == 'en' else 'DXY'}: with and without the re-ranker "
               f"(first {rep['patients']} validation patients)", "",
               "| system | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for name, m in rep["systems"].items():
            label = name.replace("engine@", "kb + re-ranker + stopping rule @") if name.startswith("engine@") else name
            md.append(f"| {label} | " + " | ".join(f"{m[k]:.3f}" for k in names) + " |")
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
    md += ["", "## One next-question step, 1 thread (ms)", "",
           "| language | first stage + differential p50 | p95 | re-rank 30 candidates p50 | sum of p50 |",
           "|---|---|---|---|---|"]
    for lang, lat in latency.items():
        fs = lat["first stage + differential"]
        md.append(f"| {lang} | {fs['p50_ms']:.2f} | {fs['p95_ms']:.2f} | {rerank['p50_ms']:.2f} | "
                  f"{lat['sum of p50 (ms)']:.2f} |")
    md += ["", f"Calibration (tuned on an inner split of the training part): "
           f"DXY threshold {reports['zh']['calibration']['threshold']}; DDXPlus threshold "
           f"{reports['en']['calibration']['threshold']}, differential membership cut-off "
           f"{reports['en']['calibration']['cutoff']}; DXY self-report prior weight "
           f"{reports['zh']['calibration']['text_weight']}."]
    return "\n".join(md)


if __name__ == "__main__":
    main()
