"""The layering contracts of pyproject.toml (docs/architecture.md) hold: `lint-imports` finds no broken one."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

importlinter_cli = pytest.importorskip("importlinter.cli")

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path) -> int:
    return importlinter_cli.lint_imports(config_filename=str(config), no_cache=True, no_logo=True)


def test_the_layering_contracts_are_kept(capsys):
    code = _lint(ROOT / "pyproject.toml")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 broken" in out and "5 kept" in out


def test_a_broken_contract_is_reported(tmp_path, monkeypatch, capsys):
    """The same checker fails on a package where a core module imports a pipeline and two pipelines import each other."""
    pkg = tmp_path / "layered_demo"
    for sub in ("core", "pipelines", "pipelines/a", "pipelines/b"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "records.py").write_text("from layered_demo.pipelines.a import model\n")
    (pkg / "pipelines" / "a" / "model.py").write_text("from layered_demo.pipelines.b import losses\n")
    (pkg / "pipelines" / "b" / "losses.py").write_text("X = 1\n")
    config = tmp_path / "contracts.toml"
    config.write_text(textwrap.dedent("""
        [tool.importlinter]
        root_package = "layered_demo"

        [[tool.importlinter.contracts]]
        name = "core never imports pipelines"
        type = "forbidden"
        source_modules = ["layered_demo.core"]
        forbidden_modules = ["layered_demo.pipelines"]

        [[tool.importlinter.contracts]]
        name = "no pipeline imports another"
        type = "independence"
        modules = ["layered_demo.pipelines.a", "layered_demo.pipelines.b"]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "layered_demo", raising=False)
    assert _lint(config) == 1
    out = capsys.readouterr().out
    assert "2 broken" in out
    assert "layered_demo.core.records -> layered_demo.pipelines.a" in out
