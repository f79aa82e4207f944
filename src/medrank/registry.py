"""Task registries that let each pipeline plug into the shared CLI.

A pipeline module registers

* a trainer for ``medrank train CONFIG`` — ``@register_trainer("symptom")``
  on ``fn(config: dict, output_dir: Path, resume: bool) -> dict`` (a summary),
  chosen by the config's ``task`` key;
* an evaluator for ``medrank evaluate --dataset NAME`` — ``@register_evaluator("chip-sts", ...)``
  on ``fn(test: Path | None, split: str | None, model: Path | None, options: dict) -> dict``
  returning ``{"systems": {name: {metric: value}}, ...}``;
* extra commands (``medrank similar``, ``medrank normalize`` …) through a
  ``register(app)`` function in a module listed in :data:`PLUGINS`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

TrainFn = Callable[[dict[str, Any], Path, bool], dict[str, Any]]
EvalFn = Callable[[Path | None, str | None, Path | None, dict[str, Any]], dict[str, Any]]

TRAINERS: dict[str, TrainFn] = {}
EVALUATORS: dict[str, EvalFn] = {}

#: modules that register trainers, evaluators and commands (imported lazily by the CLI)
PLUGINS: list[str] = [
    "medrank.pipelines.symptom.cli",
    "medrank.pipelines.passages.cli",
    "medrank.pipelines.similar.cli",
    "medrank.pipelines.history.cli",
    "medrank.pipelines.procedures.cli",
    "medrank.service.cli",
]


def register_trainer(task: str) -> Callable[[TrainFn], TrainFn]:
    def deco(fn: TrainFn) -> TrainFn:
        TRAINERS[task] = fn
        return fn

    return deco


def register_evaluator(*datasets: str) -> Callable[[EvalFn], EvalFn]:
    def deco(fn: EvalFn) -> EvalFn:
        for d in datasets:
            EVALUATORS[d] = fn
        return fn

    return deco


def load_plugins() -> list[Any]:
    """Import every plugin module; returns the modules (each may define ``register(app)``).

    A pipeline whose module is not present in this installation is skipped;
    any other import error is raised.
    """
    modules = []
    for name in PLUGINS:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
    return modules


def read_config(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML training config, with a clear error on bad files."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"config file {path} not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            cfg = yaml.safe_load(text)
        else:
            cfg = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - re-raised with the file name
        raise ValueError(f"{path}: cannot parse config ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a config must be a mapping, got {type(cfg).__name__}")
    if "task" not in cfg:
        raise ValueError(f"{path}: config needs a 'task' key; known tasks: {sorted(TRAINERS) or '(none loaded)'}")
    return cfg
