"""File names that mark a saved procedure-normalisation run (read by :func:`medrank.load`), and where the
CPU recipe's runs are."""

from pathlib import Path

#: the manifest of a KAR / fusion run a :class:`ProcedureNormalizer` loads
NORMALIZER_MARKER = "normalizer.json"

DEFAULT_RUNS = (Path("runs/procedures/fusion"), Path("runs/procedures/kar"))


def default_run() -> Path:
    """The fusion run of the CPU recipe when it exists, else its KAR run (relative to the current folder)."""
    run = next((r for r in DEFAULT_RUNS if (r / NORMALIZER_MARKER).exists()), None)
    if run is None:
        raise FileNotFoundError(
            f"no trained normaliser under ./{DEFAULT_RUNS[0]} or ./{DEFAULT_RUNS[1]} (looked in {Path.cwd()}); "
            "train one (configs/procedures/README.md) or pass --model RUN"
        )
    return run
