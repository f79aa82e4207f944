"""Procedure abbreviations written alone ("TURP", "PICC"): which mentions without a Han character are read.

The normalisers read Chinese procedure names, and a mention without a Han character is refused: an English sentence's
nearest Chinese name would be a confident wrong code. But records also write a procedure by its abbreviation alone,
and the training mentions hold such rows (TURP → 经尿道前列腺切除术（TURP）, PICC → 经外周静脉穿刺中心静脉置管术,
ＬＣ → 腹腔镜下胆囊切除术). The abbreviations read are the data's own, not a hand list: the Latin words of the
training mentions written without a Han character, and those the code list writes in brackets after a name
("经阴道无张力尿道悬吊术（TVT）", "内镜逆行胆管造影[ERC]"). A mention is read when each of its Latin words is one of
them and nothing else but digits, marks and spaces is written ("TURP", "IVUS+", "TURP（TURiS）").
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable

from medrank.text import has_han

__all__ = ["abbreviations_of_data", "latin_words", "procedure_abbreviations", "reads_as_abbreviation"]

_LATIN_WORD = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*")
_BRACKETED = re.compile(r"[(\[]\s*([A-Z][A-Z0-9\- ]*?)\s*[)\]]")
_LETTER = re.compile(r"[^\W\d_]")
#: an abbreviation has at least this many characters (a lone letter is a grade or a side, not a procedure)
MIN_CHARS = 2


def _folded(text: str) -> str:
    """Full-width forms as ASCII (ＬＣ → LC, （ → (), upper-cased."""
    return unicodedata.normalize("NFKC", text).upper()


def latin_words(text: str) -> list[str]:
    """The Latin words of ``text``, full-width forms folded and upper-cased (``"TURP（TURiS）"`` → TURP, TURIS)."""
    return _LATIN_WORD.findall(_folded(text))


def procedure_abbreviations(names: Iterable[str], mentions: Iterable[str] = ()) -> frozenset[str]:
    """The abbreviations of a procedure vocabulary: the Latin words the standard ``names`` write in brackets, and
    those of the training ``mentions`` written without a Han character."""
    found: set[str] = set()
    for name in names:
        for inside in _BRACKETED.findall(_folded(name)):
            found.update(latin_words(inside))
    for mention in mentions:
        if not has_han(mention):
            found.update(latin_words(mention))
    return frozenset(w for w in found if len(w) >= MIN_CHARS)


def reads_as_abbreviation(mention: str, abbreviations: frozenset[str]) -> bool:
    """Whether a mention without a Han character is read: it holds a Latin word, each one of ``abbreviations``, and no
    other letter (Greek, Cyrillic …)."""
    folded = _folded(mention)
    words = _LATIN_WORD.findall(folded)
    if not words or not all(w in abbreviations for w in words):
        return False
    return not _LETTER.search(_LATIN_WORD.sub(" ", folded))


def abbreviations_of_data(names: Iterable[str], root: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """:func:`procedure_abbreviations` of the standard ``names`` and of the CHIP 2019 training mentions under ``root``
    (the default data root); the names' alone when the training file is missing."""
    from medrank.data.procedures import load_procedure_mentions

    try:
        mentions = [q.text for q in load_procedure_mentions("train", root).queries]
    except (OSError, ValueError):
        mentions = []
    return procedure_abbreviations(names, mentions)
