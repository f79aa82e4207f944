"""CLI plugin: ``medrank train configs/symptom/*.yaml`` (task ``symptom``) and ``medrank detect``.

Trained runs are also scored by the core command, through the same protocol as the zero-shot
baselines::

    medrank evaluate --dataset chip-cdn --split valid --index runs/symptom/cpu/chip-cdn-bi-hardnce/index-gold
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from medrank.registry import register_evaluator, register_trainer


@register_trainer("symptom")
def train(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Train one symptom-detection model (Bi-HardNCE or a baseline) from a config."""
    from medrank.pipelines.symptom.training import train_symptom

    summary = train_symptom(config, output_dir, resume)
    # the full history and config are in the run directory; print the headline numbers
    return {
        "name": summary["name"],
        "output_dir": str(output_dir),
        "best_epoch": summary["best_epoch"],
        "results": {c: r["metrics"] for c, r in summary["results"].items()},
        "seconds": summary["seconds"],
    }


@register_trainer("symptom-reranker")
def train_reranker(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Train the cross-encoder that re-ranks a trained hpo-layperson run's candidates (``first_stage:``), and its
    set decision; written to ``FIRST_STAGE/reranker/`` unless the config names an ``output_dir``."""
    from medrank.pipelines.symptom.reranker_training import train_term_reranker

    meta = train_term_reranker(config, output_dir, resume)
    return {"output_dir": str(output_dir), "best_epoch": meta["best_epoch"], "validation": meta["validation"],
            "sets_hpo": meta["sets_hpo"], "seconds": meta["seconds"]}


@register_trainer("symptom-ensemble")
def train_ensemble(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Average the encoders of trained hpo-layperson runs (``members:``) into one served English run and fit its set
    decision; nothing is trained again (re-running rebuilds it from the members)."""
    from medrank.pipelines.symptom.ensemble import build_ensemble_run

    summary = build_ensemble_run(config, output_dir)
    return {"output_dir": str(output_dir), "validation": summary["results"]["vocab"]["metrics"],
            "members_validation": summary["members_validation"], "sets_hpo": summary["sets_hpo"],
            "seconds": summary["seconds"]}


@register_evaluator("dxy-symptoms")
def evaluate_dxy(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """DXY self-reports → explicit symptoms, set P/R/F1 (``--test DIR`` laid out like dxy-dialog)."""
    from medrank.pipelines.symptom.set_eval import evaluate_dxy_symptoms

    if model is not None:
        raise ValueError("dxy-symptoms takes no --model: the detector is e5-small + the mined lexicon + a calibration")
    unknown = sorted(set(options) - {"data"})
    if unknown:
        raise ValueError(f"unknown options {unknown}; dxy-symptoms takes data=DIR")
    if split not in (None, "valid"):
        raise ValueError("dxy-symptoms: the only split is 'valid' (the 25 % carve-out); pass --test DIR for another folder")
    return evaluate_dxy_symptoms(test, options.get("data"))


@register_evaluator("chip-cdn-sets")
def evaluate_cdn_sets(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """CHIP-CDN set P/R/F1 (CBLUE metric) next to NDCG@5; ``--set candidates=vocab|gold|FILE``."""
    from medrank.pipelines.symptom.set_eval import evaluate_symptom_sets
    from medrank.retrieval.concept_data import load_eval_set

    unknown = sorted(set(options) - {"candidates", "data", "calibration"})
    if unknown:
        raise ValueError(f"unknown options {unknown}; chip-cdn-sets takes candidates=vocab|gold|FILE, calibration=FILE, data=DIR")
    root = options.get("data")
    dataset = load_eval_set("chip-cdn", split or "valid", test, root=root)
    return evaluate_symptom_sets(dataset, model, str(options.get("candidates", "vocab")), root=root,
                                 calibration=options.get("calibration"))


def language_refusal(query: str, expected: str | None) -> str | None:
    """Why ``query`` is not detected when its language is identified (``--language auto``), with the way round it."""
    from medrank.text import language_refusal as why_not

    why = why_not(query, expected)
    if why is None:
        return None
    return f"not detected: {why} (pass --language {expected or 'en or zh'} to detect anyway)"


#: ``--model dxy``: the DXY self-report model, fitted on the visible dialogues (cached)
SELF_REPORT_ALIAS = "dxy"


def _zero_shot(model: Path) -> str | None:
    """The vocabulary ``--model`` names for zero-shot set detection (``hpo``, ``icd10cm``, ``chip-cdn``; a folder of
    that name wins), else None."""
    from medrank.pipelines.symptom.inference import ZERO_SHOT_VOCABULARIES

    return str(model) if str(model) in ZERO_SHOT_VOCABULARIES and not model.exists() else None


def _self_report_model(model: Path) -> Any:
    """``--model dxy`` or a self-report model's JSON file (``SelfReportModel.save``)."""
    from medrank.pipelines.symptom.self_report import SelfReportModel, dxy_self_report_model

    return SelfReportModel.load(model) if model.is_file() else dxy_self_report_model()


def _print_sets(model: Path, candidates: str, queries: list[str], k: int, as_json: bool, language: str) -> int:
    """The decided set of each query: term, calibrated probability, the words it covers; then the alternatives.
    Returns how many queries were refused for their language."""
    from rich.markup import escape

    from medrank.console import console, fail, print_refusal
    from medrank.pipelines.symptom.sets import SetDetector

    try:
        if model.is_dir():
            detector = SetDetector.from_run(model, candidates)
            reads = detector.language
        elif (vocabulary := _zero_shot(model)) is not None:
            from medrank.pipelines.symptom.inference import zero_shot_set_detector

            detector = zero_shot_set_detector(vocabulary)
            reads = detector.language
        else:  # the self-report model reads Chinese self-reports
            detector, reads = _self_report_model(model), "zh"
        refused = {i: why for i, q in enumerate(queries)
                   if language == "auto" and (why := language_refusal(q, reads)) is not None}
        kept = [q for i, q in enumerate(queries) if i not in refused]
        decided = iter(detector.detect_many(kept) if kept else [])
    except (ValueError, OSError) as exc:
        fail(exc)

    def row(query: str, term: Any) -> dict[str, Any]:
        words = query[term.span[0]:term.span[1]] if term.span else None
        return {"id": term.id, "name": term.name, "probability": round(term.probability, 4), "span": term.span,
                "words": words}

    results: list[dict[str, Any]] = []
    for i, q in enumerate(queries):
        if i in refused:
            results.append({"query": q, "error": refused[i]})
            continue
        f = next(decided)
        results.append({"query": q, "terms": [row(q, t) for t in f.terms], "alternatives": [row(q, t) for t in f.alternatives[:k]]})
    if as_json:
        console.print_json(json.dumps(results, ensure_ascii=False))
        return len(refused)
    for res in results:
        if "error" in res:
            print_refusal(res["query"], res["error"])
            continue
        console.print(f"[bold]{escape(res['query'])}[/bold]", soft_wrap=True)
        if not res["terms"]:
            console.print("  no term decided" + ("; alternatives below" if res["alternatives"] else
                                                 " (no symptom found in these words)"))
        for t in res["terms"]:
            code = f"  ({escape(t['id'])})" if t["id"] != t["name"] else ""  # CHIP-CDN names are their own ids
            console.print(f"  {t['probability']:>4.0%}  {escape(t['name'])}{code}"
                          + (f"  <- {escape(t['words'])}" if t["words"] else ""), soft_wrap=True)
        if res["alternatives"]:
            console.print("  alternatives: " + "; ".join(f"{escape(a['name'])} {a['probability']:.0%}"
                                                           for a in res["alternatives"]), soft_wrap=True)
    return len(refused)


def register(app: typer.Typer) -> None:
    @app.command()
    def detect(
        queries: Annotated[list[str], typer.Argument(help="Patient queries / diagnosis strings.")],
        model: Annotated[Path, typer.Option("--model", "-m", help="A run directory written by `medrank train`; a "
                                            "self-report model's JSON file (SelfReportModel.save); 'dxy': the 41 "
                                            "DXY symptoms decided by the self-report model fitted on the visible "
                                            "dialogues (Chinese; the service's dxy knowledge base); or 'hpo', "
                                            "'icd10cm', 'chip-cdn': no trained run, the pretrained encoder's hybrid "
                                            "index with its shipped set calibration, as a fresh checkout's service "
                                            "decides (the index is built on first use and cached).")],
        candidates: Annotated[
            str | None,
            typer.Option(help="Which saved index: 'gold' (~4k terms), 'vocab' (40k) or the run's own ('hpo'). "
                              "Default: gold, else the run's own, else vocab."),
        ] = None,
        k: Annotated[int, typer.Option("-k", help="Terms per query (the paper's deployment shows 5).")] = 5,
        threshold: Annotated[bool, typer.Option("--threshold/--no-threshold", help="Keep only terms scoring >= the calibrated beta.")] = False,
        beta: Annotated[float | None, typer.Option(help="Use this threshold instead of the calibrated one.")] = None,
        alpha: Annotated[
            float | None,
            typer.Option(help="Re-calibrate beta on the run's validation split for top-k precision ALPHA (implies --threshold)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        sets: Annotated[
            bool | None,
            typer.Option("--sets/--ranking", help="Decide the set of terms the text names (spans, calibrated "
                                                  "probabilities; needs RUN/sets-<candidates>.json) or list the "
                                                  "top-k ranking. Default: the set when the run has a calibration."),
        ] = None,
        language: Annotated[
            str,
            typer.Option(help="The queries' language: auto (identify each; text in another language than the run's is "
                              "reported, not detected, and the exit status is 1), en or zh (detect every query)."),
        ] = "auto",
    ) -> None:
        """Detect symptoms / diagnosis terms: query -> the set of standard terms it names (or the top-k ranking)."""
        from medrank.console import err, fail, print_ranked
        from medrank.pipelines.symptom.inference import SymptomDetector

        if k < 1:
            fail("-k must be >= 1")
        if language not in ("auto", "en", "zh"):
            fail(f"--language must be auto, en or zh, got {language!r}")
        if model.is_file() or (str(model) == SELF_REPORT_ALIAS and not model.exists()) or _zero_shot(model):
            # the self-report model and a zero-shot vocabulary decide the set with their own calibration: no
            # ranking form, no threshold to choose
            if sets is False or threshold or beta is not None or alpha is not None or candidates is not None:
                fail("--ranking, --threshold, --beta, --alpha and --candidates apply to a trained run; the self-report "
                     "model decides the set with its own fitted threshold, a zero-shot vocabulary with its shipped "
                     "calibration")
            if _print_sets(model, "", queries, k, as_json, language):
                raise typer.Exit(1)
            return
        if candidates is None:
            from medrank.pipelines.symptom.artefacts import default_candidates

            candidates = default_candidates(model)
        has_calibration = (model / f"sets-{candidates}.json").exists()
        if sets is None:
            sets = has_calibration and not (threshold or beta is not None or alpha is not None)
        if sets:
            if not has_calibration:
                fail(f"{model} has no set calibration sets-{candidates}.json; fit one (README: set detection) "
                     "or pass --ranking")
            if _print_sets(model, candidates, queries, k, as_json, language):
                raise typer.Exit(1)
            return
        try:
            detector = SymptomDetector.load(model, candidates)
            if alpha is not None:
                if not 0.0 < alpha <= 1.0:
                    fail(f"--alpha must be in (0, 1], got {alpha}")
                detector.k = k
                if detector.calibrate(SymptomDetector.validation_set(model), alpha) is None:
                    fail(f"no threshold reaches top-{k} precision {alpha} on the validation split")
                threshold = True
            cut: bool | float = beta if beta is not None else threshold
            refused = {i: why for i, q in enumerate(queries)
                       if language == "auto" and (why := language_refusal(q, None)) is not None}
            kept = [q for i, q in enumerate(queries) if i not in refused]
            rankings = iter(detector.detect(kept, k=k, threshold=cut) if kept else [])
        except (ValueError, OSError) as exc:  # IndexFormatError is a ValueError
            fail(exc)
        if beta is not None or threshold:
            err.print(f"threshold beta = {beta if beta is not None else detector.beta:.4f}")
        results = [{"query": q, "error": refused[i]} if i in refused else {"query": q, "results": detector.describe(next(rankings))}
                   for i, q in enumerate(queries)]
        print_ranked(results, as_json)
