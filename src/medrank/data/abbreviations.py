"""Abbreviations defined in a document, and the expansion of a mention's abbreviation from them.

A biomedical abstract defines its abbreviations in place: "adenomatous polyposis coli (APC)".
Later mentions say "APC", which a dictionary cannot resolve without the definition. The finder
is the algorithm of Schwartz & Hearst ("A simple algorithm for identifying abbreviation
definitions in biomedical text", PSB 2003), the same pattern family as Ab3P (Sohn et al.,
Bioinformatics 2008) that BioSyn applies to NCBI-disease and BC5CDR: a short form in
parentheses after its long form, the long form ending right before the parenthesis and holding
the short form's letters in order, the first letter starting a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace

from medrank.records import ConceptDataset, Query

_PAREN = re.compile(r"\(([^()]{1,12})\)")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]*")


def _is_short_form(candidate: str) -> bool:
    words = candidate.split()
    return (
        2 <= len(candidate) <= 10
        and len(words) <= 2
        and candidate[0].isalnum()
        and any(ch.isalpha() for ch in candidate)
        and any(ch.isupper() for ch in candidate)
    )


def best_long_form(short: str, text: str) -> str | None:
    """The shortest end of ``text`` whose characters hold ``short``'s letters and digits in order,
    the first one starting a word (Schwartz & Hearst's ``findBestLongForm``); ``None`` if none does."""
    s, pos = len(short) - 1, len(text) - 1
    while s >= 0:
        ch = short[s].lower()
        if not ch.isalnum():
            s -= 1
            continue
        while pos >= 0 and (text[pos].lower() != ch or (s == 0 and pos > 0 and text[pos - 1].isalnum())):
            pos -= 1
        if pos < 0:
            return None
        pos -= 1
        s -= 1
    start = text.rfind(" ", 0, pos + 1) + 1
    long_form = text[start:].strip()
    return long_form or None


def find_abbreviations(text: str) -> dict[str, str]:
    """``{short form: long form}`` for every "long form (SF)" definition in ``text`` (first one wins)."""
    found: dict[str, str] = {}
    for m in _PAREN.finditer(text):
        short = m.group(1).strip()
        if not _is_short_form(short) or short in found:
            continue
        before = text[: m.start()].rstrip()
        # Schwartz & Hearst's window: at most min(|SF| + 5, 2 |SF|) words before the parenthesis
        window = min(len(short) + 5, 2 * len(short))
        words = before.split()[-window:]
        if not words:
            continue
        # a definition does not run across a sentence or clause boundary
        chunk = re.split(r"[.;:]\s", " ".join(words))[-1]
        long_form = best_long_form(short, chunk)
        if long_form is None or len(long_form) <= len(short) or short.lower() in long_form.lower().split():
            continue
        found[short] = long_form
    return found


def expand_mention(mention: str, abbreviations: Mapping[str, str]) -> str:
    """``mention`` with each token that is a defined short form replaced by its long form."""
    if not abbreviations:
        return mention
    if mention.strip() in abbreviations:
        return abbreviations[mention.strip()]

    def swap(m: re.Match[str]) -> str:
        if m.start() > 0 and mention[m.start() - 1] == "(":  # the definition itself: "... (G6PD) deficiency"
            return m.group(0)
        return abbreviations.get(m.group(0), m.group(0))

    return _TOKEN.sub(swap, mention)


def expand_dataset(dataset: ConceptDataset, documents: Iterable[tuple[str, str]]) -> ConceptDataset:
    """``dataset`` with each query's abbreviations expanded from its own document.

    ``documents``: ``(pmid, text)`` pairs; a query's document is ``query.meta["pmid"]``. An expanded
    query keeps its id and gold ids; its original text is kept in ``meta["unexpanded"]``.
    """
    by_doc = {pmid: find_abbreviations(text) for pmid, text in documents}
    queries = []
    for q in dataset.queries:
        abbreviations = by_doc.get(str(q.meta.get("pmid", "")), {})
        text = expand_mention(q.text, abbreviations)
        queries.append(q if text == q.text else Query(q.id, text, {**q.meta, "unexpanded": q.text}))
    return replace(dataset, queries=tuple(queries))
