"""Errors raised by the dataset loaders.

A malformed input line fails loudly with the file path and the 1-based line
number, so the problem can be found with ``sed -n 17p FILE`` rather than by
debugging a training loop, e.g.::

    /work/shared/data/chip-cdn/train.jsonl:17: field 'normalized_result' missing
"""

from __future__ import annotations

import os
from pathlib import Path


class DataFormatError(ValueError):
    """A dataset file breaks its documented format.

    Attributes: ``path`` (the file), ``line`` (1-based line number, ``None``
    for a file-level problem) and ``reason`` (what was wrong).
    """

    def __init__(self, path: str | os.PathLike[str], line: int | None, reason: str) -> None:
        self.path = Path(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[DataFormatError], tuple[Path, int | None, str]]:
        return (type(self), (self.path, self.line, self.reason))
