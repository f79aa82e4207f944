"""Re-run one bench row per pipeline on the restructured code and compare it with the committed figures.

The restructure (shared models and losses moved to the core, configs on a ``TrainingArgs`` base) must leave
every figure unchanged. This script trains fresh runs into a scratch folder (never ``runs/`` of the checkout)
and compares each figure with the committed row:

* symptom — ``medrank train configs/symptom/cpu/chip-cdn-bi-hardnce.yaml --out RUNS/symptom/...`` against the
  Bi-HardNCE row of ``bench/results/symptom_chip_cdn.json`` (the numbers read from the run's ``results.json``
  exactly as ``bench/symptom_table.py`` reads them);
* similar — the no-transfer ``lr-tfidf``, ``esim`` and ``stmt-small`` runs on medical-question-pairs (the
  experiment ``bench/similar_tables.py`` runs, via its functions, so its committed result files stay as they
  are) against the matching rows of ``bench/results/similar_medical_question_pairs.json``.

The committed rows were trained on another host, so they can differ from a fresh run in the last digits
without any code change. To tell the two causes apart, the same runs are also trained with the code of the
commit before the restructure (``--baseline``, extracted with ``git archive`` into the scratch folder) on this
host with the same threads and seeds: that pair must agree exactly.

    nice -n 19 python bench/restructure_rerun.py --threads 1
    nice -n 19 python bench/restructure_rerun.py --threads 1 --parts similar --runs /tmp/other
    # also stmt-small with the code that wrote the committed similar rows; tabulate without training:
    nice -n 19 python bench/restructure_rerun.py --threads 1 --committed-code d7f1e3b --collect-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common
import yaml
from similar_tables import LABELS as SIMILAR_LABELS
from similar_tables import finished as similar_finished

from medrank.config import data_root
from medrank.pipelines.similar.evaluation import PAIR_METRICS
from medrank.registry import read_config

ROOT = Path(__file__).resolve().parents[1]
SYMPTOM_CONFIG = Path("configs/symptom/cpu/chip-cdn-bi-hardnce.yaml")
SYMPTOM_METRICS = [("gold", "ndcg@5"), ("gold", "recall@5"), ("vocab", "ndcg@5"), ("vocab", "recall@5"), ("gold", "acc@1")]
SIMILAR_DATASET = "medical-question-pairs"
SIMILAR_MODELS = ["lr-tfidf", "esim", "stmt-small"]
#: the last commit before the restructure's first move
BASELINE_COMMIT = "78b91b8"
#: metric points (percent) a figure may move between hosts (see ``TOLERANCE_NOTE``)
CROSS_HOST_TOLERANCE = {"symptom": 1.0, "similar": 2.0}
#: the same host, threads and seed: figures agree to the printed precision
SAME_HOST_TOLERANCE = 0.005
TOLERANCE_NOTE = (
    "Same host, same threads, same seed, code before vs after the restructure: the runs must agree to the printed "
    f"precision (|difference| < {SAME_HOST_TOLERANCE} points, best epoch equal); any larger gap is a behaviour change. "
    "Against the committed rows, which were trained on another host (AMD EPYC; the symptom row with 2 torch threads), "
    "a different CPU and thread count change the order of floating-point sums, so the training trajectories part "
    "after the first steps; the tolerance there is "
    f"{CROSS_HOST_TOLERANCE['symptom']} point for the symptom metrics (1,200 validation queries) and "
    f"{CROSS_HOST_TOLERANCE['similar']} points for the similar-question metrics (498 validation pairs: one pair is "
    "0.2 accuracy points, and a threshold-0.5 decision or an early-stopping epoch can move with a few pairs)."
)
# keys of a symptom run's saved config that do not change what it computes
RUN_ONLY_KEYS = {"show_progress", "output_dir", "data_root", "cache_dir", "save_model"}

SIMILAR_WORKER = """
import sys, yaml
from medrank.config import set_threads
from medrank.pipelines.similar.experiment import run_experiment
config_path, run_dir, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
set_threads(threads)
cfg = yaml.safe_load(open(config_path, encoding="utf-8"))
cfg.pop("task", None)
run_experiment(cfg, run_dir, resume=True, show_progress=False)
"""


def child_env(src: Path) -> dict[str, str]:
    """Environment of a training child: the given code on the path, the same data root, quiet progress bars."""
    return {**os.environ, "PYTHONPATH": str(src), "MEDRANK_DATA": str(data_root()), "TQDM_MININTERVAL": "60"}


def run_logged(cmd: list[str], src: Path, log: Path) -> float:
    log.parent.mkdir(parents=True, exist_ok=True)
    shown = ["<similar worker>" if arg == SIMILAR_WORKER else arg for arg in cmd[1:]]
    print(f"[{time.strftime('%H:%M:%S')}] PYTHONPATH={src} python {' '.join(shown)}  (log: {log})", flush=True)
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        rc = subprocess.call(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=child_env(src))
    if rc != 0:
        raise SystemExit(f"training failed (exit {rc}); see {log}")
    return round(time.perf_counter() - t0, 1)


def extract_baseline(commit: str, dest: Path) -> Path:
    """The ``src`` and ``configs`` folders of ``commit``, unpacked under ``dest`` (once)."""
    if not (dest / "src" / "medrank").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src", "configs"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def symptom_run(code_root: Path, run_dir: Path, threads: int, log: Path, train: bool = True) -> dict[str, Any] | None:
    """Train (or reuse a finished run of) the Bi-HardNCE CPU recipe with the code under ``code_root``.

    With ``train=False`` a run that is not finished gives ``None``."""
    config_path = code_root / SYMPTOM_CONFIG
    cfg = read_config(config_path)
    if cfg.get("threads") != threads:
        cfg["threads"] = threads
        config_path = run_dir.parent / f"{run_dir.name}.yaml"
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    results = run_dir / "results.json"
    seconds = None
    if not _same_symptom_config(results, cfg):
        if not train:
            return None
        seconds = run_logged([sys.executable, "-m", "medrank.cli", "train", str(config_path), "--out", str(run_dir)],
                             code_root / "src", log)
    else:
        print(f"reusing the finished run {run_dir}", flush=True)
    res = json.loads(results.read_text(encoding="utf-8"))
    # the figures bench/symptom_table.py tabulates
    figures = {f"{m} ({c})": res["results"][c]["metrics"][m] for c, m in SYMPTOM_METRICS}
    return {"figures": figures, "best_epoch": res["best_epoch"], "run_seconds": res["seconds"], "wall_seconds": seconds,
            "curve_ndcg@5": [h.get("ndcg@5") for h in res["history"]], "run_dir": str(run_dir)}


def _same_symptom_config(results: Path, cfg: dict[str, Any]) -> bool:
    if not results.exists():
        return False
    saved = json.loads(results.read_text(encoding="utf-8"))["config"]
    return all(saved.get(k) == v for k, v in cfg.items() if k not in RUN_ONLY_KEYS)


def similar_run(code_root: Path, model: str, run_dir: Path, threads: int, log: Path, check_config: bool,
                train: bool = True) -> dict[str, Any] | None:
    """Train (or reuse) one no-transfer similar-questions run with the code under ``code_root``.

    With ``train=False`` a run that is not finished gives ``None``."""
    config_path = code_root / "configs" / "similar" / SIMILAR_DATASET / f"{model}.yaml"
    summary_path = run_dir / "summary.json"
    cfg = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    cfg.pop("task", None)
    # the current code's check of a finished run (resolved config equal); a baseline folder is only its own
    reusable = similar_finished(run_dir, cfg) is not None if check_config else summary_path.exists()
    seconds = None
    if not reusable:
        if not train:
            return None
        seconds = run_logged([sys.executable, "-c", SIMILAR_WORKER, str(config_path), str(run_dir), str(threads)],
                             code_root / "src", log)
    else:
        print(f"reusing the finished run {run_dir}", flush=True)
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return {"figures": {m: summary["valid"][m] for m in PAIR_METRICS}, "best_epoch": summary.get("best_epoch"),
            "train_loss": [h.get("train_loss") for h in summary.get("history", [])],
            "run_seconds": summary.get("total_seconds"), "wall_seconds": seconds, "run_dir": str(run_dir)}


def committed_symptom() -> dict[str, Any]:
    row = json.loads((common.RESULTS / "symptom_chip_cdn.json").read_text(encoding="utf-8"))["rows"]["bi-hardnce"]
    return {"figures": {f"{m} ({c})": row[c][m] for c, m in SYMPTOM_METRICS}, "best_epoch": row["best_epoch"],
            "curve_ndcg@5": row["curve_ndcg@5"]}


def committed_similar(model: str) -> dict[str, Any]:
    data = json.loads((common.RESULTS / "similar_medical_question_pairs.json").read_text(encoding="utf-8"))
    valid = data["without_transfer"][SIMILAR_LABELS[model]]
    return {"figures": {m: valid[m] for m in PAIR_METRICS}, "best_epoch": data["cost"][model]["best_epoch"],
            "train_loss": [h.get("train_loss") for h in data["runs"][model].get("history", [])]}


def compare(pipeline: str, run_name: str, committed: dict, fresh: dict | None, baseline: dict | None) -> list[dict[str, Any]]:
    """One row per figure (in metric points, i.e. percent) plus one for the best epoch; none for a missing run."""
    rows: list[dict[str, Any]] = []
    if fresh is None:
        return rows
    tolerance = CROSS_HOST_TOLERANCE[pipeline]
    for metric, value in fresh["figures"].items():
        new, old = 100 * value, 100 * committed["figures"][metric]
        row: dict[str, Any] = {
            "pipeline": pipeline, "run": run_name, "metric": metric, "committed": round(old, 4), "rerun": round(new, 4),
            "difference": round(new - old, 4), "within_noise": abs(new - old) <= tolerance,
        }
        if baseline is not None:
            base = 100 * baseline["figures"][metric]
            row |= {"baseline_same_host": round(base, 4), "difference_to_baseline": round(new - base, 4),
                    "identical_to_baseline": abs(new - base) < SAME_HOST_TOLERANCE}
        rows.append(row)
    row = {"pipeline": pipeline, "run": run_name, "metric": "best epoch", "committed": committed["best_epoch"],
           "rerun": fresh["best_epoch"], "difference": fresh["best_epoch"] - committed["best_epoch"],
           # the epoch early stopping picks may move with the trajectory on another host: reported, not judged
           "within_noise": None}
    if baseline is not None:
        row |= {"baseline_same_host": baseline["best_epoch"],
                "difference_to_baseline": fresh["best_epoch"] - baseline["best_epoch"],
                "identical_to_baseline": fresh["best_epoch"] == baseline["best_epoch"]}
    rows.append(row)
    return rows


def _fmt(x: Any, signed: bool = False) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, int):
        return f"{x:+d}" if signed else str(x)
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="/tmp/medrank-rerun", help="scratch folder for the fresh runs")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parts", default="symptom,similar", help="comma-separated: symptom, similar")
    ap.add_argument("--collect-only", action="store_true", help="only tabulate finished runs (train nothing)")
    ap.add_argument("--baseline", default=BASELINE_COMMIT,
                    help="commit whose code trains the same runs on this host ('none' to skip)")
    ap.add_argument("--committed-code", default=None,
                    help="commit whose code wrote the committed similar results: also train --committed-code-models "
                         "with it on this host, to tell a host difference from an earlier code change")
    ap.add_argument("--committed-code-models", default="stmt-small")
    args = ap.parse_args()
    parts = args.parts.split(",")
    runs = Path(args.runs)
    logs = runs / "logs"
    baseline_root = None
    if args.baseline != "none":
        baseline_root = extract_baseline(args.baseline, runs / f"baseline-{args.baseline}")
    rows: list[dict[str, Any]] = []
    runs_info: dict[str, Any] = {}
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    load_before = [round(x, 2) for x in os.getloadavg()]
    if "symptom" in parts:
        fresh = symptom_run(ROOT, runs / "symptom" / "chip-cdn-bi-hardnce", args.threads, logs / "symptom.log",
                            not args.collect_only)
        base = None
        if baseline_root is not None:
            base = symptom_run(baseline_root, runs / "baseline" / "symptom" / "chip-cdn-bi-hardnce", args.threads,
                               logs / "baseline-symptom.log", not args.collect_only)
        rows += compare("symptom", "chip-cdn-bi-hardnce (Bi-HardNCE, CPU recipe)", committed_symptom(), fresh, base)
        runs_info["symptom"] = {"rerun": fresh, "baseline": base}
    if "similar" in parts:
        for model in SIMILAR_MODELS:
            fresh = similar_run(ROOT, model, runs / "similar" / SIMILAR_DATASET / model, args.threads,
                                logs / f"similar-{model}.log", check_config=True, train=not args.collect_only)
            base = None
            if baseline_root is not None:
                base = similar_run(baseline_root, model, runs / "baseline" / "similar" / SIMILAR_DATASET / model,
                                   args.threads, logs / f"baseline-similar-{model}.log", check_config=False,
                                   train=not args.collect_only)
            rows += compare("similar", f"{SIMILAR_DATASET} {model} ({SIMILAR_LABELS[model]})", committed_similar(model),
                            fresh, base)
            runs_info[f"similar/{model}"] = {"rerun": fresh, "baseline": base}
    committed_code: list[str] = []
    if "similar" in parts and args.committed_code:
        code_root = extract_baseline(args.committed_code, runs / f"baseline-{args.committed_code}")
        for model in args.committed_code_models.split(","):
            old = similar_run(code_root, model, runs / f"committed-code-{args.committed_code}" / "similar" / SIMILAR_DATASET
                              / model, args.threads, logs / f"{args.committed_code}-similar-{model}.log",
                              check_config=False, train=not args.collect_only)
            fresh = runs_info.get(f"similar/{model}", {}).get("rerun")
            if old is None or fresh is None:
                continue
            runs_info[f"similar/{model}"]["committed_code"] = old
            same = all(abs(100 * (old["figures"][m] - fresh["figures"][m])) < SAME_HOST_TOLERANCE for m in PAIR_METRICS)
            committed_code.append(
                f"- {model} trained on this host with the code of {args.committed_code} (the commit that wrote the "
                f"committed similar results): " + ", ".join(f"{m} {100 * old['figures'][m]:.2f}" for m in PAIR_METRICS)
                + f", best epoch {old['best_epoch']} — " + ("identical to the re-run, so its gap to the committed row comes from the host (the training loss "
                   "already differs in the first epoch), not from a code change." if same else "differs from the re-run.")
            )
    # the epoch where a run first parts from the committed one
    parting = []
    for name, info in runs_info.items():
        committed = committed_symptom() if name == "symptom" else committed_similar(name.split("/")[1])
        key = "curve_ndcg@5" if name == "symptom" else "train_loss"
        sides = [("committed", committed), ("re-run", info["rerun"]), ("before the restructure", info.get("baseline")),
                 ("code of the committed results", info.get("committed_code"))]
        shown = [(label, run[key][1]) for label, run in sides if run is not None and len(run.get(key) or []) > 1]
        if shown:
            what = "validation NDCG@5 (gold) after epoch 1" if name == "symptom" else "training loss of epoch 1"
            parting.append(f"- {name}, {what}: " + ", ".join(f"{label} {value:.6f}" for label, value in shown))

    judged = [r for r in rows if r["within_noise"] is not None]
    beyond = [r for r in judged if not r["within_noise"]]
    compared = [r for r in rows if "identical_to_baseline" in r]
    changed = [r for r in compared if not r["identical_to_baseline"]]

    def names(selected: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['run'].split(' (')[0]} {r['metric']}" for r in selected)

    verdict = [
        f"- Against the committed rows: {len(judged) - len(beyond)} of {len(judged)} figures within noise"
        + (f"; beyond: {names(beyond)}" if beyond else "") + ".",
    ]
    if baseline_root is not None:
        verdict.append(
            f"- Against the code before the restructure ({args.baseline}) on this host: "
            + (f"all {len(compared)} compared figures and best epochs identical." if not changed else
               f"{len(changed)} of {len(compared)} differ: {names(changed)}.")
        )
    missing = [f"{name} ({side})" for name, info in runs_info.items() for side in ("rerun", "baseline")
               if info[side] is None and (side == "rerun" or baseline_root is not None)]
    if missing:
        verdict.append(f"- Not finished, so not compared: {', '.join(missing)}.")
    header = "| pipeline | run / config | metric | committed | re-run | difference |"
    rule = "|---|---|---|---:|---:|---:|"
    if baseline_root is not None:
        header += f" before the restructure ({args.baseline}), this host | difference | within noise (committed) |"
        rule += "---:|---:|---|"
    else:
        header += " within noise (committed) |"
        rule += "---|"
    lines = [header, rule]
    for r in rows:
        line = (f"| {r['pipeline']} | {r['run']} | {r['metric']} | {_fmt(r['committed'])} | {_fmt(r['rerun'])} | "
                f"{_fmt(r['difference'], True)} |")
        if baseline_root is not None:
            line += f" {_fmt(r.get('baseline_same_host'))} | {_fmt(r.get('difference_to_baseline'), True)} |"
        line += f" {_fmt(r['within_noise'])} |"
        lines.append(line)
    command = f"nice -n 19 python bench/restructure_rerun.py --threads {args.threads}" + (
        f" --parts {args.parts}" if args.parts != "symptom,similar" else "") + (
        f" --committed-code {args.committed_code}" if args.committed_code else "") + (" --collect-only" if args.collect_only else "")
    # a tabulation alone keeps the record of the invocation that trained the runs
    previous = common.RESULTS / "restructure_rerun.json"
    training = {"command": command, "started": started, "load_average_at_start": load_before,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    if args.collect_only:
        before = json.loads(previous.read_text(encoding="utf-8")) if previous.exists() else {}
        training = before.get("training_run") or {
            "command": before.get("command", command.replace(" --collect-only", "")), "started": before.get("started"),
            "load_average_at_start": before.get("load_average_at_start"),
            "load_average_at_end": before.get("environment", {}).get("load_average_1_5_15")}
    md = [
        "# Re-run on the restructured code: symptom (Bi-HardNCE CPU recipe) and similar questions (STMT family)",
        "",
        f"Runs trained by `{training['command']}` into `{runs}` (started {training['started']}, load average "
        f"{training['load_average_at_start']} at the start, {training['load_average_at_end']} at the end)"
        + (f", tabulated by `{command}`. " if args.collect_only else ". ")
        +
        "Figures in metric points (percent): symptom on the 1,200-query validation side of the fixed-seed CHIP-CDN "
        "split, gold and vocab candidates, read from the run's `results.json` as `bench/symptom_table.py` reads them; "
        "similar on the 498 medical-question-pairs validation pairs (threshold 0.5, NDCG@3 by first question), "
        "trained by `bench/similar_tables.py`'s experiment without transfer. `committed` = "
        "`bench/results/symptom_chip_cdn.json` (Bi-HardNCE row) and `bench/results/similar_medical_question_pairs.json`.",
        "",
        f"Within noise: {TOLERANCE_NOTE}",
        "",
        *lines,
        "",
        *verdict,
        *committed_code,
        "",
        "The first epoch of each run (the committed run, then the runs on this host):",
        "",
        *parting,
    ]
    payload = {
        "environment": common.environment(args.threads, 13, str(data_root())),
        "command": command,
        "training_run": training,
        "baseline_commit": None if baseline_root is None else args.baseline,
        "tolerance": {"cross_host_points": CROSS_HOST_TOLERANCE, "same_host_points": SAME_HOST_TOLERANCE,
                      "note": TOLERANCE_NOTE},
        "rows": rows,
        "runs": runs_info,
        "verdict": verdict,
    }
    common.write("restructure_rerun", payload, "\n".join(md))


if __name__ == "__main__":
    main()
