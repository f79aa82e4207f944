"""`medrank cache list / prune` over the procedure pipeline's frozen-bottom cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrank.cache_admin import list_entries, mark_used, prune
from medrank.utils.io import MARKER

A, B, C = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"


def _age(path: Path, days: float) -> None:
    t = time.time() - days * 86400
    os.utime(path, (t, t))


def _cache(root: Path) -> dict[str, Path]:
    """Two key folders and a names file, last used 40, 10 and 1 days ago, beside things that are no entries."""
    made = {}
    for name, days in ((A, 40), (B, 10)):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / MARKER).touch()
        (folder / "passage.safetensors").write_bytes(b"x" * 1000)
        _age(folder, days)
        made[name] = folder
    names = root / f"names-{C}.safetensors"
    names.write_bytes(b"y" * 500)
    _age(names, 1)
    made["names"] = names
    (root / "notes.txt").write_text("not a cache entry")
    (root / "my-folder").mkdir()  # a user's own folder (no hex key, no marker)
    (root / "dddddddddddddddd").mkdir()  # a hex name without atomic_dir's marker
    (root / f".{A}.tmp-1").mkdir()  # atomic_dir's temp folder
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / MARKER).touch()
    (root / "eeeeeeeeeeeeeeee").symlink_to(outside, target_is_directory=True)
    for p in (root / "my-folder", root / "dddddddddddddddd", outside):
        _age(p, 400)
    return made


def test_list_and_prune(tmp_path: Path) -> None:
    root = tmp_path / "procedures-frozen"
    made = _cache(root)
    entries = list_entries(root)
    assert [e.path.name for e in entries] == [A, B, f"names-{C}.safetensors"]  # least recently used first
    assert [e.bytes for e in entries] == [1000, 1000, 500]
    assert entries[0].days_unused == pytest.approx(40, abs=0.01)
    # a dry run lists and removes nothing
    assert [e.path.name for e in prune(5, root)[0]] == [A, B] and made[A].is_dir()
    # reading an entry marks it used, so it survives
    mark_used(made[B])
    removed, failed = prune(5, root, dry_run=False)
    assert [e.path.name for e in removed] == [A] and failed == []
    assert not made[A].exists() and made[B].is_dir() and made["names"].is_file()
    assert [e.path.name for e in prune(0, root, dry_run=False)[0]] == [f"names-{C}.safetensors", B]  # B was just read
    assert list_entries(root) == []
    # nothing but entries was touched: the user's folders, the temp folder, the symlink and its target stay
    assert {p.name for p in root.iterdir()} == {"notes.txt", "my-folder", "dddddddddddddddd", f".{A}.tmp-1", "eeeeeeeeeeeeeeee"}
    assert (tmp_path / "outside" / MARKER).is_file()
    assert list_entries(tmp_path / "missing") == []
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite number >= 0"):
            prune(bad, root)


def test_an_entry_read_after_listing_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medrank.cache_admin as admin

    made = _cache(tmp_path / "procedures-frozen")
    listed = admin.list_entries(tmp_path / "procedures-frozen")
    monkeypatch.setattr(admin, "list_entries", lambda root=None: listed)
    mark_used(made[A])  # a service reads it between the listing and the deletion
    removed, _ = admin.prune(5, tmp_path / "procedures-frozen", dry_run=False)
    assert [e.path.name for e in removed] == [B] and made[A].is_dir()


def test_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from medrank.cli import app

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path))
    _cache(tmp_path / "procedures-frozen")
    runner = CliRunner()
    listed = runner.invoke(app, ["cache", "list"])
    assert listed.exit_code == 0 and A in listed.output and "3 entries" in listed.output and "procedures-frozen" in listed.output
    dry = runner.invoke(app, ["cache", "prune", "--unused-days", "20"])
    assert dry.exit_code == 0 and "would remove" in dry.output and (tmp_path / "procedures-frozen" / A).is_dir()
    done = runner.invoke(app, ["cache", "prune", "--unused-days", "20", "--yes"])
    assert done.exit_code == 0 and "removed" in done.output and not (tmp_path / "procedures-frozen" / A).exists()
    for bad in ("-1", "nan"):
        out = runner.invoke(app, ["cache", "prune", "--unused-days", bad])
        assert out.exit_code == 2 and "finite number >= 0" in out.output
    # a failed deletion is reported and fails the command
    import medrank.cache_admin as admin

    def refuse(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(admin.shutil, "rmtree", refuse)
    failed = runner.invoke(app, ["cache", "prune", "--unused-days", "5", "--yes"])
    assert failed.exit_code == 2 and "could not remove 1 entries" in failed.output


def test_loading_marks_the_key_folder_used_and_a_partial_write_keeps_other_kinds(tmp_path: Path) -> None:
    from medrank.cache_admin import list_entries as entries
    from medrank.pipelines.procedures.mtcg import MTCG
    from tests.test_procedures import tiny_chinese_encoder

    mtcg = MTCG(tiny_chinese_encoder(), train_layers=1)
    mtcg.bi.fill_cache(["右甲状腺叶切除术"], "query")
    mtcg.bi.fill_cache(["肾切除术"], "passage")
    mtcg.bi.save_cache(tmp_path)
    folder = tmp_path / mtcg.bi.cache_key()
    _age(folder, 50)
    again = MTCG(tiny_chinese_encoder(), train_layers=1)
    assert again.bi.load_cache(tmp_path) == 2
    assert entries(tmp_path)[0].days_unused < 0.01
    # re-writing the names only (warm_up's write-back) keeps the training mentions' states
    again.bi.fill_cache(["肾切除术", "左肾切除术"], "passage")
    again.bi.save_cache(tmp_path, kinds=("passage",))
    assert {p.name for p in folder.glob("*.safetensors")} == {"query.safetensors", "passage.safetensors"}
    third = MTCG(tiny_chinese_encoder(), train_layers=1)
    assert third.bi.load_cache(tmp_path) == 3 and len(third.bi.caches["query"]) == 1
    # a damaged cache file is a cache miss, not a failed start
    (folder / "passage.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    fourth = MTCG(tiny_chinese_encoder(), train_layers=1)
    assert fourth.bi.load_cache(tmp_path) == 1 and "passage" not in fourth.bi.caches
