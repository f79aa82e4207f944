"""The layering contracts of pyproject.toml (docs/architecture.md) hold: `lint-imports` finds no broken one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("importlinter.cli")

ROOT = Path(__file__).resolve().parents[1]
# in a child process: import-linter reconfigures logging, which would silence later tests' log capture
RUN = ("import sys; from importlinter.cli import lint_imports; "
       "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")


def _lint(config: Path, *paths: Path) -> tuple[int, str]:
    path = os.pathsep.join([*map(str, paths), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", RUN, str(config)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path}, cwd=config.parent)
    return done.returncode, done.stdout + done.stderr


def test_the_layering_contracts_are_kept():
    code, out = _lint(ROOT / "pyproject.toml")
    assert code == 0, out
    assert "0 broken" in out and "5 kept" in out


def test_a_broken_contract_is_reported(tmp_path):
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
    code, out = _lint(config, tmp_path)
    assert code == 1, out
    assert "2 broken" in out
    assert "layered_demo.core.records -> layered_demo.pipelines.a" in out
