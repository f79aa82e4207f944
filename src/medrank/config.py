"""Process-wide settings: where data lives, how many threads, which seed.

The data root defaults to ``../shared/data`` relative to the current working
directory (the layout of a checkout next to the shared datasets), or, when that
folder does not exist, relative to the checkout medrank is installed from (so
the CLI works from any folder of an editable install), and is overridden by ``MEDRANK_DATA`` or by the CLI's ``--data`` flag. The cache for
converted models lives outside the repository (``MEDRANK_CACHE`` or
``~/.cache/medrank``).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
        beside_checkout = Path(__file__).resolve().parents[2] / DEFAULT_DATA_ROOT
        if not root.is_dir() and beside_checkout.is_dir():
            root = beside_checkout
    return root.expanduser().resolve()


def dataset_dir(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Folder of dataset ``name`` under the data root, with a clear error if absent."""
    path = data_root(root) / name
    if not path.is_dir():
        if root is not None:
            origin = "the given data root"
        elif os.environ.get("MEDRANK_DATA"):
            origin = "MEDRANK_DATA"
        else:
            origin = f"the default data root {DEFAULT_DATA_ROOT} (relative to {Path.cwd()})"
        raise DataNotFoundError(
            f"dataset folder {path} not found under {origin}; set MEDRANK_DATA=/path/to/data "
            "or pass --data /path/to/data (a global option, before the command)"
        )
    return path


def cache_dir(create: bool = True) -> Path:
    """Where converted models and built indexes are cached (never inside the repo); ``create=False`` only names it."""
    path = Path(os.environ.get("MEDRANK_CACHE", Path.home() / ".cache" / "medrank")).expanduser()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def default_threads() -> int:
    """Threads to use by default: ``MEDRANK_THREADS`` or the cores this process may run on."""
    env = os.environ.get("MEDRANK_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"MEDRANK_THREADS must be a whole number of threads, got {env!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


_requested_threads: int | None = None


def requested_threads() -> int | None:
    """The last thread count set explicitly (``medrank --threads N``, ``set_threads(N)``); None if never."""
    return _requested_threads


def set_threads(n: int | None = None) -> int:
    """Set torch, BLAS/OpenMP and faiss thread counts to ``n`` (default: available cores).

    An explicit ``n`` is remembered as the user's choice (:func:`requested_threads`)."""
    global _requested_threads
    applied = _apply_threads(n)
    if n is not None:
        _requested_threads = applied
    return applied


def _apply_threads(n: int | None) -> int:
    n = default_threads() if n is None else int(n)
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)  # for libraries loaded later (and child processes)
    try:
        # numpy's OpenBLAS (and any OpenMP runtime) is already loaded by now and read the variables
        # above at start-up: set its pool directly
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass
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


# -- config value types ---------------------------------------------------------------------------------
_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict, "tuple": tuple}


def _expected(default: Any, annotation: str | None) -> tuple[set[type], bool] | None:
    """The accepted types of one key and whether ``None`` is allowed, from its annotation or its default."""
    if annotation:
        kinds, nullable = set(), False
        for part in annotation.replace("Optional[", "").replace("]", "|").split("|"):
            name = part.strip().split("[")[0]
            if name == "None":
                nullable = True
            elif name in _TYPE_NAMES:
                kinds.add(_TYPE_NAMES[name])
            elif name:
                return None  # Literal, Path, a class…: the config's own checks handle it
        return (kinds, nullable) if kinds else None
    if default is None:
        return None
    kind = type(default)
    # a plain dict of defaults cannot say which keys take null ("no limit"): null is left to the pipeline
    return ({kind}, True) if kind in _TYPE_NAMES.values() else None


def _accepts(kinds: set[type], value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int) and (int in kinds or float in kinds):
        return True
    if isinstance(value, float) and (float in kinds or (int in kinds and key.endswith(("_minutes", "_seconds")))):
        return True
    if isinstance(value, (list, tuple)) and (list in kinds or tuple in kinds):
        return True
    return any(type(value) is k for k in kinds if k not in (int, float, bool, list, tuple))


#: keys whose defaults are often None but whose type is known wherever they appear
COMMON_ANNOTATIONS = {"threads": "int | None", "max_steps_per_epoch": "int | None", "seed": "int",
                      "max_train_samples": "int | None", "max_eval_samples": "int | None"}


def check_config_types(config: dict[str, Any], defaults: dict[str, Any], where: str = "config",
                       annotations: dict[str, str] | None = None) -> None:
    """Raise ``ValueError`` naming the first key of ``config`` whose value has the wrong type.

    The expected type comes from ``annotations`` (a dataclass's field annotations, as strings) or else from the
    key's default in ``defaults`` (an ``int`` default wants an integer, a ``float`` one any number; ``None``
    defaults, and null values of keys without annotations, are not checked). Nested mappings are checked against nested defaults. A YAML ``epochs: "3"`` then
    fails at once with one line instead of a ``TypeError`` deep in training.
    """
    for key, value in config.items():
        if key not in defaults:
            continue
        default = defaults[key]
        annotation = (annotations or {}).get(key) or (COMMON_ANNOTATIONS.get(key) if default is None else None)
        expected = _expected(default, annotation)
        if expected is None:
            continue
        kinds, nullable = expected
        if value is None and nullable:
            continue
        if not _accepts(kinds, value, key):
            names = " or ".join(sorted({"integer" if k is int else "number" if k is float else k.__name__ for k in kinds}))
            hint = ""
            if isinstance(value, str) and (int in kinds or float in kinds):
                try:
                    float(value)
                    hint = (" (YAML reads 1e-3 as text: write 1.0e-3)" if "e" in value.lower()
                            else " (a quoted number: drop the quotes)")
                except ValueError:
                    pass
            say_null = nullable and annotation is not None
            raise ValueError(f"{where}: {key} must be {'an' if names[0] in 'aeiou' else 'a'} {names}"
                             f"{' or null' if say_null else ''}, got {value!r}{hint}")
        if isinstance(value, dict) and isinstance(default, dict) and default:
            check_config_types(value, default, f"{where}.{key}")


def check_dataclass_config(cls: type, config: dict[str, Any], where: str) -> None:
    """:func:`check_config_types` for a config dataclass: field annotations give the expected types."""
    fields = dataclasses.fields(cls)
    defaults = {f.name: None if f.default is dataclasses.MISSING else f.default for f in fields}
    check_config_types(config, defaults, where, {f.name: str(f.type) for f in fields})


def known_keys_only(cls: type, config: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``config`` as a dict, once every key is a field of dataclass ``cls``; else one line naming the unknown keys
    (``what``: the settings' name in that line). A typo must not fall back to a default silently."""
    known = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; known: {known}")
    return dict(config)


def task_option(options: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    """``options[key]`` (a ``medrank evaluate --set KEY=VALUE``) checked to be ``kind`` (``int`` or ``float``).

    ``--set`` values are parsed as JSON, so ``max_samples=abc`` arrives as text and ``max_samples=1.5``
    as a float; either ends here as one line naming the option instead of a ``TypeError`` later.
    A missing key or a null value gives ``default`` (returned as is, ``None`` included).
    """
    value = options.get(key)
    if value is None:  # absent, or --set KEY=null: the default
        return default
    ok = (isinstance(value, int) if kind is int else isinstance(value, int | float)) and not isinstance(value, bool)
    if not ok:
        raise ValueError(f"--set {key} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    return kind(value)


def set_run_threads(config_threads: int | None) -> int:
    """Threads for a training run: the global ``medrank --threads N`` when given, else the run config's
    ``threads``, else every available core. A recipe's ``threads`` keeps its timings comparable; a user
    who asks for more (or fewer) on the command line gets them."""
    explicit = requested_threads()
    return _apply_threads(explicit if explicit is not None else config_threads)
