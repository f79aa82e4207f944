"""PubTator format parser (NCBI disease corpus, BC5CDR).

Documents are separated by blank lines::

    PMID|t|title
    PMID|a|abstract
    PMID<TAB>start<TAB>end<TAB>mention<TAB>type<TAB>id(s)[<TAB>individual mentions]
    PMID<TAB>CID<TAB>chemical id<TAB>disease id

Offsets index the text ``title + " " + abstract``. The id column holds one id,
several ids joined with ``|`` (composite mention: any of them) or ``+`` (a
mention that needs several concepts), or ``-1`` (no concept). The optional
seventh column lists the individual mentions of a composite mention, joined
with ``|``.

Structural problems (a line that is neither a title, an abstract, an
annotation nor a relation; bad offsets; an annotation of another PMID)
raise :class:`~medrank.data.errors.DataFormatError` naming file and line.
An annotation whose offsets do not reproduce its mention string is *not* an
error: it is flagged (``offset_ok=False``), counted, and logged as a warning,
because the gold label is still usable.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from medrank.data.errors import DataFormatError

log = logging.getLogger(__name__)

_TEXT_LINE = re.compile(r"^([^|\t]+)\|([ta])\|(.*)$")
_ID_SPLIT = re.compile(r"[|+]")


def split_id_column(raw: str) -> tuple[str, ...]:
    """Split a PubTator id column on ``|`` and ``+``; strip, drop empties and ``-1``."""
    out: list[str] = []
    for part in _ID_SPLIT.split(raw):
        part = part.strip()
        if part and part != "-1" and part not in out:
            out.append(part)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PubTatorAnnotation:
    """One mention line. ``ids`` come from :func:`split_id_column`; ``raw_id`` is the column verbatim."""

    pmid: str
    start: int
    end: int
    mention: str
    type: str
    ids: tuple[str, ...]
    raw_id: str
    individual_mentions: tuple[str, ...] = ()
    line: int = 0
    offset_ok: bool = True


@dataclass(frozen=True, slots=True)
class PubTatorRelation:
    """One relation line, e.g. ``CID`` with ``ids = (chemical id, disease id)``."""

    pmid: str
    type: str
    ids: tuple[str, ...]
    line: int = 0


@dataclass(frozen=True, slots=True)
class PubTatorDocument:
    """A title, an abstract, their annotations and relations; ``line`` is the title's line."""

    pmid: str
    title: str
    abstract: str
    annotations: tuple[PubTatorAnnotation, ...]
    relations: tuple[PubTatorRelation, ...]
    line: int = 0

    @property
    def text(self) -> str:
        """The text offsets refer to: title, one space, abstract."""
        return f"{self.title} {self.abstract}"

    @property
    def offset_mismatches(self) -> tuple[PubTatorAnnotation, ...]:
        return tuple(a for a in self.annotations if not a.offset_ok)


def count_offset_mismatches(docs: Iterable[PubTatorDocument]) -> int:
    """Annotations whose ``text[start:end]`` differs from their mention string."""
    return sum(len(d.offset_mismatches) for d in docs)


class _Builder:
    def __init__(self, pmid: str, title: str, line: int) -> None:
        self.pmid = pmid
        self.title = title
        self.abstract: str | None = None
        self.line = line
        self.annotations: list[PubTatorAnnotation] = []
        self.relations: list[PubTatorRelation] = []

    def build(self, path: Path) -> PubTatorDocument:
        if self.abstract is None:
            raise DataFormatError(
                path, self.line, f"document {self.pmid}: title without an abstract line ('{self.pmid}|a|...')"
            )
        text = f"{self.title} {self.abstract}"
        anns = []
        for a in self.annotations:
            ok = a.end <= len(text) and text[a.start : a.end] == a.mention
            anns.append(a if ok else _replace_offset_ok(a, False))
        return PubTatorDocument(
            self.pmid, self.title, self.abstract, tuple(anns), tuple(self.relations), self.line
        )


def _replace_offset_ok(a: PubTatorAnnotation, ok: bool) -> PubTatorAnnotation:
    return PubTatorAnnotation(
        a.pmid, a.start, a.end, a.mention, a.type, a.ids, a.raw_id, a.individual_mentions, a.line, ok
    )


def parse_pubtator(path: str | os.PathLike[str]) -> list[PubTatorDocument]:
    """Parse a PubTator file into documents, in file order (duplicated PMIDs are kept as they are)."""
    path = Path(path)
    docs: list[PubTatorDocument] = []
    cur: _Builder | None = None
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if cur is not None:
                    docs.append(cur.build(path))
                    cur = None
                continue
            m = _TEXT_LINE.match(line)
            if m and "\t" not in m.group(1):
                pmid, kind, body = m.group(1).strip(), m.group(2), m.group(3)
                if kind == "t":
                    if cur is not None:  # tolerate a missing blank line between documents
                        docs.append(cur.build(path))
                    cur = _Builder(pmid, body, lineno)
                else:
                    if cur is None or cur.pmid != pmid:
                        raise DataFormatError(
                            path, lineno, f"abstract line for PMID {pmid} without its title line"
                        )
                    if cur.abstract is not None:
                        raise DataFormatError(path, lineno, f"second abstract line for PMID {pmid}")
                    if cur.annotations or cur.relations:
                        raise DataFormatError(
                            path, lineno, f"abstract line for PMID {pmid} after its annotations"
                        )
                    cur.abstract = body
                continue
            fields = line.split("\t")
            if len(fields) < 4:
                raise DataFormatError(
                    path,
                    lineno,
                    f"not a title, abstract, annotation or relation line ({len(fields)} tab-separated fields)",
                )
            pmid = fields[0].strip()
            if cur is None:
                raise DataFormatError(
                    path, lineno, f"annotation for PMID {pmid} outside a document (no title line before it)"
                )
            if pmid != cur.pmid:
                raise DataFormatError(path, lineno, f"annotation for PMID {pmid} inside document {cur.pmid}")
            if cur.abstract is None:
                raise DataFormatError(path, lineno, f"annotation before the abstract line of PMID {pmid}")
            if len(fields) == 4 and not fields[1].strip().lstrip("-").isdigit():
                # Relation: PMID, type, id, id
                rel_type = fields[1].strip()
                ids = tuple(f.strip() for f in fields[2:])
                if not rel_type or any(not i for i in ids):
                    raise DataFormatError(path, lineno, "relation line with an empty field")
                cur.relations.append(PubTatorRelation(pmid, rel_type, ids, lineno))
                continue
            if len(fields) not in (5, 6, 7):
                raise DataFormatError(
                    path,
                    lineno,
                    f"annotation line needs 5-7 tab-separated fields (pmid, start, end, mention, type[, ids[, mentions]]), got {len(fields)}",
                )
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                raise DataFormatError(
                    path, lineno, f"offsets must be integers, got {fields[1]!r} and {fields[2]!r}"
                ) from None
            if start < 0 or end <= start:
                raise DataFormatError(
                    path, lineno, f"bad offsets start={start} end={end} (need 0 <= start < end)"
                )
            mention, etype = fields[3], fields[4].strip()
            if not mention.strip():
                raise DataFormatError(path, lineno, "empty mention string")
            if not etype:
                raise DataFormatError(path, lineno, "empty entity type")
            raw_id = fields[5] if len(fields) >= 6 else ""
            individual = tuple(fields[6].split("|")) if len(fields) == 7 and fields[6] else ()
            cur.annotations.append(
                PubTatorAnnotation(
                    pmid, start, end, mention, etype, split_id_column(raw_id), raw_id, individual, lineno
                )
            )
    if cur is not None:
        docs.append(cur.build(path))
    n_bad = count_offset_mismatches(docs)
    if n_bad:
        first = next(a for d in docs for a in d.offset_mismatches)
        log.warning(  # the line number, never the mention: medical text is not logged
            "%s: %d annotation(s) whose offsets do not match the text (first at line %d)",
            path,
            n_bad,
            first.line,
        )
    return docs
