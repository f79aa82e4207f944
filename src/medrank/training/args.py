"""The settings every training run has, whatever its pipeline: the base of each pipeline's config dataclass.

A pipeline's config (``pipelines/<name>/config.py``) subclasses :class:`TrainingArgs`, adds its own
fields and may re-declare a field here with its own default (its position stays the base's). The
:class:`~medrank.training.Trainer` reads the optimisation fields through
:func:`~medrank.training.recipe_settings`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T", bound="TrainingArgs")


@dataclass
class TrainingArgs:
    """Epochs, optimiser, schedule, batch size, seed, threads and output folder of one run."""

    epochs: int = 1
    lr: float = 1e-4
    scheduler: str = "linear"  # "linear" (warm-up then decay), "cosine", "constant" or "exponential"
    warmup_ratio: float = 0.1  # fraction of the steps spent warming the learning rate up
    batch_size: int = 32
    seed: int = 13
    threads: int | None = None  # None: the global --threads, else every core (the CPU recipes set 1 or 2)
    output_dir: str | None = None  # read by `medrank train` (default run directory)

    @classmethod
    def checked(cls: type[T], raw: dict[str, Any], what: str,
                unknown_message: str = "unknown {what} keys: {unknown}; known: {known}") -> T:
        """``cls(**raw)`` once its keys and value types are checked, then :meth:`validate`d.

        Unknown keys are refused with ``unknown_message`` (``{what}``, ``{unknown}``, ``{known}``: sorted lists),
        a value of the wrong type with one line naming it (:func:`medrank.config.check_dataclass_config`).
        """
        from medrank.config import check_dataclass_config

        known = sorted(f.name for f in fields(cls))
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ValueError(unknown_message.format(what=what, unknown=unknown, known=known))
        check_dataclass_config(cls, raw, what)
        out = cls(**raw)
        out.validate()
        return out

    def validate(self) -> None:
        """Range checks of a subclass (the base's fields need none beyond their types)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
