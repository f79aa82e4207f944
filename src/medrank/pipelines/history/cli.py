"""CLI plugin for history-taking question re-ranking.

* ``medrank history build [--source mts-aci] [--raw SPLIT=FILE ...] [--bank DIR] --out DIR`` — build
  the JSONL samples (question bank, first-stage candidates, positives) from raw files;
* ``medrank train configs/history/*.yaml`` — tasks ``history-global``, ``history-cross-encoder``,
  ``history-bi-encoder``;
* ``medrank evaluate --dataset history-mts-aci [--test FILE.jsonl | --split valid] [--model RUN]``;
* ``medrank evaluate --dataset dxy-inquiry|ddxplus-inquiry [--test DIR|FILE] [--model RUN]`` — the
  simulated-patient inquiry protocol (:mod:`medrank.pipelines.history.inquiry.evaluation`);
* ``medrank rerank --model RUN --dialogue FILE --candidates FILE`` — rank candidate questions for a
  dialogue (one ``speaker: text`` line per turn; one candidate question per line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from medrank.registry import register_evaluator, register_trainer


def _train(task: str, model: str, config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    from medrank.pipelines.history.training import train_history

    if config.get("model", model) != model:
        raise ValueError(f"task {task} trains model {model!r}, but the config says model={config['model']!r}")
    report = train_history({**config, "model": model}, output_dir, resume)
    return {
        "system": report["system"],
        "output_dir": str(output_dir),
        "valid": report["valid"]["metrics"],
        "first_stage": report["first_stage"],
        "train_seconds": report["train_seconds"],
    }


@register_trainer("history-global")
def train_global(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Global re-ranker (one input per dialogue, one pooling token per candidate)."""
    return _train("history-global", "global", config, output_dir, resume)


@register_trainer("history-cross-encoder")
def train_cross_encoder(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    return _train("history-cross-encoder", "cross-encoder", config, output_dir, resume)


@register_trainer("history-bi-encoder")
def train_bi_encoder(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    return _train("history-bi-encoder", "bi-encoder", config, output_dir, resume)


@register_evaluator("history-mts-aci")
def evaluate_mts_aci(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    from medrank.pipelines.history.evaluation import evaluate_history

    return evaluate_history(test, split, model, {"dataset": "mts-aci", **options})


@register_evaluator("history-ddxplus")
def evaluate_ddxplus(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    from medrank.pipelines.history.evaluation import evaluate_history

    return evaluate_history(test, split, model, {"dataset": "ddxplus", **options})


@register_evaluator("dxy-inquiry")
def evaluate_dxy_inquiry(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """Simulated-patient inquiry on DXY (``--test`` a folder laid out like dxy-dialog)."""
    return _inquiry("zh", test, split, model, options)


@register_evaluator("ddxplus-inquiry")
def evaluate_ddxplus_inquiry(test: Path | None, split: str | None, model: Path | None,
                             options: dict[str, Any]) -> dict[str, Any]:
    """Simulated-patient inquiry on DDXPlus (``--test`` a patients CSV)."""
    return _inquiry("en", test, split, model, options)


def _inquiry(language: str, test: Path | None, split: str | None, model: Path | None,
             options: dict[str, Any]) -> dict[str, Any]:
    from medrank.console import STATE
    from medrank.pipelines.history.inquiry.evaluation import evaluator

    return evaluator(language)(test, split, model, {"data": STATE.get("data"), **options})


THREADS_HELP = "CPU threads (default: the global --threads, else every core; the committed figures used 1)."


def register(app: typer.Typer) -> None:
    history = typer.Typer(help="History-taking question re-ranking: dataset builders.", no_args_is_help=True)
    app.add_typer(history, name="history")

    @history.command("build")
    def build(
        out: Annotated[Path | None, typer.Option(help="Output folder (default: $MEDRANK_CACHE/history/<source>).")] = None,
        source: Annotated[str, typer.Option(help="mts-aci (MTS-Dialog / ACI-Bench CSV) or ddxplus (patients).")] = "mts-aci",
        raw: Annotated[
            list[str], typer.Option(help="SPLIT=FILE raw file (repeatable); default: the visible train/valid files.")
        ] = [],  # noqa: B006
        bank: Annotated[
            Path | None,
            typer.Option(help="mts-aci: reuse the bank + first stage of this built folder; ddxplus: the KB JSON folder."),
        ] = None,
        valid_fraction: Annotated[float, typer.Option(help="Train dialogues carved into 'valid' (new bank only).")] = 0.2,
        seed: Annotated[int, typer.Option()] = 13,
        threads: Annotated[int | None, typer.Option(help=THREADS_HELP)] = None,
    ) -> None:
        """Build re-ranking samples (JSONL) from raw dialogues; an independent split builds with --bank."""
        from medrank.config import requested_threads, set_threads
        from medrank.console import STATE, console, fail
        from medrank.pipelines.history.builders import build_mts_aci, default_out_dir
        from medrank.pipelines.history.builders.ddxplus import build_ddxplus

        if source not in ("mts-aci", "ddxplus"):
            fail(f"unknown source {source!r}; available: mts-aci, ddxplus")
        if threads is not None and threads < 1:
            fail(f"--threads must be >= 1, got {threads}")
        set_threads(threads if threads is not None else requested_threads())
        splits: dict[str, list[Path]] = {}
        for item in raw:
            if "=" not in item:
                fail(f"--raw expects SPLIT=FILE, got {item!r}")
            name, file = item.split("=", 1)
            splits.setdefault(name, []).append(Path(file))
        target = out or default_out_dir(source)
        existed = target.exists()
        try:
            if source == "ddxplus":
                meta = build_ddxplus(target, splits or None, kb_dir=bank,
                                     valid_fraction=valid_fraction, seed=seed, data_root=STATE.get("data"))
            else:
                meta = build_mts_aci(target, splits or None, bank_dir=bank,
                                     valid_fraction=valid_fraction, seed=seed, data_root=STATE.get("data"))
        except (ValueError, OSError) as exc:
            if not existed and target.is_dir() and not any(target.iterdir()):
                target.rmdir()  # a failed build leaves no empty output folder behind
            fail(exc)
        console.print_json(json.dumps(meta))

    @app.command()
    def rerank(
        model: Annotated[Path, typer.Option("--model", "-m", help="A run or model folder written by `medrank train`.")],
        dialogue: Annotated[Path, typer.Option(help="Dialogue text file: one 'speaker: text' line per turn.")],
        candidates: Annotated[Path, typer.Option(help="Candidate questions, one per line.")],
        k: Annotated[int | None, typer.Option("-k", help="Print only the top k.")] = None,
        threads: Annotated[int | None, typer.Option(help=THREADS_HELP)] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Rank candidate history questions for a dialogue with a trained re-ranker."""
        from medrank.config import requested_threads, set_threads
        from medrank.console import console, fail
        from medrank.pipelines.history.builders.mts_aci import parse_transcript
        from medrank.pipelines.history.data import render_dialogue
        from medrank.pipelines.history.evaluation import load_reranker

        if k is not None and k < 1:
            fail(f"-k must be >= 1, got {k}")
        if threads is not None and threads < 1:
            fail(f"--threads must be >= 1, got {threads}")
        set_threads(threads if threads is not None else requested_threads())
        try:
            turns = parse_transcript(dialogue.read_text(encoding="utf-8"))
            questions = [q.strip() for q in candidates.read_text(encoding="utf-8").splitlines() if q.strip()]
            if not turns:
                fail(f"{dialogue}: no turns found (expected 'doctor: ...' / 'patient: ...' lines)")
            if not questions:
                fail(f"{candidates}: no candidate questions")
            _, reranker = load_reranker(model)
            scores = reranker.score(render_dialogue(turns), questions)
        except (ValueError, OSError) as exc:
            fail(exc)
        ranked = sorted(zip(questions, scores, strict=True), key=lambda x: -x[1])[: k or None]
        rows = [{"rank": i + 1, "question": q, "score": round(float(s), 4)} for i, (q, s) in enumerate(ranked)]
        if as_json:
            console.print_json(json.dumps(rows, ensure_ascii=False))
            return
        for r in rows:
            console.print(f"{r['rank']:>3}  {r['score']:>8.4f}  {r['question']}", markup=False, highlight=False)
