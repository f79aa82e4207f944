"""Everyday (consumer) wordings of HPO terms, from the focus annotations of MedQuAD's NIH pages.

HPO's own synonyms are clinical or careful lay English ("Abnormality of body height"); people write "the runs",
"bellyache", "swollen glands", "elevated temperature". MedQuAD (CC BY 4.0) annotates each page's focus entity
with UMLS concepts (CUIs) and synonyms, and MedlinePlus in particular lists the words people use ("Diarrhea":
Dysentery, The runs, The trots). HPO cross-references UMLS (``xref: UMLS:C0011991``), so a page and an HPO term
meet through a CUI. A join on CUIs alone is loose (a page about relapsing fever also lists Fever's CUI), so a page
lends its words to a term only when it is *anchored* there as well: its focus or one of its synonyms is already the
term's name or an HPO synonym of it, case and punctuation aside. Of the page's other words, a term takes those that

* no HPO term already uses (a word HPO gives another term stays that term's),
* are short (four words at most) and not a MedlinePlus article title ("Diarrhea - what to ask your doctor") or a
  short upper-case acronym ("CRF", which reads as too many things),
* and that no other anchored page lends to a different term (a word two terms claim says neither).

The result is ``HPO id → words``; :func:`with_consumer_wordings` adds them to the terms' synonyms (recorded in
``meta["consumer"]`` so that checks can tell them from HPO's own). HPO's content is not altered: the words sit
beside it, in the index and the wording rules of the set decision.
"""

from __future__ import annotations

import logging
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from medrank.data.hpo import wording_key
from medrank.records import Concept

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: a MedlinePlus article title ("Diarrhea - self-care"), a parenthesis, a question, a list, a number
_NOT_A_WORDING = re.compile(r" - |--|\?|:|\(|\)|;|/|\d")
MAX_WORDS = 4


@dataclass(frozen=True)
class FocusAnnotation:
    """One MedQuAD page's focus entity: its name, its synonyms and its UMLS CUIs."""

    focus: str
    synonyms: tuple[str, ...]
    cuis: tuple[str, ...]

    @property
    def words(self) -> tuple[str, ...]:
        return (self.focus, *self.synonyms)


def read_focus_annotations(root: PathLike | None = None, path: PathLike | None = None) -> list[FocusAnnotation]:
    """The focus annotations of every MedQuAD XML file (``path``: a folder of them; default the data root's
    ``medquad``), answered or not (the MedlinePlus A.D.A.M. pages keep their annotations, not their answers)."""
    import xml.etree.ElementTree as ET

    from medrank.config import dataset_dir
    from medrank.data.errors import DataFormatError
    from medrank.data.medquad import DATASET, _child, _children, _text_of

    base = Path(path) if path is not None else dataset_dir(DATASET, root)
    files = sorted(base.rglob("*.xml"))
    if not files:
        raise FileNotFoundError(f"no MedQuAD XML files under {base}")
    out = []
    for f in files:
        try:
            doc = ET.parse(f).getroot()
        except ET.ParseError as exc:
            raise DataFormatError(f, None, f"not well-formed XML ({exc})") from exc
        focus = _text_of(_child(doc, "Focus", "doctitle-focus"))
        annotations = _child(doc, "FocusAnnotations")
        if not focus or annotations is None:
            continue
        umls = _child(annotations, "UMLS")
        cuis = [_text_of(e) for e in _children(_child(umls, "CUIs"), "CUI")] if umls is not None else []
        synonyms = [_text_of(e) for e in _children(_child(annotations, "Synonyms"), "Synonym")]
        out.append(FocusAnnotation(focus, tuple(s for s in synonyms if s), tuple(c for c in cuis if c)))
    return out


def hpo_umls_terms(path: PathLike | None = None) -> dict[str, frozenset[str]]:
    """UMLS CUI → the HPO terms that cross-reference it (``xref: UMLS:…`` in ``hp.obo``)."""
    from medrank.data.hpo import _read_graph, hpo_obo_path

    graph = _read_graph(str(Path(path or hpo_obo_path()).resolve()))
    by_cui: dict[str, set[str]] = defaultdict(set)
    for term_id, data in graph.nodes(data=True):
        for xref in data.get("xref", ()):
            ref = str(xref).split()[0]
            if ref.startswith("UMLS:"):
                by_cui[ref[5:]].add(term_id)
    return {cui: frozenset(ids) for cui, ids in by_cui.items()}


def usable_wording(text: str) -> bool:
    """Whether a page's word may be a wording (see the module docstring)."""
    key = wording_key(text)
    return (bool(key) and not _NOT_A_WORDING.search(text) and len(key.split()) <= MAX_WORDS
            and not (text.isupper() and len(text) <= 6))


def consumer_wordings(concepts: Sequence[Concept], annotations: Iterable[FocusAnnotation],
                      umls_terms: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """``HPO id → words`` from the pages ``annotations`` for the terms ``concepts`` (see the module docstring):
    ``umls_terms`` maps a CUI to the HPO ids that cross-reference it."""
    own = {c.id: {wording_key(w) for w in (c.name, *c.synonyms)} for c in concepts}
    taken = {wording_key(w) for c in concepts for w in (c.name, *c.synonyms)}
    claims: dict[str, dict[str, str]] = defaultdict(dict)  # word key → {term: the word as first written}
    for page in annotations:
        keys = [wording_key(w) for w in page.words]
        for term in sorted({t for cui in page.cuis for t in umls_terms.get(cui, ()) if t in own}):
            if not any(k in own[term] for k in keys):
                continue  # the page shares a CUI with the term but none of its words: not anchored
            for word, key in zip(page.words, keys, strict=True):
                if key not in taken and usable_wording(word):
                    claims[key].setdefault(term, word)
    out: dict[str, list[str]] = defaultdict(list)
    for key in sorted(claims):
        if len(claims[key]) == 1:
            term, word = next(iter(claims[key].items()))
            out[term].append(word)
    return {term: tuple(words) for term, words in sorted(out.items())}


def with_consumer_wordings(concepts: Sequence[Concept], wordings: Mapping[str, Sequence[str]]) -> list[Concept]:
    """``concepts`` with ``wordings`` added to their synonyms and listed in ``meta["consumer"]``."""
    out = []
    for c in concepts:
        extra = tuple(w for w in wordings.get(c.id, ()) if w not in c.synonyms and w != c.name)
        out.append(Concept(c.id, c.name, c.synonyms + extra, c.alt_ids, {**c.meta, "consumer": extra}) if extra else c)
    return out


def hpo_with_consumer_wordings(root: PathLike | None = None, concepts: Sequence[Concept] | None = None) -> list[Concept]:
    """HPO's terms (default :func:`medrank.data.hpo.load_hpo`) with the everyday wordings of MedQuAD's pages under
    the data root ``root``; HPO alone, with a warning, when the data root holds no MedQuAD folder."""
    from medrank.config import DataNotFoundError
    from medrank.data.hpo import load_hpo

    concepts = list(concepts) if concepts is not None else load_hpo()
    try:
        pages = read_focus_annotations(root)
    except (DataNotFoundError, FileNotFoundError) as exc:
        log.warning("no MedQuAD pages (%s): HPO terms without everyday wordings", exc)
        return concepts
    return with_consumer_wordings(concepts, consumer_wordings(concepts, pages, hpo_umls_terms()))
