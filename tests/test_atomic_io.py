"""``atomic_write_bytes`` / ``atomic_write_json``: the target is replaced by one rename, or not touched at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from medrank.utils import io as io_mod
from medrank.utils.io import atomic_write_bytes, atomic_write_json, atomic_write_text


def _failing_replace(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []

    def boom(src, dst, *args, **kwargs):
        calls.append((os.fspath(src), os.fspath(dst)))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(io_mod.os, "replace", boom)
    return calls


@pytest.mark.parametrize("write, payload", [
    (atomic_write_bytes, b"new bytes"),
    (atomic_write_text, "new text"),
    (atomic_write_json, {"new": [1, 2]}),
])
def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              write, payload) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"old content")
    calls = _failing_replace(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        write(target, payload)
    monkeypatch.undo()
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # the temp file is gone
    # the one rename tried was temp file → target, from the target's own folder
    assert len(calls) == 1 and calls[0][1] == str(target)
    assert Path(calls[0][0]).parent == tmp_path and Path(calls[0][0]).name.startswith(".out.json.tmp-")


def test_a_failed_first_write_leaves_no_file_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _failing_replace(monkeypatch)
    with pytest.raises(OSError):
        atomic_write_json(tmp_path / "new.json", [1])
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_the_target_is_a_new_file_not_rewritten_in_place(tmp_path: Path) -> None:
    """A rename swaps in a new inode: a reader holding the old file (here a hard link) keeps the old
    content whole, where a copy into the target would rewrite it under the reader."""
    target = tmp_path / "data.json"
    target.write_text("old", encoding="utf-8")
    reader = tmp_path / "reader-link"
    os.link(target, reader)
    atomic_write_json(target, {"a": "é"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": "é"}
    assert target.read_text(encoding="utf-8") == '{\n  "a": "é"\n}\n'
    assert reader.read_text(encoding="utf-8") == "old"
    assert os.stat(target).st_ino != os.stat(reader).st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json", "reader-link"]
