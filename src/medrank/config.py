"""Process-wide settings: where data lives, how many threads, which seed.

The data root defaults to ``../shared/data`` relative to the current working
directory (the layout of a checkout next to the shared datasets) and is
overridden by ``MEDRANK_DATA`` or by the CLI's ``--data`` flag. The cache for
converted models lives outside the repository (``MEDRANK_CACHE`` or
``~/.cache/medrank``).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

DEFAULT_DATA_ROOT = Path("..") / "shared" / "data"


class DataNotFoundError(FileNotFoundError):
    """A dataset folder or file is missing under the data root."""


def data_root(override: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the dataset root: explicit override, then ``MEDRANK_DATA``, then ``../shared/data``."""
    if override is not None:
        root = Path(override)
    elif os.environ.get("MEDRANK_DATA"):
        root = Path(os.environ["MEDRANK_DATA"])
    else:
        root = DEFAULT_DATA_ROOT
    return root.expanduser().resolve()


def dataset_dir(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Folder of dataset ``name`` under the data root, with a clear error if absent."""
    path = data_root(root) / name
    if not path.is_dir():
        raise DataNotFoundError(
            f"dataset folder {path} not found; set MEDRANK_DATA or pass --data to point at the data root"
        )
    return path


def cache_dir() -> Path:
    """Where converted models and built indexes are cached (never inside the repo)."""
    path = Path(os.environ.get("MEDRANK_CACHE", Path.home() / ".cache" / "medrank")).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_threads() -> int:
    """Threads to use by default: ``MEDRANK_THREADS`` or the cores this process may run on."""
    env = os.environ.get("MEDRANK_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


_requested_threads: int | None = None


def requested_threads() -> int | None:
    """The last thread count set explicitly (``medrank --threads N``, ``set_threads(N)``); None if never."""
    return _requested_threads


def set_threads(n: int | None = None) -> int:
    """Set torch, BLAS/OpenMP and faiss thread counts to ``n`` (default: available cores)."""
    global _requested_threads
    explicit = n is not None
    n = default_threads() if n is None else int(n)
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    if explicit:
        _requested_threads = n
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
    try:
        import faiss

        faiss.omp_set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
    return n


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch so runs are reproducible."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover
        pass
