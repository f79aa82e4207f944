"""Markdown tables of several systems' metric dictionaries, for bench reports."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real


def _lookup(values: Mapping[str, float], metric: str) -> object:
    if metric in values:
        return values[metric]
    folded = metric.lower()
    for key, value in values.items():
        if key.lower() == folded:
            return value
    return None


def to_markdown_table(
    rows: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str],
    scale: float = 100,
    digits: int = 2,
    *,
    name_header: str = "system",
) -> str:
    """Render ``{system: {metric: value}}`` as a GitHub markdown table.

    One row per system (in mapping order), one right-aligned column per metric.
    Values are multiplied by ``scale`` (100 turns fractions into percentages) and
    shown with ``digits`` decimals; a missing metric (looked up exactly, then
    case-insensitively) or a NaN value shows as ``-``.
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    if not metrics:
        raise ValueError("metrics must name at least one column")
    if not isinstance(digits, Integral) or isinstance(digits, bool) or digits < 0:
        raise ValueError(f"digits must be a non-negative int, got {digits!r}")
    if not isinstance(scale, Real) or isinstance(scale, bool):
        raise TypeError(f"scale must be a number, got {scale!r}")

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")

    lines = [
        "| " + " | ".join([cell(name_header), *(cell(m) for m in metrics)]) + " |",
        "|" + "|".join([" --- ", *(" ---: " for _ in metrics)]) + "|",
    ]
    for system, values in rows.items():
        cells = [cell(system)]
        for metric in metrics:
            value = _lookup(values, metric)
            if value is None:
                cells.append("-")
                continue
            if not isinstance(value, Real) or isinstance(value, bool):
                raise TypeError(f"rows[{system!r}][{metric!r}] must be a number, got {value!r}")
            v = float(value)
            cells.append("-" if math.isnan(v) else f"{v * float(scale):.{int(digits)}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
