"""Listing and pruning the procedure pipeline's frozen-bottom cache (``$MEDRANK_CACHE/procedures-frozen``).

Every trained MTCG over new weights files its names' states (200–300 MB for e5-small) and their
embeddings under a new key (:meth:`BiEncoder.cache_key`, ``ProcedureNormalizer._term_embeddings_file``),
and nothing else removes the old ones. Loading an entry marks it used (its modification time, set
by :func:`mark_used`), so ``prune`` can drop what no run has read for a while; a pruned entry is only
a cache miss: the next run that needs it recomputes it.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    bytes: int
    last_used: float  # seconds since the epoch

    @property
    def days_unused(self) -> float:
        return max(0.0, (time.time() - self.last_used) / 86400)


def mark_used(path: str | os.PathLike[str]) -> None:
    """Record that a cache entry was read now (best effort: a read-only cache stays usable)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def list_entries(root: str | os.PathLike[str] | None = None) -> list[CacheEntry]:
    """The cache's entries (key folders and ``names-*.safetensors`` files), least recently used first."""
    if root is None:
        from medrank.pipelines.procedures.training import default_cache_dir

        root = default_cache_dir()
    root = Path(root)
    if not root.is_dir():
        return []
    entries = [
        CacheEntry(p, _size(p), p.stat().st_mtime)
        for p in root.iterdir()
        if not p.name.startswith(".") and (p.is_dir() or (p.name.startswith("names-") and p.suffix == ".safetensors"))
    ]
    return sorted(entries, key=lambda e: e.last_used)


def prune(unused_days: float, root: str | os.PathLike[str] | None = None, dry_run: bool = True) -> list[CacheEntry]:
    """Remove (or, ``dry_run``, only list) the entries no run has read for ``unused_days`` days."""
    if unused_days < 0:
        raise ValueError(f"unused_days must be >= 0, got {unused_days}")
    stale = [e for e in list_entries(root) if e.days_unused >= unused_days]
    if not dry_run:
        for entry in stale:
            if entry.path.is_dir():
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                entry.path.unlink(missing_ok=True)
    return stale
