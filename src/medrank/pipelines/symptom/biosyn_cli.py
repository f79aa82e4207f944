"""``medrank train`` for ``task: biosyn`` (English concept normalisation, :mod:`~medrank.pipelines.symptom.biosyn`).

Imported by the package, so the trainer is registered whenever the symptom plugin loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medrank.registry import register_trainer


@register_trainer("biosyn")
def train(config: dict[str, Any], output_dir: Path, resume: bool) -> dict[str, Any]:
    """Train a BioSyn model (sparse + dense scores, synonym marginalisation) from a config."""
    from medrank.pipelines.symptom.biosyn import train_biosyn

    summary = train_biosyn(config, output_dir, resume)
    return {
        "name": summary["name"],
        "output_dir": str(output_dir),
        "best_epoch": summary["best_epoch"],
        "sparse_weight": {"learned": summary["learned_sparse_weight"], "tuned": summary["tuned_sparse_weight"]},
        "devel": summary["devel"],
        "seconds": summary["seconds"],
    }
