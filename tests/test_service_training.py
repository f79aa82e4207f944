"""``medrank train-service``: which recipe steps run, which are skipped, and what /models tells a user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medrank.service.training import SERVICE_RECIPES, finished, train_command, train_service

ROOT = Path(__file__).resolve().parents[1]


def test_every_recipe_config_exists_and_writes_where_serve_looks():
    from medrank.service.settings import DEFAULT_MODEL_PATHS

    served = {p for paths in DEFAULT_MODEL_PATHS.values() for p in paths}
    for step in SERVICE_RECIPES:
        assert (ROOT / step.config).is_file(), step.config
    # the last step of each pipeline writes a folder `medrank serve` reads by default
    last = {s.pipeline: s.output for s in SERVICE_RECIPES}
    assert set(last.values()) <= served


def test_finished_steps_are_skipped_and_the_rest_would_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = tmp_path / "runs"
    done = runs / "symptom/cpu/chip-cdn-bi-hardnce-best-2l"
    done.mkdir(parents=True)
    (done / "detector.json").write_text(json.dumps({"candidates": {}}), encoding="utf-8")
    (done / "sets-memory.json").write_text("{}", encoding="utf-8")
    assert finished(SERVICE_RECIPES[0], runs) and not finished(SERVICE_RECIPES[1], runs)
    lines: list[str] = []
    report = train_service(runs, say=lines.append, dry_run=True)
    assert [r["status"] for r in report] == ["skipped"] + ["would run"] * (len(SERVICE_RECIPES) - 1)
    assert lines[0].startswith(f"[1/{len(SERVICE_RECIPES)}, 0:00:00 so far]") and "skipped" in lines[0]
    only = train_service(runs, only=("normalize",), say=lines.append, dry_run=True)
    assert [r["config"] for r in only] == ["configs/procedures/mtcg.yaml", "configs/procedures/kar.yaml",
                                           "configs/procedures/fusion.yaml"]


def test_chained_steps_read_their_inputs_from_the_runs_folder_they_are_trained_into(tmp_path, monkeypatch):
    # an ensemble's members and KAR's MTCG are named in their configs under runs/; trained into another folder,
    # the chain must read that folder's earlier runs, not whatever runs/ holds
    from medrank.registry import read_config

    monkeypatch.chdir(ROOT)
    outputs = [s.output for s in SERVICE_RECIPES]
    for k, step in enumerate(SERVICE_RECIPES):
        cfg = read_config(ROOT / step.config)
        for key, value in step.inputs:
            assert key in cfg, (step.config, key)  # the override replaces a key the config already uses
            named = [value] if isinstance(value, str) else list(value)
            configured = [cfg[key]] if isinstance(cfg[key], str) else list(cfg[key])
            assert [f"runs/{v}" for v in named] == configured  # the same runs as the config names under runs/
            assert all(any(v == o or v.startswith(o + "/") for o in outputs[:k]) for v in named)  # trained before
    runs = tmp_path / "elsewhere"
    report = {r["config"]: r["args"] for r in train_service(runs, say=lambda _: None, dry_run=True)}
    members = report["configs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5.yaml"]
    assert members[members.index("--set") + 1] == "members=" + json.dumps(
        [str(runs / "symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def"), str(runs / "symptom/cpu/hpo-layperson-bi-hardnce-best-e5-4l-def")])
    assert f"mtcg={json.dumps(str(runs / 'procedures/mtcg/model'))}" in report["configs/procedures/kar.yaml"]
    assert f"kar={json.dumps(str(runs / 'procedures/kar'))}" in report["configs/procedures/fusion.yaml"]
    assert "--set" not in report["configs/passages/cdv.json"]


def test_a_run_finished_without_what_newer_runs_write_is_finished_again(tmp_path):
    steps = [s for s in SERVICE_RECIPES if s.needs]
    # the English runs: their HPO index holds MedQuAD's everyday wordings (hpo-wordings.json, written with sets-hpo.json)
    assert {s.needs for s in steps} == {"hpo-wordings.json", "sets-memory.json"}
    for step in steps:
        run = tmp_path / "runs" / step.output
        run.mkdir(parents=True)
        (run / "detector.json").write_text(json.dumps({"candidates": {"vocab": "index-vocab"}}), encoding="utf-8")
        assert not finished(step, tmp_path / "runs")  # finished before runs wrote hpo-wordings.json / sets-memory.json
        (run / step.needs).write_text("{}", encoding="utf-8")
        assert finished(step, tmp_path / "runs")


def test_a_failed_step_stops_with_the_way_to_resume(tmp_path, monkeypatch):
    import medrank.service.training as training

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(training, "_medrank", lambda: ["false"])
    with pytest.raises(RuntimeError, match="run the same command again to resume"):
        train_service(tmp_path / "runs", only=("passages",), say=lambda _: None)
    assert (tmp_path / "runs/passages/cdv.train-service.log").exists()


def test_each_step_gets_an_output_folder_medrank_train_accepts(tmp_path, monkeypatch):
    # the step's log once went inside its run folder, which `medrank train` then refused as somebody's files
    import sys

    import medrank.service.training as training

    check = ("import sys; from medrank.training.trainer import check_run_config; "
             "check_run_config(sys.argv[sys.argv.index('--out') + 1], {}, resume=True)")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(training, "_medrank", lambda: [sys.executable, "-c", check])
    report = train_service(tmp_path / "runs", only=("passages",), say=lambda _: None)
    assert [r["status"] for r in report] == ["trained"]
    assert (tmp_path / "runs/passages/cdv.train-service.log").exists()


def test_train_commands_name_the_recipe():
    assert "make models" in train_command("normalize") and "configs/procedures/kar.yaml" in train_command("normalize")
    assert "--model next-questions=" in train_command("next-questions")
    assert train_command("unknown") is None
