"""CHIP 2019 procedure normalisation data: mentions, the ICD-9-CM-3 knowledge base, keyword lists.

* :func:`load_term_base` — the candidate set from the core loader
  :func:`medrank.data.procedures.load_procedure_kb` (one concept per distinct name, its codes in
  ``meta["codes"]``): 9,867 codes share 9,468 distinct names and the gold labels are *names*, so
  the pipeline ranks :class:`TermBase` entries, one per distinct name with every code that has it.
* :func:`load_mentions` — ``train.tsv`` / ``val.tsv`` (or any file in that format): a mention and
  its ``##``-joined standard names.
* :func:`carve_validation` — a fixed-seed validation split of the training mentions, the only
  split anything is tuned on (the visible ``val.tsv`` is the evaluation split).
* :func:`load_keywords` — ``keywords/body.txt`` (procedure sites) and ``keywords/ot.txt``
  (procedure types).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from medrank.data.procedures import load_procedure_kb

DATASET = "chip2019-procedures"
SEPARATOR = "##"
#: the seed of the train-side validation split (never change: tuned numbers depend on it)
VALID_SEED = 13
VALID_FRACTION = 0.1


@dataclass(frozen=True)
class Mention:
    """One procedure mention and its gold standard names (1 to 7 of them)."""

    id: str
    text: str
    terms: tuple[str, ...]

    @property
    def count_class(self) -> int:
        """The implication-count class of the count head: 0 = one term, 1 = two, 2 = three or more."""
        return min(len(self.terms), 3) - 1


@dataclass
class TermBase:
    """The candidate set: one entry per distinct standard name, with its codes."""

    names: list[str]
    codes: list[tuple[str, ...]]
    row: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.codes):
            raise ValueError(f"{len(self.names)} names but {len(self.codes)} code lists")
        self.row = {n: i for i, n in enumerate(self.names)}
        if len(self.row) != len(self.names):
            raise ValueError("TermBase names must be distinct")

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        try:
            return self.row[name]
        except KeyError:
            raise KeyError(f"standard name not in the knowledge base: {name!r}") from None



__all__ = ["Keywords", "Mention", "TermBase", "carve_validation", "load_keywords", "load_mentions", "load_procedure_kb",
           "load_term_base", "read_mentions"]


def dataset_root(root: str | Path | None = None) -> Path:
    from medrank.config import dataset_dir

    return dataset_dir(DATASET, root)


def load_term_base(root: str | Path | None = None) -> TermBase:
    """The distinct standard names of ``kb.tsv`` with their codes (the core loader :func:`load_procedure_kb`)."""
    concepts = load_procedure_kb(root)
    return TermBase([c.name for c in concepts], [tuple(c.meta["codes"]) for c in concepts])


def read_mentions(path: str | Path, prefix: str | None = None) -> list[Mention]:
    """A file in the ``train.tsv`` format: header ``原始词<TAB>标准词``, then ``mention<TAB>name##name``.

    The header is optional (``multi_hop.txt`` has none); rows are ids ``<prefix>-<row>``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    prefix = prefix or path.stem
    out: list[Mention] = []
    with open(path, encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if not row or not "".join(row).strip():
                continue
            if n == 1 and row[0].strip() == "原始词":
                continue
            if len(row) != 2:
                raise ValueError(f"{path}:{n}: expected 'mention<TAB>standard names', got {len(row)} columns")
            terms = tuple(dict.fromkeys(t.strip() for t in row[1].split(SEPARATOR) if t.strip()))
            if not row[0].strip() or not terms:
                raise ValueError(f"{path}:{n}: empty mention or standard name")
            out.append(Mention(f"{prefix}-{len(out)}", row[0].strip(), terms))
    return out


def load_mentions(split: str, root: str | Path | None = None) -> list[Mention]:
    """``split``: ``train`` / ``val`` (the visible files), or ``train-fit`` / ``train-valid`` (the carved split)."""
    if split in ("train", "val"):
        return read_mentions(dataset_root(root) / f"{split}.tsv", prefix=split)
    if split in ("train-fit", "train-valid"):
        fit, valid = carve_validation(load_mentions("train", root))
        return fit if split == "train-fit" else valid
    raise ValueError(f"unknown split {split!r}; use train, val, train-fit or train-valid")


def carve_validation(
    mentions: Sequence[Mention], fraction: float = VALID_FRACTION, seed: int = VALID_SEED
) -> tuple[list[Mention], list[Mention]]:
    """Fixed-seed (fit, valid) split of the training mentions; duplicate mention texts stay on one side."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    texts = sorted({m.text for m in mentions})
    rng = np.random.default_rng(seed)
    chosen = set(rng.choice(len(texts), int(round(fraction * len(texts))), replace=False).tolist())
    valid_texts = {t for i, t in enumerate(texts) if i in chosen}
    fit = [m for m in mentions if m.text not in valid_texts]
    valid = [m for m in mentions if m.text in valid_texts]
    return fit, valid


@dataclass(frozen=True)
class Keywords:
    """Procedure-site and procedure-type words (the KAR attention masks and keyword-replacing negatives)."""

    sites: tuple[str, ...]
    types: tuple[str, ...]


def load_keywords(root: str | Path | None = None) -> Keywords:
    folder = dataset_root(root) / "keywords"

    def words(name: str) -> tuple[str, ...]:
        path = folder / name
        if not path.exists():
            raise FileNotFoundError(f"{path} not found")
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            w = line.split("\t")[0].strip()
            if w:
                out.append(w)
        return tuple(dict.fromkeys(out))

    return Keywords(sites=words("body.txt"), types=words("ot.txt"))
