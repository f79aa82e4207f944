"""One index interface: ``build / add / search(queries, k) / save / load``.

An index holds *entries* (a text each) that belong to *items* (what a search
returns). Usually an entry is an item, but a concept with synonyms is one item
with several entries: a search scores every entry and an item takes the best
score of its entries (max-pooling over synonyms, as BioSyn and the Bi-HardNCE
deployment do). Rankings therefore never repeat an item.

Saved indexes are directories written atomically, with a ``manifest.json``
holding the index type and a format version; :func:`load_index` dispatches on
it and refuses versions it does not know.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.records import Query, Ranking, is_integer

FORMAT_VERSION = 1


class IndexFormatError(ValueError):
    """A saved index is missing, corrupt, or of an unknown type/version."""


def query_texts(queries: Sequence[str | Query] | str | Query) -> tuple[list[str], list[str]]:
    """Normalise queries to (ids, texts); plain strings get ids ``"0"``, ``"1"``, …"""
    if isinstance(queries, (str, Query)):
        queries = [queries]
    if isinstance(queries, (Mapping, bytes)) or not isinstance(queries, Sequence):
        raise TypeError(f"queries must be a str, a Query or a list of them, got {type(queries).__name__}")
    ids, texts = [], []
    for i, q in enumerate(queries):
        if isinstance(q, Query):
            ids.append(q.id)
            texts.append(q.text)
        elif isinstance(q, str):
            ids.append(str(i))
            texts.append(q)
        else:
            raise TypeError(f"queries[{i}] must be a str or Query, got {type(q).__name__}")
    return ids, texts


def check_k(k: Any, name: str = "k") -> int:
    """``k`` as an int: any integer type (numpy's too), but not a bool; ``name`` is used in the error."""
    if not is_integer(k) or k < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def validate_entries(ids: Sequence[str], texts: Sequence[str], item_ids: Sequence[str] | None) -> list[str]:
    for name, seq in (("ids", ids), ("texts", texts), ("item_ids", item_ids)):
        if seq is not None and (isinstance(seq, (str, bytes, Mapping)) or not isinstance(seq, Sequence)):
            # a single string would be indexed character by character
            raise TypeError(f"{name} must be a list of strings, got {type(seq).__name__}")
    if len(ids) != len(texts):
        raise ValueError(f"got {len(ids)} ids but {len(texts)} texts")
    if item_ids is not None and len(item_ids) != len(ids):
        raise ValueError(f"got {len(ids)} ids but {len(item_ids)} item_ids")
    for i, (eid, t) in enumerate(zip(ids, texts, strict=True)):
        if not isinstance(eid, str) or not eid:
            raise ValueError(f"entry {i}: id must be a non-empty string, got {eid!r}")
        if not isinstance(t, str):
            raise TypeError(f"entry {eid!r}: text must be a string, got {type(t).__name__}")
    return list(item_ids) if item_ids is not None else list(ids)


def top_items(
    entry_items: np.ndarray, entry_idx: np.ndarray, scores: np.ndarray, k: int
) -> tuple[list[str], list[float]]:
    """Collapse entry hits (sorted by descending score) to the first ``k`` distinct items."""
    seen: set[str] = set()
    ids: list[str] = []
    out: list[float] = []
    for e, s in zip(entry_idx, scores, strict=True):
        if e < 0:
            continue
        item = entry_items[e]
        if item in seen:
            continue
        seen.add(item)
        ids.append(str(item))
        out.append(float(s))
        if len(ids) == k:
            break
    return ids, out


class Index(ABC):
    """Base class of every medrank index."""

    kind: ClassVar[str]

    def __init__(self) -> None:
        self.entry_ids: list[str] = []
        self.entry_items: list[str] = []
        self.entry_texts: list[str] = []

    def __len__(self) -> int:
        return len(self.entry_ids)

    @property
    def n_items(self) -> int:
        return len(set(self.entry_items))

    def build(
        self, ids: Sequence[str], texts: Sequence[str], item_ids: Sequence[str] | None = None
    ) -> Index:
        """Index ``texts`` from scratch (replacing anything indexed before). Returns ``self``."""
        items = validate_entries(ids, texts, item_ids)
        if len(set(ids)) != len(ids):
            raise ValueError("entry ids must be unique")
        self.entry_ids, self.entry_texts, self.entry_items = list(ids), list(texts), items
        self._build()
        return self

    def add(self, ids: Sequence[str], texts: Sequence[str], item_ids: Sequence[str] | None = None) -> None:
        """Add entries to an existing index."""
        items = validate_entries(ids, texts, item_ids)
        clash = set(ids) & set(self.entry_ids)
        if clash or len(set(ids)) != len(ids):
            raise ValueError(f"entry ids already indexed or repeated: {sorted(clash)[:5]}")
        start = len(self.entry_ids)
        self.entry_ids.extend(ids)
        self.entry_texts.extend(texts)
        self.entry_items.extend(items)
        self._add(start)

    def search(self, queries: Sequence[str | Query] | str | Query, k: int = 10) -> list[Ranking]:
        """Top-``k`` items for each query, best first; a blank query gets an empty ranking (every index type)."""
        k = check_k(k)
        if not self.entry_ids:
            raise RuntimeError("the index is empty: call build() first")
        qids, texts = query_texts(queries)
        asked = [i for i, t in enumerate(texts) if t.strip()]
        found = iter(self._search([qids[i] for i in asked], [texts[i] for i in asked], k) if asked else [])
        blank = set(range(len(texts))) - set(asked)
        return [Ranking(qids[i], (), ()) if i in blank else next(found) for i in range(len(texts))]

    def score_items(self, query: str, item_ids: Sequence[str]) -> np.ndarray:
        """Scores of given items for one query (``-inf`` for items the index lacks)."""
        ranking = self.search(query, k=max(1, self.n_items))[0]
        lookup = dict(zip(ranking.ids, ranking.scores, strict=True))
        return np.array([lookup.get(i, -np.inf) for i in item_ids], dtype=np.float32)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to directory ``path`` atomically (temp dir + rename)."""
        from medrank.utils.io import atomic_dir

        with atomic_dir(path) as tmp:
            with open(tmp / "entries.jsonl", "w", encoding="utf-8") as fh:
                for eid, item, text in zip(self.entry_ids, self.entry_items, self.entry_texts, strict=True):
                    fh.write(json.dumps([eid, item, text], ensure_ascii=False) + "\n")
            self._save(tmp)
            manifest = {"type": self.kind, "format_version": FORMAT_VERSION, "config": self.config()}
            with open(tmp / "manifest.json", "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, ensure_ascii=False, indent=2)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> Index:
        """Load an index saved by :meth:`save` (see :func:`load_index`); ``SomeIndex.load`` insists on that type."""
        index = load_index(path, **kwargs)
        if cls is not Index and not isinstance(index, cls):
            raise IndexFormatError(f"{path} holds a {index.kind} index, not a {cls.kind} one (use load_index)")
        return index

    def _load_entries(self, path: Path) -> None:
        ids, items, texts = [], [], []
        with open(path / "entries.jsonl", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    eid, item, text = json.loads(line)
                except (ValueError, TypeError) as exc:
                    raise IndexFormatError(f"{path / 'entries.jsonl'}:{n}: corrupt entry ({exc})") from exc
                ids.append(eid)
                items.append(item)
                texts.append(text)
        self.entry_ids, self.entry_items, self.entry_texts = ids, items, texts

    # -- subclass hooks -------------------------------------------------------------------------
    @abstractmethod
    def _build(self) -> None: ...

    @abstractmethod
    def _add(self, start: int) -> None: ...

    @abstractmethod
    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]: ...

    @abstractmethod
    def _save(self, path: Path) -> None: ...

    @abstractmethod
    def config(self) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> Index: ...


REGISTRY: dict[str, type[Index]] = {}


def register(cls: type[Index]) -> type[Index]:
    REGISTRY[cls.kind] = cls
    return cls


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise IndexFormatError(f"{path} is not a medrank index (no manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise IndexFormatError(f"{manifest_path}: corrupt manifest ({exc})") from exc
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{path}: index format version {version!r} is not supported (this medrank reads {FORMAT_VERSION}); "
            "rebuild the index with `medrank index`"
        )
    if manifest.get("type") not in REGISTRY:
        raise IndexFormatError(f"{path}: unknown index type {manifest.get('type')!r}; known: {sorted(REGISTRY)}")
    return manifest


def load_index(path: str | os.PathLike[str], **kwargs: Any) -> Index:
    """Load any saved medrank index; ``kwargs`` (e.g. ``encoder=``) go to the index type."""
    manifest = read_manifest(path)
    cls = REGISTRY[manifest["type"]]
    try:
        index = cls._from_saved(Path(path), manifest["config"], **kwargs)
        index._load_entries(Path(path))
    except IndexFormatError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        inside = isinstance(exc, OSError) and exc.filename and Path(exc.filename).resolve().is_relative_to(Path(path).resolve())
        if isinstance(exc, OSError) and not inside:
            raise  # not a file of the index (e.g. its encoder's model folder): the error says which
        raise IndexFormatError(f"{path}: corrupt or incomplete {manifest['type']} index ({exc})") from exc
    return index
