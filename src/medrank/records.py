"""Typed records shared by every medrank pipeline.

Every loader turns a real dataset into these records, every index returns
:class:`Ranking` objects, and every metric consumes :class:`Qrels` plus a
``Run`` (``dict[query_id, Ranking]``). Keeping one vocabulary of records is what
lets the five pipelines share indexes, metrics and the CLI.

Records are small frozen dataclasses: cheap to build, hashable where it makes
sense, and validated on construction so a malformed dataset fails loudly at the
loader rather than deep inside a training loop.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


def require_text(value: object, what: str) -> str:
    """``value`` if it is a string with some non-space text, else a clear TypeError / ValueError naming ``what``."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    return value


def is_integer(value: object) -> bool:
    """True for any integer type (numpy's too) but not a bool: the check behind every ``k`` and count setting."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _tuple_of(value: object, kind: type, what: str) -> tuple[Any, ...]:
    """``value`` (any iterable but a bare string) as a tuple whose items are all ``kind``, else a TypeError."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        # a bare string would become one item per character
        raise TypeError(f"{what} must be a list of {kind.__name__}, got {type(value).__name__}")
    items = tuple(value)
    if not all(isinstance(v, kind) for v in items):
        raise TypeError(f"{what} must hold {kind.__name__} items only")
    return items


def require_texts(values: object, what: str) -> list[str]:
    """``values`` as a list of non-empty strings, or a clear error naming ``what`` and the position.

    A single string is refused: iterating it would treat every character as one text."""
    if isinstance(values, (str, bytes)) or isinstance(values, Mapping) or not isinstance(values, Iterable):
        raise TypeError(f"pass a list of {what}s, got {type(values).__name__}")
    return [require_text(v, f"{what} {i}") for i, v in enumerate(values)]


@dataclass(frozen=True, slots=True)
class Query:
    """A user query or a mention to normalise.

    ``meta`` carries dataset-specific context (document id, character offsets,
    mention class, language) that pipelines may use but metrics never do.
    """

    id: str
    text: str
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        require_text(self.id, "Query.id")
        require_text(self.text, f"Query.text (id={self.id!r})")


@dataclass(frozen=True, slots=True)
class Concept:
    """A vocabulary entry (a standard term): an id, a preferred name and synonyms.

    ``alt_ids`` are further identifiers of the same concept (MEDIC lists MeSH
    and OMIM ids on one line); gold labels that use any of them resolve to
    ``id``.
    """

    id: str
    name: str
    synonyms: tuple[str, ...] = ()
    alt_ids: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        require_text(self.id, "Concept.id")
        require_text(self.name, f"Concept.name (id={self.id!r})")
        for name in ("synonyms", "alt_ids"):
            object.__setattr__(self, name, _tuple_of(getattr(self, name), str, f"Concept.{name} (id={self.id!r})"))

    @property
    def names(self) -> tuple[str, ...]:
        """The preferred name followed by every distinct synonym."""
        seen = {self.name}
        out = [self.name]
        for s in self.synonyms:
            if s and s not in seen:
                seen.add(s)
                out.append(s)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrievable span of text, optionally part of a :class:`Document`.

    ``label`` is a passage-level class such as the aspect (question type) of a
    MedQuAD answer; ``position`` is its index inside the document.
    """

    id: str
    text: str
    doc_id: str | None = None
    position: int = 0
    label: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        require_text(self.id, "Passage.id")
        require_text(self.text, f"Passage.text (id={self.id!r})")


@dataclass(frozen=True, slots=True)
class Document:
    """A long document made of ordered passages (e.g. one MedQuAD XML file)."""

    id: str
    title: str
    passages: tuple[Passage, ...]
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        require_text(self.id, "Document.id")

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.passages)


@dataclass(frozen=True, slots=True)
class DialogueTurn:
    """One turn of a doctor-patient dialogue."""

    speaker: str
    text: str

    def __post_init__(self) -> None:
        require_text(self.speaker, "DialogueTurn.speaker")
        if not isinstance(self.text, str):
            raise TypeError("DialogueTurn.text must be a string")


@dataclass(frozen=True, slots=True)
class Dialogue:
    """An ordered sequence of turns with an id."""

    id: str
    turns: tuple[DialogueTurn, ...]
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        require_text(self.id, "Dialogue.id")
        object.__setattr__(self, "turns", _tuple_of(self.turns, DialogueTurn, f"Dialogue.turns (id={self.id!r})"))


class Qrels(Mapping[str, Mapping[str, int]]):
    """Relevance judgments: ``query_id -> {item_id: grade}``.

    Grades are integers; ``0`` means judged non-relevant and is kept (graded
    metrics such as nDCG ignore it, and it documents what was judged). A query
    may have several relevant items (multi-term answers).
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Mapping[str, int]] | None = None) -> None:
        self._data: dict[str, dict[str, int]] = {}
        for qid, items in (data or {}).items():
            for iid, grade in items.items():
                self.add(qid, iid, grade)

    def add(self, query_id: str, item_id: str, grade: int = 1) -> None:
        """Judge ``item_id`` for ``query_id`` with an integer ``grade`` (a later grade replaces an earlier one)."""
        if not isinstance(query_id, str) or not isinstance(item_id, str):
            raise TypeError(f"query and item ids must be strings, got {query_id!r} and {item_id!r}")
        if not isinstance(grade, int) or isinstance(grade, bool):
            raise TypeError(f"relevance grade for ({query_id!r}, {item_id!r}) must be an int, got {grade!r}")
        self._data.setdefault(query_id, {})[item_id] = grade

    def relevant(self, query_id: str) -> set[str]:
        """Items with grade > 0 for ``query_id``."""
        return {i for i, g in self._data.get(query_id, {}).items() if g > 0}

    def __getitem__(self, key: str) -> Mapping[str, int]:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {q: dict(v) for q, v in self._data.items()}

    def __repr__(self) -> str:
        return f"Qrels({len(self)} queries)"


@dataclass(frozen=True, slots=True)
class Ranking:
    """A ranked list for one query: item ids with descending scores.

    Ties keep the order they were produced in (index order), which is the
    tie-breaking rule every medrank metric follows.
    """

    query_id: str
    ids: tuple[str, ...]
    scores: tuple[float, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.query_id, str):
            raise TypeError(f"Ranking.query_id must be a string, got {self.query_id!r}")
        if len(self.ids) != len(self.scores):
            raise ValueError(
                f"Ranking for {self.query_id!r}: {len(self.ids)} ids but {len(self.scores)} scores"
            )
        if not all(isinstance(s, numbers.Real) and not isinstance(s, bool) for s in self.scores):
            raise TypeError(f"Ranking for {self.query_id!r}: scores must be numbers")

    @classmethod
    def from_pairs(cls, query_id: str, pairs: Iterable[tuple[str, float]]) -> Ranking:
        """A ranking from ``(item_id, score)`` pairs, kept in the order given."""
        pairs = list(pairs)
        return cls(query_id, tuple(p[0] for p in pairs), tuple(float(p[1]) for p in pairs))

    def top(self, k: int) -> Ranking:
        """The first ``k`` items (``k >= 0``)."""
        if not is_integer(k) or k < 0:
            raise ValueError(f"k must be a non-negative integer, got {k!r}")
        return Ranking(self.query_id, self.ids[:k], self.scores[:k])

    def __len__(self) -> int:
        return len(self.ids)


Run = dict[str, Ranking]
"""A run: the rankings of every query, keyed by query id."""


@dataclass(frozen=True, slots=True)
class ConceptDataset:
    """Mentions with gold concepts and the vocabulary they are normalised into.

    ``qrels`` maps each query id to the ids of its gold concepts (several for
    multi-term answers). ``unmapped`` counts gold labels that could not be
    resolved to a vocabulary entry (reported, never silently dropped).
    """

    name: str
    queries: tuple[Query, ...]
    qrels: Qrels
    vocabulary: tuple[Concept, ...]
    unmapped: int = 0

    def concept_by_id(self) -> dict[str, Concept]:
        return {c.id: c for c in self.vocabulary}
