"""Symptom inquiry with simulated patients (DXY and DDXPlus), beside the published anchors; the paper's
next-question table; the interactive protocol with and without the trained re-rankers; the latency of one
next-question step.

Both datasets are carved (seed 13, 20 %) into training and validation records; the likelihood tables
are fitted on the training part and the stopping rule / differential cut-off tuned on an inner split
of it (seed 14); the figures are on the validation carve-out. ``kb@B`` asks the first stage's best
question until the budget; ``engine@B`` adds the stopping rule.

The next-question table (nDCG / MAP of "which question comes next") scores the first stage's order,
MiniLM / e5-small as a bi-encoder without fine-tuning, and the cross-encoders and global re-rankers
trained by ``configs/history/cpu/inquiry-*-{cross-encoder,global,global-slim}.yaml`` (when their runs exist;
the slim global re-rankers keep only the first transformer blocks of their base) on a
seeded subset of the validation sequences built by ``python -m medrank.pipelines.history.inquiry.sequences
en|zh``; the interactive rows with the global re-ranker run on the first ``--rerank-patients`` validation
patients, beside the first stage alone on the same patients (on the backend the service would choose,
``backend="auto"``).

Step latency, 1 thread, over real mid-inquiry states of validation patients: the first stage
(``next_questions(k=5)``) + ``differential(k=10)`` + stopping rule; each trained global re-ranker (full
and slim) re-ranking the first stage's top 30 on torch, ONNX Runtime fp32 and int8 (all timed interleaved,
with their agreement with torch); the backend ``auto`` chooses; and the whole step with that re-ranker
attached (the engines of both runs timed interleaved).

    python bench/history_inquiry.py [--steps 200] [--table-samples 100] [--rerank-patients 20] [--rerank-states 40]
                                    [--only protocol,interactive,table,latency]

``--only`` runs the named sections and keeps the others from the last ``bench/results/history_inquiry.json``
(the Markdown names the date and command of every kept section).
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


def rerank_backends(language: str, engine, states: list, limit: int, seed: int,
                    kinds: tuple[str, ...] = ("global", "global-slim"), runs: dict[str, Path] | None = None) -> dict:
    """Each trained global re-ranker of ``kinds`` (the full and the slim run) on torch / ONNX fp32 / ONNX int8
    over the same real states, all timed interleaved in this process: agreement with its own torch scores
    (score correlation, identical top-5 order), latency, the backend the service would choose
    (``backend="auto"``: its own check states), and one whole step with it attached (the engines of the
    runs also timed interleaved)."""
    from medrank.pipelines.history.inquiry.build import attach_reranker, build_engine, reranker_checks
    from medrank.pipelines.history.models import GlobalReranker
    from medrank.pipelines.history.models.backend_choice import choose_reranker_backend, compare
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    if runs is None:
        runs = ({k: RUNS[language][k] for k in kinds if (RUNS[language][k] / "model").is_dir()}
                or {"global": RUNS[language]["global"]})
    inputs = rerank_inputs(engine, states)
    picked = [inputs[i] for i in sorted(np.random.default_rng(seed).choice(len(inputs), min(limit, len(inputs)), replace=False))]
    models, scorers, out = {}, {}, {}
    for kind, run in runs.items():
        trained = (run / "model").is_dir()
        model = GlobalReranker.load(run / "model") if trained else GlobalReranker.from_pretrained(BASES[language])
        models[kind] = model
        for b, s in (("torch", model), ("onnx", OnnxGlobalReranker(model)),
                     ("onnx-int8", OnnxGlobalReranker(model, quantized=True))):
            scorers[(kind, b)] = s
        encoded = [model.encode(d, q) for d, q in picked]
        tokens = [len(e.input_ids) for e in encoded]
        dialogue_tokens = [e.segment_ids.count(0) for e in encoded]  # [CLS] dialogue [SEP]
        out[kind] = {"model": run.name if trained else f"{BASES[language]} base, untrained head",
                     "run": str(run), "layers": int(model.encoder.config.num_hidden_layers), "states": len(picked),
                     "tokens": {"p50": float(np.median(tokens)), "max": max(tokens), "min": min(tokens),
                                "dialogue_block_p50": float(np.median(dialogue_tokens))}}
    for d, q in picked[:3]:  # warm-up
        for s in scorers.values():
            s.score(d, q)
    times: dict = {key: [] for key in scorers}
    cpu: dict = {key: [] for key in scorers}
    scores: dict = {key: [] for key in scorers}
    load_before = loadavg()
    for d, q in picked:
        for key, s in scorers.items():
            t0, c0 = time.perf_counter(), time.process_time()
            result = s.score(d, q)
            times[key].append(time.perf_counter() - t0)
            cpu[key].append(time.process_time() - c0)
            scores[key].append(result)
    load_after = loadavg()
    # one whole step as served: first stage + the backend the service would choose re-ranking 30 candidates
    # + differential; one engine per run, timed interleaved on the same states
    engines = {}
    for kind, run in runs.items():
        served = build_engine(language)
        if (run / "model").is_dir():
            attach_reranker(served, run, "auto")
        else:
            choice = choose_reranker_backend(models[kind], reranker_checks(served))
            served.reranker = lambda dialogue, texts, c=choice: c.scorer.score(dialogue, list(texts))
            served.reranker_backend = {"kind": "global", "backend": choice.backend, "reason": choice.reason}
        engines[kind] = served
    whole: dict = {kind: [] for kind in engines}
    whole_cpu: dict = {kind: [] for kind in engines}
    whole_load_before = loadavg()
    for dialogue, findings in states[: len(picked)]:
        for kind, served in engines.items():
            t0, c0 = time.perf_counter(), time.process_time()
            served.next_questions(dialogue, findings, k=5)
            served.differential(findings, k=10)
            served.should_stop(findings, len(dialogue) // 2)
            whole[kind].append(time.perf_counter() - t0)
            whole_cpu[kind].append(time.process_time() - c0)
    whole_load_after = loadavg()
    for kind in runs:
        out[kind].update({
            "latency": {b: common.percentiles(times[(kind, b)]) for b in ("torch", "onnx", "onnx-int8")},
            # CPU time of this process (1 thread): what the step costs on a core of its own, whatever else runs
            "cpu_time": {b: common.percentiles(cpu[(kind, b)]) for b in ("torch", "onnx", "onnx-int8")},
            "agreement_with_torch": {b: compare(scores[(kind, "torch")], scores[(kind, b)]).as_dict()
                                     for b in ("onnx", "onnx-int8")},
            "load_average_during": {"before": load_before, "after": load_after},
            "service_choice": {"backend": engines[kind].reranker_backend["backend"],
                               "reason": engines[kind].reranker_backend["reason"]},
            "whole_step_with_reranker": common.percentiles(whole[kind]),
            "whole_step_cpu_time": common.percentiles(whole_cpu[kind]),
            "whole_step_load_average": {"before": whole_load_before, "after": whole_load_after},
        })
    return out


RUN_ROOT = Path("runs/history")
RUNS = {lang: {kind: RUN_ROOT / f"inquiry-{name}-{kind}" for kind in ("global", "global-slim", "cross-encoder")}
        for lang, name in (("en", "ddxplus"), ("zh", "dxy"))}
BASES = {"en": "minilm", "zh": "e5-small"}
KIND_LABEL = {"global": "global re-ranker", "global-slim": "slim global re-ranker", "cross-encoder": "cross-encoder"}


def run_label(kind: str, run: Path) -> str:
    """``KIND_LABEL`` plus the saved model's transformer blocks for the slim run (read from its config)."""
    if kind != "global-slim":
        return KIND_LABEL[kind]
    import json

    layers = json.loads((run / "model" / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
    return f"{KIND_LABEL[kind]}, {layers} layers"


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
    for kind in ("cross-encoder", "global", "global-slim"):
        run = RUNS[language][kind]
        if (run / "model").is_dir():
            _, model = load_reranker(run)
            rows[f"{run_label(kind, run)} ({run.name})"] = evaluate_scorer(model.score, samples, texts)["metrics"]
        else:
            missing.append(str(run))
    return {"samples": len(samples), "file": str(folder / "valid.jsonl"), "rows": rows, "runs_missing": missing}


def with_and_without_reranker(language: str, patients: int, kinds: tuple[str, ...] = ("global", "global-slim")) -> dict:
    """The interactive protocol on the first ``patients`` validation patients: the first stage alone, and the
    engine with each trained re-ranker of ``kinds`` (the global one on the backend the service would choose;
    the cross-encoder costs 30 passes a question, so by default it is scored offline only)."""
    out: dict = {"patients": patients, "systems": {}, "rerankers": {}}
    for kind in kinds:
        run = RUNS[language][kind]
        if not (run / "model").is_dir():
            continue
        report = evaluate_inquiry(language, model=run, max_patients=patients,
                                  backend="auto" if kind.startswith("global") else "torch")
        out["patients"] = report["patients"]
        for name, metrics in report["systems"].items():
            if name.startswith("kb@"):
                out["systems"].setdefault(name, metrics)
            else:
                out["systems"][name.replace("engine@", f"kb + {run_label(kind, run)} + stopping rule @")] = metrics
        out["rerankers"][kind] = {**(report.get("reranker") or {}), "run": str(run), "seconds": report["seconds"]}
    return out


SECTIONS = ("protocol", "interactive", "table", "latency")


def previous_sections(wanted: set[str]) -> dict:
    """The sections not re-run, from the last ``bench/results/history_inquiry.json``, each with the date and
    command that produced it."""
    import json

    path = common.RESULTS / "history_inquiry.json"
    if not path.exists():
        raise SystemExit(f"--only needs {path} for the sections it does not run")
    old = json.loads(path.read_text(encoding="utf-8"))
    origin = old.get("section_origin", {})
    keys = {"protocol": "reports", "interactive": "with_reranker", "table": "next_question_table", "latency": "latency"}
    out = {keys[sec]: old[keys[sec]] for sec in SECTIONS if sec not in wanted}
    out["section_origin"] = {sec: origin.get(sec) or {"date": old["environment"]["date"],
                                                     "command": old["environment"]["command"].strip()}
                             for sec in SECTIONS if sec not in wanted}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--table-samples", type=int, default=100)
    ap.add_argument("--rerank-patients", type=int, default=20)
    ap.add_argument("--rerank-states", type=int, default=40)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma-separated sections to run ({', '.join(SECTIONS)}); the others are kept from the "
                         "last bench/results/history_inquiry.json, with the date and command that produced them")
    args = ap.parse_args()
    wanted = {x.strip() for x in args.only.split(",") if x.strip()}
    if not wanted or wanted - set(SECTIONS):
        raise SystemExit(f"--only takes sections of {SECTIONS}, got {args.only!r}")
    set_threads(1)
    seed_everything(args.seed)
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    env["command"] = "python bench/history_inquiry.py " + " ".join(sys.argv[1:])
    payload = previous_sections(wanted) if wanted != set(SECTIONS) else {"section_origin": {}}
    this_run = {"date": env["date"], "command": env["command"].strip()}
    if "protocol" in wanted:
        payload["reports"] = {lang: evaluate_inquiry(lang) for lang in ("zh", "en")}
    if "interactive" in wanted:
        payload["with_reranker"] = {lang: with_and_without_reranker(lang, args.rerank_patients) for lang in ("zh", "en")}
    if "table" in wanted:
        payload["next_question_table"] = {lang: next_question_table(lang, args.table_samples, args.seed)
                                          for lang in ("zh", "en")}
    if "latency" in wanted:
        latency = {}
        for lang in ("en", "zh"):
            engine, states = mid_inquiry_states(lang, args.seed)
            first = step_latency(engine, states, args.steps)
            reranks = rerank_backends(lang, engine, states, args.rerank_states, args.seed)
            for rr in reranks.values():
                rr["sum of p50 (ms)"] = round(first["p50_ms"] + rr["latency"][rr["service_choice"]["backend"]]["p50_ms"], 3)
            latency[lang] = {"first stage + differential": first, "rerankers": reranks}
        payload["latency"] = latency
    for sec in wanted:
        payload["section_origin"][sec] = this_run
    env["load_average_at_end"] = loadavg()
    payload = {"environment": env, **payload, "anchors": {"dxy": ANCHORS_DXY, "ddxplus": ANCHORS_DDX}, "note": DATA_NOTE}
    common.write("history_inquiry", payload, render(payload))


def cpu_cell(rr: dict) -> str:
    """The served re-rank's and the whole step's CPU-time cells (absent in runs before they were measured)."""
    if "cpu_time" not in rr:
        return " | "
    whole = rr["whole_step_cpu_time"]
    return (f"{rr['cpu_time'][rr['service_choice']['backend']]['p50_ms']:.1f} | "
            f"{whole['p50_ms']:.1f} / {whole['p95_ms']:.1f}")


def latency_rows(lat: dict) -> list[dict]:
    """The re-rankers of one language's latency section (also reads the one-re-ranker shape of earlier runs)."""
    if "rerankers" in lat:
        return list(lat["rerankers"].values())
    return [{**lat["rerank"], "sum of p50 (ms)": lat["sum of p50 (ms)"]}]


def render(payload: dict) -> str:
    reports, with_reranker = payload["reports"], payload["with_reranker"]
    tables, latency, env = payload["next_question_table"], payload["latency"], payload["environment"]
    md = [f"Command: `{env['command'].strip()}`; load average at the start {env['load_average_1_5_15']}, at the end "
          f"{env['load_average_at_end']} (2 cores shared with other sessions)."]
    kept = {sec: o for sec, o in payload.get("section_origin", {}).items() if o["date"] != env["date"]}
    if kept:
        md.append("Sections kept from an earlier run: " + "; ".join(
            f"{sec} ({o['date']}, `{o['command']}`)" for sec, o in kept.items()) + ".")
    md += ["",
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
           "Every re-ranker's backends (the full and the slim run of a language) are timed interleaved in one "
           "process, and so are the whole steps of their engines. Wall-clock times; \"CPU\" columns: this process's "
           "CPU time over the same calls (1 thread), close to what the step takes on a core of its own when the "
           "load average is above the 2 cores.", "",
           "| language | re-ranker | layers | tokens p50 (dialogue block) | first stage + differential p50 | re-rank torch p50 | "
           "onnx p50 | onnx-int8 p50 | service backend | sum of p50 | whole step p50 / p95 | served re-rank CPU p50 | "
           "whole step CPU p50 / p95 | load average during |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for lang, lat in latency.items():
        fs = lat["first stage + differential"]
        for rr in latency_rows(lat):
            r, whole = rr["latency"], rr["whole_step_with_reranker"]
            md.append(f"| {lang} | {rr['model']} | {rr.get('layers', '')} | {rr['tokens']['p50']:.0f} "
                      f"({rr['tokens']['dialogue_block_p50']:.0f}) | {fs['p50_ms']:.2f} | {r['torch']['p50_ms']:.1f} | "
                      f"{r['onnx']['p50_ms']:.1f} | {r['onnx-int8']['p50_ms']:.1f} | {rr['service_choice']['backend']} | "
                      f"{rr['sum of p50 (ms)']:.1f} | {whole['p50_ms']:.1f} / {whole['p95_ms']:.1f} | "
                      f"{cpu_cell(rr)} | {rr['load_average_during']['before']} → {rr['load_average_during']['after']} |")
    md += ["", "| language | re-ranker | backend | score correlation with torch (min / mean) | same top-5 order | states |",
           "|---|---|---|---|---|---|"]
    for lang, lat in latency.items():
        for rr in latency_rows(lat):
            for b, a in rr["agreement_with_torch"].items():
                md.append(f"| {lang} | {rr['model']} | {b} | {a['min_correlation']:.4f} / {a['mean_correlation']:.4f} | "
                          f"{100 * a['same_top5']:.0f} % | {a['inputs']} |")
    md += ["", f"Calibration (tuned on an inner split of the training part): "
           f"DXY threshold {reports['zh']['calibration']['threshold']}; DDXPlus threshold "
           f"{reports['en']['calibration']['threshold']}, differential membership cut-off "
           f"{reports['en']['calibration']['cutoff']}; DXY self-report prior weight "
           f"{reports['zh']['calibration']['text_weight']}."]
    return "\n".join(md)


if __name__ == "__main__":
    main()
