"""`medrank cache list / prune` over the procedure pipeline's frozen-bottom cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrank.cache_admin import list_entries, mark_used, prune


def _cache(root: Path) -> dict[str, Path]:
    """Two key folders and a names file, last used 40, 10 and 1 days ago; stray files are not entries."""
    now = time.time()
    made = {}
    for name, days in (("aaaa", 40), ("bbbb", 10)):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "passage.safetensors").write_bytes(b"x" * 1000)
        os.utime(folder, (now - days * 86400, now - days * 86400))
        made[name] = folder
    names = root / "names-cccc.safetensors"
    names.write_bytes(b"y" * 500)
    os.utime(names, (now - 86400, now - 86400))
    made["names"] = names
    (root / "notes.txt").write_text("not a cache entry")
    (root / ".aaaa.tmp-1").mkdir()
    return made


def test_list_and_prune(tmp_path: Path) -> None:
    made = _cache(tmp_path)
    entries = list_entries(tmp_path)
    assert [e.path.name for e in entries] == ["aaaa", "bbbb", "names-cccc.safetensors"]  # least recently used first
    assert [e.bytes for e in entries] == [1000, 1000, 500]
    assert entries[0].days_unused == pytest.approx(40, abs=0.01)
    # a dry run lists and removes nothing
    assert [e.path.name for e in prune(5, tmp_path)] == ["aaaa", "bbbb"] and made["aaaa"].is_dir()
    # reading an entry marks it used, so it survives
    mark_used(made["bbbb"])
    assert [e.path.name for e in prune(5, tmp_path, dry_run=False)] == ["aaaa"]
    assert not made["aaaa"].exists() and made["bbbb"].is_dir() and made["names"].is_file()
    assert [e.path.name for e in prune(0, tmp_path, dry_run=False)] == ["names-cccc.safetensors", "bbbb"]  # bbbb was just read
    assert list_entries(tmp_path) == [] and (tmp_path / "notes.txt").is_file()
    assert list_entries(tmp_path / "missing") == []
    with pytest.raises(ValueError, match=">= 0"):
        prune(-1, tmp_path)


def test_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from medrank.cli import app

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path))
    _cache(tmp_path / "procedures-frozen")
    runner = CliRunner()
    listed = runner.invoke(app, ["cache", "list"])
    assert listed.exit_code == 0 and "aaaa" in listed.output and "3 entries" in listed.output
    dry = runner.invoke(app, ["cache", "prune", "--unused-days", "20"])
    assert dry.exit_code == 0 and "would remove" in dry.output and (tmp_path / "procedures-frozen" / "aaaa").is_dir()
    done = runner.invoke(app, ["cache", "prune", "--unused-days", "20", "--yes"])
    assert done.exit_code == 0 and "removed" in done.output and not (tmp_path / "procedures-frozen" / "aaaa").exists()
    bad = runner.invoke(app, ["cache", "prune", "--unused-days", "-1"])
    assert bad.exit_code != 0 and ">= 0" in bad.output
