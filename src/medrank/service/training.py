"""``medrank train-service`` / ``make models``: train the CPU recipe of every model the service uses.

Each recipe step is one existing ``medrank train CONFIG --out DIR`` run, written where ``medrank
serve`` looks for it (:data:`medrank.service.settings.DEFAULT_MODEL_PATHS`, under ``runs/``). The
command is resumable at two levels: a step whose folder already holds its finished artefact
(``medrank.load`` can open it) is skipped, and an interrupted step resumes from its last epoch
checkpoint (``medrank train`` resumes by default). Each step runs in its own process, its output
in ``DIR.train-service.log`` beside the run folder (``medrank train`` refuses a non-empty folder that
holds no run, so the log stays out of it); one overall display says which step runs and how long the whole took.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RecipeStep:
    """One ``medrank train`` run: the service pipeline it serves, its config and its output folder under ``runs/``."""

    pipeline: str
    config: str
    output: str
    note: str
    #: a file the finished run must also hold (one a newer medrank writes when it finishes the run)
    needs: str = ""
    #: config keys that name earlier steps' runs: key → a path (or list of paths) under the runs folder, passed as
    #: ``--set`` so a chain trained into another folder (``--runs DIR``) reads its own earlier runs
    inputs: tuple[tuple[str, str | tuple[str, ...]], ...] = ()

    def overrides(self, runs: Path) -> list[str]:
        """The ``--set KEY=VALUE`` arguments that point this step's inputs into ``runs``."""
        out = []
        for key, value in self.inputs:
            paths: str | list[str] = str(runs / value) if isinstance(value, str) else [str(runs / v) for v in value]
            out += ["--set", f"{key}={json.dumps(paths)}"]
        return out


#: the CPU recipes, in the order they must run (KAR reads MTCG's run, the fusion KAR's)
SERVICE_RECIPES: tuple[RecipeStep, ...] = (
    RecipeStep("symptoms", "configs/symptom/cpu/chip-cdn-bi-hardnce-best-2l.yaml", "symptom/cpu/chip-cdn-bi-hardnce-best-2l",
               "Chinese symptoms: Bi-HardNCE over CHIP-CDN, the best CPU recipe (symptoms-zh)", needs="sets-memory.json"),
    RecipeStep("symptoms", "configs/symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def.yaml",
               "symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def",
               "English symptoms: Bi-HardNCE on HPO layperson synonyms, with HPO's definitions, top 4 blocks (seed 13)",
               needs="hpo-wordings.json"),
    RecipeStep("symptoms", "configs/symptom/cpu/hpo-layperson-bi-hardnce-best-e5-4l-def.yaml",
               "symptom/cpu/hpo-layperson-bi-hardnce-best-e5-4l-def",
               "English symptoms: the same recipe on multilingual e5-small (the ensemble's second member)",
               needs="hpo-wordings.json"),
    RecipeStep("symptoms", "configs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5.yaml",
               "symptom/cpu/hpo-layperson-ensemble-4l-def-e5",
               "English symptoms: the mean of the two runs' cosines, its set decision fitted again (symptoms-en)",
               needs="hpo-wordings.json", inputs=(("members", ("symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def",
                                                           "symptom/cpu/hpo-layperson-bi-hardnce-best-e5-4l-def")),)),
    RecipeStep("normalize", "configs/procedures/mtcg.yaml", "procedures/mtcg", "procedures: MTCG candidate generator"),
    RecipeStep("normalize", "configs/procedures/kar.yaml", "procedures/kar", "procedures: KAR re-ranker over MTCG",
               inputs=(("mtcg", "procedures/mtcg/model"),)),
    RecipeStep("normalize", "configs/procedures/fusion.yaml", "procedures/fusion", "procedures: learned fusion over KAR",
               inputs=(("kar", "procedures/kar"),)),
    RecipeStep("similar-questions", "configs/similar/chip-sts/stmt.yaml", "similar/chip-sts/stmt",
               "similar questions, Chinese: STMT matcher (similar-zh)"),
    RecipeStep("similar-questions", "configs/similar/medical-question-pairs/stmt.yaml", "similar/medical-question-pairs/stmt",
               "similar questions, English: STMT matcher (similar-en)"),
    RecipeStep("passages", "configs/passages/cdv.json", "passages/cdv", "passages: CDV sentence encoder"),
)

#: where a run is written: the folder ``medrank serve`` reads (``--models``, default ``runs``)
RUNS = Path("runs")


def train_command(pipeline: str) -> str | None:
    """How to get the trained form of ``pipeline`` (None when the service uses no trained model for it)."""
    steps = [s for s in SERVICE_RECIPES if s.pipeline == pipeline]
    if not steps:
        if pipeline == "next-questions":
            return ("none by default (the CPU re-rankers score below the first stage); a run trained with "
                    "`medrank train configs/history/cpu/<config>.yaml` is served with --model next-questions=PATH")
        return None
    runs = " && ".join(f"medrank train {s.config} --out {RUNS / s.output}" for s in steps)
    return f"make models (all pipelines), or: {runs}"


def finished(step: RecipeStep, runs: Path = RUNS) -> bool:
    """True when the step's folder holds an artefact ``medrank.load`` opens (its training finished) and the file the
    step needs. A run finished by an older medrank without that file is finished again: ``medrank train`` resumes
    after its last epoch and only writes what finishing writes."""
    from medrank.loading import artefact_kind

    try:
        artefact_kind(runs / step.output)
    except (OSError, ValueError):
        return False
    return not step.needs or (runs / step.output / step.needs).is_file()


def _medrank() -> list[str]:
    exe = Path(sys.executable).with_name("medrank")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("medrank")
    return [found] if found else [sys.executable, "-c", "from medrank.cli import run; run()"]


def train_service(runs: Path = RUNS, only: tuple[str, ...] = (), say: Callable[[str], None] = print,
                  dry_run: bool = False) -> list[dict[str, object]]:
    """Run every recipe step not finished yet, one after another; returns what each step did."""
    steps = [s for s in SERVICE_RECIPES if not only or s.pipeline in only]
    missing = [s.config for s in steps if not Path(s.config).exists()]
    if missing:
        raise FileNotFoundError(f"config(s) not found: {', '.join(missing)} (run from the repository root)")
    report: list[dict[str, object]] = []
    t0 = time.time()
    for n, step in enumerate(steps, 1):
        out = runs / step.output
        head = f"[{n}/{len(steps)}, {_clock(time.time() - t0)} so far] {step.note}"
        if finished(step, runs):
            say(f"{head}: already trained in {out}, skipped")
            report.append({"config": step.config, "output": str(out), "status": "skipped"})
            continue
        args = ["train", step.config, "--out", str(out), *step.overrides(runs)]
        cmd = [*_medrank(), *args]
        log_file = step_log(out)
        say(f"{head}: medrank {shlex.join(args)} (log: {log_file})")
        if dry_run:
            report.append({"config": step.config, "output": str(out), "status": "would run", "args": args})
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()
        with open(log_file, "a", encoding="utf-8") as log:
            code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        took = time.time() - started
        if code != 0:
            report.append({"config": step.config, "output": str(out), "status": f"failed (exit {code})", "seconds": took})
            raise RuntimeError(f"{step.config} failed (exit {code}) after {_clock(took)}; see {log_file}; "
                               "run the same command again to resume it")
        say(f"[{n}/{len(steps)}] {step.note}: trained in {_clock(took)}")
        report.append({"config": step.config, "output": str(out), "status": "trained", "seconds": round(took, 1)})
    if not dry_run:
        say(f"all {len(steps)} service models ready in {runs} ({_clock(time.time() - t0)}); `make serve` serves them")
    return report


def step_log(out: Path) -> Path:
    """Where a step's output goes: beside its run folder, never inside it (``medrank train`` refuses an
    output folder that holds files but no run, and the log would be the first file written there)."""
    return out.with_name(out.name + ".train-service.log")


def _clock(seconds: float) -> str:
    h, rest = divmod(int(seconds), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"
