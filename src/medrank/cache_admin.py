"""Listing and pruning medrank's rebuildable caches: the procedure pipeline's frozen-bottom cache
(``$MEDRANK_CACHE/procedures-frozen``) and the ONNX exports of encoders (``$MEDRANK_CACHE/onnx``).

Every trained MTCG over new weights files its names' states (200–300 MB for e5-small) and their
embeddings under a new key (:meth:`BiEncoder.cache_key`, ``ProcedureNormalizer._term_embeddings_file``),
and nothing else removes the old ones; every re-saved or retrained encoder served by ONNX Runtime
gets a new export folder (:mod:`medrank.encoders.onnx`, 90-470 MB each). Loading an entry marks it used (its modification time, set
by :func:`mark_used`), so ``prune`` can drop what no run has read for a while; a pruned entry is only
a cache miss: the next run that needs it recomputes it.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from medrank.utils.io import MARKER

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    bytes: int
    last_used: float  # seconds since the epoch

    @property
    def days_unused(self) -> float:
        return max(0.0, (time.time() - self.last_used) / 86400)


def mark_used(path: str | os.PathLike[str]) -> None:
    """Record that a cache entry was read now (best effort: a read-only cache stays usable, but then
    looks unused to ``prune``; a long-running service marks its entries only when it starts)."""
    try:
        os.utime(path)
    except OSError as exc:
        log.debug("could not mark %s used (%s)", path, exc)


KEY_FOLDER = re.compile(r"^[0-9a-f]{16}$")
NAMES_FILE = re.compile(r"^names-[0-9a-f]{16}\.safetensors$")


def default_root() -> Path:
    """``$MEDRANK_CACHE/procedures-frozen`` (not created)."""
    from medrank.config import cache_dir

    return cache_dir(create=False) / "procedures-frozen"


def default_roots() -> list[Path]:
    """Every cache :func:`list_entries` and :func:`prune` cover by default (not created):
    ``$MEDRANK_CACHE/procedures-frozen`` and ``$MEDRANK_CACHE/onnx``."""
    from medrank.config import cache_dir

    return [default_root(), cache_dir(create=False) / "onnx"]


def _size(path: Path) -> int:
    total = 0
    for p in [path] if path.is_file() else path.rglob("*"):
        try:
            total += p.stat().st_size if p.is_file() else 0
        except FileNotFoundError:  # swapped by a writer while listing
            pass
    return total


def _is_entry(p: Path) -> bool:
    """A key folder written by ``atomic_dir`` or a names file; never a symlink, a temp name or a user's own file."""
    if p.is_symlink():
        return False
    if KEY_FOLDER.match(p.name):
        return p.is_dir() and (p / MARKER).is_file()
    return bool(NAMES_FILE.match(p.name)) and p.is_file()


def list_entries(root: str | os.PathLike[str] | None = None) -> list[CacheEntry]:
    """The entries (key folders and ``names-*.safetensors`` files) of ``root``, or of every
    :func:`default_roots` cache when ``root`` is None, least recently used first."""
    roots = default_roots() if root is None else [Path(root)]
    entries = []
    for folder in roots:
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            try:
                if _is_entry(p):
                    entries.append(CacheEntry(p, _size(p), p.stat().st_mtime))
            except FileNotFoundError:
                continue
    return sorted(entries, key=lambda e: e.last_used)


def prune(
    unused_days: float, root: str | os.PathLike[str] | None = None, dry_run: bool = True
) -> tuple[list[CacheEntry], list[CacheEntry]]:
    """Remove (or, ``dry_run``, only list) the entries no run has read for ``unused_days`` days
    (of ``root``, or of every :func:`default_roots` cache).

    Returns ``(removed or to remove, failed)``. An entry read since it was listed is kept; one is
    renamed to a dot name before deletion, so a concurrent reader sees all of it or none of it.
    """
    if not math.isfinite(unused_days) or unused_days < 0:
        raise ValueError(f"unused_days must be a finite number >= 0, got {unused_days}")
    stale = [e for e in list_entries(root) if e.days_unused >= unused_days]
    if dry_run:
        return stale, []
    removed, failed = [], []
    for entry in stale:
        try:
            if entry.path.stat().st_mtime != entry.last_used:
                continue  # read (or re-written) since it was listed
            doomed = entry.path.with_name(f".{entry.path.name}.prune-{os.getpid()}")
            entry.path.rename(doomed)
        except FileNotFoundError:
            continue
        except OSError:
            failed.append(entry)
            continue
        try:
            if doomed.is_dir():
                shutil.rmtree(doomed)
            else:
                doomed.unlink()
            removed.append(entry)
        except OSError:
            failed.append(entry)
    return removed, failed
