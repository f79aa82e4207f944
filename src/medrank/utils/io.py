"""Atomic file and directory writes.

Indexes and checkpoints are written to a temporary sibling and renamed into
place, so a crash mid-write leaves either the old artefact or the new one,
never a half-written file (a folder replacing a folder is swapped in one
``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere the old folder is moved aside
first and moved back if the second rename fails). A directory is only replaced when it is empty, was
written by :func:`atomic_dir` (it holds :data:`MARKER`), is a model or index folder
of an earlier version (only artefact files, among them weights, a FAISS index or a
medrank index manifest), lies in medrank's cache (``$MEDRANK_CACHE``) or holds
nothing the new write does not also write, so ``--out some/folder/of/mine`` cannot
wipe a user's files. Written files get the ordinary umask-based modes (``tempfile``
creates owner-only ones).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MARKER = ".medrank-artifact"
"""Empty file that :func:`atomic_dir` writes into every directory it creates."""
LEGACY_SUFFIXES = (".safetensors", ".faiss")
"""Files that mark a folder as a medrank model or index written before :data:`MARKER` existed."""
ARTIFACT_SUFFIXES = (".json", ".jsonl", ".safetensors", ".faiss", ".npy")
"""The only kinds of top-level file such a folder holds (anything else may be the user's)."""


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask(0)`` and back would leave a moment in
    which another thread's new files are created world-writable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):  # pragma: no cover - not Linux: the set-and-restore is the only portable read
        pass
    mask = os.umask(0o077)  # a restrictive value for the instant it is in force
    os.umask(mask)
    return mask


def _under_cache(path: Path) -> bool:
    from medrank.config import cache_dir

    return path.resolve().is_relative_to(cache_dir().resolve())


def _legacy_artifact(folder: Path) -> bool:
    """A medrank model/index folder without the marker: nothing but artefact files, and weights, a FAISS
    index or a medrank index manifest among them."""
    files = [p for p in folder.iterdir() if not p.is_dir()]
    if any(not p.name.endswith(ARTIFACT_SUFFIXES) for p in files):
        return False
    if any(p.name.endswith(LEGACY_SUFFIXES) for p in files):
        return True
    manifest = folder / "manifest.json"
    try:
        return manifest.is_file() and "format_version" in json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, TypeError, OSError):
        return False


def _refuse_non_folder(target: Path) -> None:
    if (target.exists() or target.is_symlink()) and (not target.is_dir() or target.is_symlink()):
        raise FileExistsError(f"{target} exists and is not a folder; remove it or choose another path")


def _check_replaceable(target: Path, new: Path) -> None:
    """Raise unless replacing ``target`` by ``new`` loses nothing medrank did not write."""
    _refuse_non_folder(target)
    if not target.exists():
        return
    old = {p.name for p in target.iterdir()}
    extra = old - {p.name for p in new.iterdir()}
    if not extra or MARKER in old:
        return
    if _legacy_artifact(target):
        return  # a model or index folder written before the marker existed (extra files: e.g. prior.json)
    if _under_cache(target):
        return  # medrank's own cache ($MEDRANK_CACHE): every folder in it is medrank's
    extra = sorted(extra)
    raise FileExistsError(
        f"{target} exists and holds files medrank did not write ({', '.join(extra[:3])}"
        f"{', ...' if len(extra) > 3 else ''}); remove it or choose another path"
    )


@contextmanager
def atomic_dir(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` when the block exits cleanly.

    On error the temporary directory is removed and ``target`` is untouched. An existing
    ``target`` is replaced only when nothing in it would be lost (see the module docstring);
    otherwise :class:`FileExistsError` (for a file, before the block runs).
    """
    target = Path(target)
    _refuse_non_folder(target)  # a file is never replaced: fail before any work
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
        (tmp / MARKER).touch()
        _check_replaceable(target, tmp)
        mask = _umask()
        os.chmod(tmp, 0o777 & ~mask)
        for root, dirs, files in os.walk(tmp):  # one walk: umask modes, then fsync
            for d in dirs:
                if not os.path.islink(os.path.join(root, d)):
                    os.chmod(os.path.join(root, d), 0o777 & ~mask)
            for f in files:
                path = os.path.join(root, f)
                if not os.path.islink(path):
                    os.chmod(path, 0o666 & ~mask)
                with open(path, "rb") as fh:
                    os.fsync(fh.fileno())
        if target.exists() and _exchange(tmp, target):
            # one atomic swap: target is the new folder, tmp now holds the old one (removed below)
            _fsync_dir(target.parent)
        else:
            old = None
            if target.exists():
                old = target.parent / f".{target.name}.old-{os.getpid()}"
                os.replace(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:
                if old is not None:
                    os.replace(old, target)  # put the old artefact back: never leave no artefact
                raise
            _fsync_dir(target.parent)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # an old glibc, musl
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json_file(path: str | os.PathLike[str], what: str) -> Any:
    """The JSON value of the file at ``path``; ``FileNotFoundError`` or ``ValueError`` naming ``what`` it should be
    ("urgent signs file") where it is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON {what} ({exc})") from exc


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def atomic_write_npy(path: str | os.PathLike[str], array: Any) -> None:
    """``array`` as a ``.npy`` file, written atomically (read back with ``np.load(path)``, no pickle)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())


def atomic_write_npz(path: str | os.PathLike[str], **arrays: Any) -> None:
    """Named arrays as one ``.npz`` file, written atomically (read back with ``np.load(path, allow_pickle=False)``)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created, with its folder, if missing) between processes; where the OS
    has no ``flock`` (Windows) it is a no-op and writes only stay atomic."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
