"""CLI plugin of the procedure-normalisation pipeline (CHIP 2019 procedures → ICD-9-CM-3 names).

* ``medrank train configs/procedures/mtcg.yaml`` (task ``procedures-mtcg``),
  ``medrank train configs/procedures/kar.yaml`` (task ``procedures-kar``) and
  ``medrank train configs/procedures/fusion.yaml`` (task ``procedures-fusion``, not in the paper);
* ``medrank evaluate --dataset chip2019-procedures --model RUN [--test FILE] [--split val]``
  — exact-set accuracy (single / multi / total) of the normaliser in a KAR run directory;
  ``--set fusion=recall|ranker|fb|learned``, ``--set recall=bm25``, ``--set theta=0.8``, ``--set baselines=1``;
* ``medrank normalize "<mention>" -m RUN`` → standard names + ICD codes + scores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from medrank.pipelines.procedures.artefacts import default_run
from medrank.registry import register_evaluator, register_trainer


@register_trainer("procedures-mtcg")
def train_mtcg(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Train the multi-task candidate generator (triplet + count head)."""
    from medrank.pipelines.procedures.training import train_mtcg as run

    s = run(config, output_dir, resume)
    return {k: s.get(k) for k in ("name", "negatives", "best_epoch", "train_valid", "val", "train_seconds")} | {"output_dir": str(output_dir)}


@register_trainer("procedures-kar")
def train_kar(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Train the keyword-attentive ranker over a trained MTCG, tune θ, write a normaliser."""
    from medrank.pipelines.procedures.training import train_kar as run

    s = run(config, output_dir, resume)
    return {k: s.get(k) for k in ("name", "best_epoch", "theta", "theta_train_valid_acc", "val", "train_seconds")} | {"output_dir": str(output_dir)}


@register_trainer("procedures-fusion")
def train_fusion(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Fit the learned fusion + mention memory over a KAR run (not in the paper), write a normaliser."""
    from medrank.pipelines.procedures.training import train_fusion as run

    s = run(config, output_dir)
    return {k: s.get(k) for k in ("name", "weights", "theta", "train_valid_fb", "train_valid_learned_in_sample", "val", "val_fb", "train_seconds")} | {
        "output_dir": str(output_dir)
    }


@register_evaluator("chip2019-procedures")
def _evaluate(test: Path | None, split: str | None, model: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    from medrank.pipelines.procedures.evaluation import evaluate_procedures

    return evaluate_procedures(test, split, model, options)


def _abbreviations() -> frozenset[str]:
    """The procedure abbreviations of the data under the data root (none when the code list is missing)."""
    from medrank.data.procedures import load_procedure_kb
    from medrank.pipelines.procedures.abbreviations import abbreviations_of_data

    try:
        return abbreviations_of_data(c.name for c in load_procedure_kb())
    except (OSError, ValueError):
        return frozenset()


def register(app: typer.Typer) -> None:
    @app.command()
    def normalize(
        mentions: Annotated[list[str], typer.Argument(help="Chinese procedure mentions, e.g. 右侧甲状腺叶切除术.")],
        model: Annotated[
            Path | None, typer.Option("--model", "-m", help="A KAR or fusion run directory written by `medrank train` (default: the CPU recipe's).")
        ] = None,
        theta: Annotated[float | None, typer.Option(help="Score threshold for >=3-term mentions (default: the tuned one).")] = None,
        candidates: Annotated[bool, typer.Option("--candidates", help="Also show all k_c candidates with s_c / s_r.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Normalise procedure mentions: MTCG recall → KAR re-ranking → FB (or learned fusion) → standard names + ICD codes."""
        from medrank.console import console, fail, print_refusal, print_results
        from medrank.pipelines.procedures.abbreviations import reads_as_abbreviation
        from medrank.pipelines.procedures.fusion import check_theta
        from medrank.pipelines.procedures.normalizer import ProcedureNormalizer, check_mentions
        from medrank.text import has_han

        try:
            check_mentions(mentions)  # before loading the models: say which argument is empty
            if theta is not None:
                check_theta(theta)
            # the normalisers read Chinese procedure names: a mention without a Han character is reported, not
            # normalised (its nearest Chinese name would be a confident wrong code), unless it is a procedure
            # abbreviation the data writes alone ("TURP")
            abbreviations = _abbreviations() if not all(has_han(m) for m in mentions) else frozenset()
            refused = {m: "not normalised: the mention holds no Chinese character; the procedure normaliser reads "
                          "Chinese procedure names only, and procedure abbreviations its data writes alone"
                       for m in mentions if not has_han(m) and not reads_as_abbreviation(m, abbreviations)}
            kept = [m for m in mentions if m not in refused]
            norm = ProcedureNormalizer.load(model or default_run(), **({"theta": theta} if theta is not None else {})) if kept else None
            if norm is not None and theta is not None and norm.learned is not None:
                norm.learned = norm.learned.with_theta(theta)
            normalised = {m: norm.normalize_one(m) for m in kept} if norm is not None else {}
        except (ValueError, OSError) as exc:
            fail(exc)
        if as_json:
            console.print_json(json.dumps([{"mention": m, "error": refused[m]} if m in refused else
                                           {"mention": m, **normalised[m].to_dict()} for m in mentions], ensure_ascii=False))
            if refused:
                raise typer.Exit(1)
            return
        for m in mentions:
            if m in refused:
                print_refusal(m, refused[m])
                continue
            p = normalised[m]
            rows = [
                {"name": t, "id": c[0], "codes": list(c), "score": p.final[p.candidates.index(t)]}
                for t, c in zip(p.terms, p.codes, strict=True)
            ]
            print_results(p.mention, rows)
            if p.low_confidence:
                console.print(f"low confidence ({p.confidence:.2f}): the selected name is more likely wrong than right; "
                              "is this a procedure?")
            if candidates:
                console.print(json.dumps(p.to_dict()["candidates"], ensure_ascii=False, indent=1))
        if refused:
            raise typer.Exit(1)
