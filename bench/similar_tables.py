"""Tables 4-5 of the STMT paper on our data: every matcher, with and without transfer.

For ``--dataset chip-sts`` (CHIP-STS validation) or ``medical-question-pairs``
(MQP validation), this trains (or reuses finished runs of) every config in
``configs/similar/<dataset>/`` — the logistic regressions, Siamese BiLSTM,
Transformer, ESIM, STMT and its self-/inter-attention ablations, the
cross-encoder — and, for the neural encoders, the same config with AM-softmax
transfer pre-training (STMT also with plain-softmax pre-training). Runs go to
``runs/similar/<dataset>/<variant>/``; a run whose ``summary.json`` was
produced by the identical resolved config is reused, an interrupted one
resumes from its last epoch checkpoint.

Metrics on the validation side of the fixed-seed, leak-free split (seed 13,
20 %): accuracy, precision, recall, F1 (threshold 0.5) and NDCG@3 grouped by
the first question. Writes ``bench/results/similar_<dataset>.json`` and ``.md``.

    nice -n 10 python bench/similar_tables.py --dataset chip-sts --threads 1
    nice -n 10 python bench/similar_tables.py --dataset medical-question-pairs --threads 1
    # a subset (e.g. to spread the work): --models stmt,bilstm ; only collect finished runs: --collect-only
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import common
import yaml

from medrank.config import data_root, set_threads
from medrank.metrics import to_markdown_table
from medrank.pipelines.similar.config import resolve_config
from medrank.pipelines.similar.evaluation import PAIR_METRICS
from medrank.pipelines.similar.experiment import display_name, run_experiment
from medrank.pipelines.similar.matchers import NEURAL_ARCHS

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["lr-tfidf", "lr-w2v", "bilstm", "transformer", "esim", "stmt-self", "stmt-inter", "stmt", "stmt-small", "cross-encoder"]
LABELS = {
    "lr-tfidf": "LR (TF-IDF)", "lr-w2v": "LR (mean word2vec)", "bilstm": "Siamese BiLSTM",
    "transformer": "Transformer (N=6)", "esim": "ESIM", "stmt-self": "STMT, self-attention only",
    "stmt-inter": "STMT, inter-attention only", "stmt": "STMT", "stmt-small": "STMT (N=3, serving size)",
}


def variants(model: str, base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(model, base)]
    if model in NEURAL_ARCHS or model == "stmt-small":
        am = json.loads(json.dumps(base))
        am.setdefault("transfer", {})["enabled"] = True
        am["transfer"]["loss"] = "am-softmax"
        out.append((f"{model}+transfer", am))
        if model == "stmt":
            sm = json.loads(json.dumps(am))
            sm["transfer"]["loss"] = "softmax"
            out.append((f"{model}+transfer-softmax", sm))
            # 3x longer AM-softmax pre-training (still inside the 60-minute budget on CHIP-STS)
            long = json.loads(json.dumps(am))
            long["transfer"]["epochs"] = 3 * int(am["transfer"].get("epochs", 4))
            out.append((f"{model}+transfer-long", long))
    return out


def finished(run: Path, cfg: dict[str, Any]) -> dict[str, Any] | None:
    summary, saved = run / "summary.json", run / "config.json"
    if not summary.exists() or not saved.exists():
        return None
    # resolve both sides, so a run saved before a new config key (with its default) existed still matches
    if json.loads(json.dumps(resolve_config(json.loads(saved.read_text(encoding="utf-8"))))) != json.loads(
        json.dumps(resolve_config(cfg))
    ):
        return None
    return json.loads(summary.read_text(encoding="utf-8"))


ENSEMBLE = ["stmt+transfer", "esim+transfer", "cross-encoder"]  # fixed a priori: one run per model family


def valid_scores(run: Path, dataset: str) -> dict[str, float]:
    """Validation scores of a finished run (``valid_scores.json``, computed and saved if missing)."""
    path = run / "valid_scores.json"
    if not path.exists():
        from medrank.data.questions import load_question_pairs, split_pairs
        from medrank.pipelines.similar.matchers import load_matcher
        from medrank.utils.io import atomic_write_json

        valid = split_pairs(load_question_pairs(dataset), 0.2, 13).valid
        scores = load_matcher(run).score([(p.text1, p.text2) for p in valid])
        atomic_write_json(path, {p.id: round(float(x), 6) for p, x in zip(valid, scores, strict=True)})
    return json.loads(path.read_text(encoding="utf-8"))


def ensemble(runs_dir: Path, dataset: str, members: list[str]) -> dict[str, Any]:
    """Mean ``p(same)`` of the member runs on the validation pairs, scored like every model."""
    from medrank.data.questions import load_question_pairs, split_pairs
    from medrank.pipelines.similar.evaluation import pair_metrics

    valid = split_pairs(load_question_pairs(dataset), 0.2, 13).valid
    per_run = [valid_scores(runs_dir / m, dataset) for m in members]
    mean = [sum(s[p.id] for s in per_run) / len(per_run) for p in valid]
    return pair_metrics(valid, mean)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="chip-sts", choices=["chip-sts", "medical-question-pairs"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default=None, help="comma-separated subset of config names")
    ap.add_argument("--no-transfer", action="store_true", help="skip the transfer variants")
    ap.add_argument("--variants", default=None,
                    help="comma-separated variants to train (e.g. stmt,stmt+transfer,bilstm); others are only collected")
    ap.add_argument("--collect-only", action="store_true", help="only tabulate finished runs")
    ap.add_argument("--runs", default=str(ROOT / "runs" / "similar"))
    args = ap.parse_args()
    set_threads(args.threads)
    config_dir = ROOT / "configs" / "similar" / args.dataset
    names = [n for n in ORDER if (config_dir / f"{n}.yaml").exists()]
    wanted = set(args.models.split(",")) if args.models else None
    variant_filter = set(args.variants.split(",")) if args.variants else None
    results: dict[str, dict[str, Any]] = {}
    for model in names:
        base = yaml.safe_load((config_dir / f"{model}.yaml").read_text(encoding="utf-8"))
        base.pop("task", None)
        for variant, cfg in variants(model, base):
            if args.no_transfer and variant != model:
                continue
            run = Path(args.runs) / args.dataset / variant
            summary = finished(run, cfg)
            chosen = (wanted is None or model in wanted) and (variant_filter is None or variant in variant_filter)
            if summary is None and not args.collect_only and chosen:
                print(f"== {variant}: training ({run})", flush=True)
                t0 = time.perf_counter()
                summary = run_experiment(cfg, run, resume=True, show_progress=False)
                print(f"   done in {(time.perf_counter() - t0) / 60:.1f} min: "
                      + json.dumps({k: round(summary['valid'][k], 4) for k in PAIR_METRICS}), flush=True)
            if summary is not None:
                summary["config"] = resolve_config(cfg)
                results[variant] = summary
    if not results:
        print("no finished runs to tabulate")
        return
    plain = {LABELS.get(m, display_name(results[m]["config"])): results[m]["valid"] for m in names if m in results}
    transfer = {LABELS[m] + " + transfer": results[f"{m}+transfer"]["valid"] for m in names if f"{m}+transfer" in results}
    if "stmt+transfer-softmax" in results:
        transfer["STMT + transfer (plain softmax pre-training)"] = results["stmt+transfer-softmax"]["valid"]
    if "stmt+transfer-long" in results:
        epochs = results["stmt+transfer-long"]["config"]["transfer"]["epochs"]
        transfer[f"STMT + transfer ({epochs} pre-training epochs)"] = results["stmt+transfer-long"]["valid"]
    members = [m for m in ENSEMBLE if m in results]
    ensemble_metrics = None
    if len(members) == len(ENSEMBLE):
        ensemble_metrics = ensemble(Path(args.runs) / args.dataset, args.dataset, members)
    cost = {}
    for variant, s in results.items():
        cost[variant] = {
            "minutes": round(s.get("total_seconds", 0) / 60, 1), "train_minutes": round(s.get("train_seconds", 0) / 60, 1),
            "best_epoch": s.get("best_epoch"), "epochs_run": s.get("epochs_run"), "parameters": s.get("n_parameters"),
            "valid_pairs_per_s": s.get("valid_pairs_per_second"),
            "pretrain_groups": s.get("transfer", {}).get("groups"), "pretrain_questions": s.get("transfer", {}).get("questions"),
            "pretrain_minutes": round(s["transfer"]["seconds"] / 60, 1) if s.get("transfer", {}).get("seconds") else None,
        }
    first = next(iter(results.values()))
    facts = (
        f"{args.dataset} validation: {first['n_valid_pairs']:,} pairs (train side {first['n_train_pairs']:,}); "
        f"NDCG@3 over {first['valid']['ndcg_groups']:,} first-question groups with a positive "
        f"({first['valid']['ndcg_groups_with_2plus_candidates']:,} with 2+ candidates). Threshold 0.5, seed 13, "
        f"{args.threads} torch thread(s) on 2 shared CPU cores."
    )
    groups = next((s["transfer"] for s in results.values() if s.get("transfer")), None)
    if groups:
        facts += (f" Transfer pre-training: {groups['groups']:,} question groups ({groups['questions']:,} questions) "
                  f"from {', '.join(groups.get('datasets', []))}.")
    md = [facts, "### Without transfer\n\n" + to_markdown_table(plain, list(PAIR_METRICS), name_header="model")]
    if transfer:
        md.append("### With transfer (encoder pre-trained as a group classifier with AM-softmax, m = 0.35, s = 20)\n\n"
                  + to_markdown_table(transfer, list(PAIR_METRICS), name_header="model"))
    if ensemble_metrics is not None:
        md.append("### Ensemble (members fixed in advance, not tuned)\n\n" + to_markdown_table(
            {"mean p of STMT + transfer, ESIM + transfer, cross-encoder": ensemble_metrics}, list(PAIR_METRICS),
            name_header="model"))
    rows = "\n".join(
        f"| {v} | {c['minutes']} | {c['pretrain_minutes'] or '-'} | {c['epochs_run']} | {c['best_epoch']} | "
        f"{c['parameters']:,} | {c['valid_pairs_per_s']} |" for v, c in cost.items())
    md.append("### Cost (CPU recipe)\n\n| run | total min | pre-train min | epochs | best epoch | parameters | valid pairs/s |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" + rows)
    name = f"similar_{args.dataset.replace('-', '_')}"
    common.write(
        name,
        {"environment": common.environment(args.threads, 13, str(data_root())), "dataset": args.dataset,
         "without_transfer": plain, "with_transfer": transfer, "cost": cost,
         "ensemble": {"members": ENSEMBLE, "valid": ensemble_metrics},
         "runs": {v: {k: s[k] for k in s if k not in ("history",)} | {"history": s.get("history")} for v, s in results.items()}},
        "\n\n".join(md),
    )
    # one script, one result per dataset: name the dataset in the header
    md_path = common.RESULTS / f"{name}.md"
    md_path.write_text(md_path.read_text(encoding="utf-8").replace(
        "bench/similar_tables.py;", f"bench/similar_tables.py --dataset {args.dataset};", 1), encoding="utf-8")


if __name__ == "__main__":
    main()
