"""Every shipped training config parses and names a task that a pipeline registers."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrank.registry import TRAINERS, load_plugins, read_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").rglob("*.yaml"))


def test_configs_are_found():
    assert len(CONFIGS) > 20


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_shipped_config_names_a_registered_task(path):
    load_plugins()
    cfg = read_config(path)
    assert cfg["task"] in TRAINERS, f"{path}: unknown task {cfg['task']!r}"
