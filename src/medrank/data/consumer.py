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
  short upper-case acronym ("CRF", which reads as too many things), and hold no abbreviation that lower-cased is a
  common English word ("HIS deficiency": the index reads "his"),
* and that no other anchored page lends to a different term (a word two terms claim says neither).

NIH's plain-language pages also gloss a clinical word where they use it: "nausea (feeling sick to your stomach)",
"wheezing (a whistling sound when you breathe)", "vertigo (a spinning sensation)". :func:`gloss_wordings` reads those
from the pages' answers: the words before the parenthesis end with a wording of exactly one HPO term, and the gloss
is an explanation in everyday words, not another name (lower case: no acronym, no pronunciation guide such as
"ah-RITH-me-ahs"; two to eight words, one of them a function word such as "to", "a", "when", "of"; no word shared with
the term's wording; not a qualifier such as "especially at night"; not only other terms' words, as in "kyphoscoliosis
(kyphosis and scoliosis)"), written so at least three times, for one term.

The result is ``HPO id → words``; :func:`with_consumer_wordings` adds them to the terms' synonyms (recorded in
``meta["consumer"]`` so that checks can tell them from HPO's own). HPO's content is not altered: the words sit
beside it, in the index and the wording rules of the set decision.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _medquad_pages(root: PathLike | None = None, path: PathLike | None = None) -> Iterator[Any]:
    """The parsed root element of every MedQuAD XML file (``path``: a folder of them; default the data root's
    ``medquad``)."""
    import xml.etree.ElementTree as ET

    from medrank.config import dataset_dir
    from medrank.data.errors import DataFormatError
    from medrank.data.medquad import DATASET

    base = Path(path) if path is not None else dataset_dir(DATASET, root)
    files = sorted(base.rglob("*.xml"))
    if not files:
        raise FileNotFoundError(f"no MedQuAD XML files under {base}")
    for f in files:
        try:
            yield ET.parse(f).getroot()
        except ET.ParseError as exc:
            raise DataFormatError(f, None, f"not well-formed XML ({exc})") from exc


def _focus_annotation(doc: Any) -> FocusAnnotation | None:
    """A parsed page's focus annotation (None: a page without a focus or without annotations)."""
    from medrank.data.medquad import _child, _children, _text_of

    focus = _text_of(_child(doc, "Focus", "doctitle-focus"))
    annotations = _child(doc, "FocusAnnotations")
    if not focus or annotations is None:
        return None
    umls = _child(annotations, "UMLS")
    cuis = [_text_of(e) for e in _children(_child(umls, "CUIs"), "CUI")] if umls is not None else []
    synonyms = [_text_of(e) for e in _children(_child(annotations, "Synonyms"), "Synonym")]
    return FocusAnnotation(focus, tuple(s for s in synonyms if s), tuple(c for c in cuis if c))


def _answers(doc: Any) -> list[str]:
    return [e.text for e in doc.iter() if e.tag.lower() == "answer" and e.text]


def read_focus_annotations(root: PathLike | None = None, path: PathLike | None = None) -> list[FocusAnnotation]:
    """The focus annotations of every MedQuAD XML file (``path``: a folder of them; default the data root's
    ``medquad``), answered or not (the MedlinePlus A.D.A.M. pages keep their annotations, not their answers)."""
    return [a for a in map(_focus_annotation, _medquad_pages(root, path)) if a is not None]


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


#: an abbreviation inside a wording: two to six capitals ("HIS" in "HIS deficiency"), not a Roman numeral ("type II")
_ABBREVIATION = re.compile(r"\b(?![IVX]+\b)[A-Z]{2,6}\b")
#: wordfreq's Zipf scale: an abbreviation that lower-cased is a word at least this common in English ("his" 6.5)
#: reads as that word, as the index lower-cases it ("he's off his food" found Hyperhistidinemia by "HIS deficiency")
COMMON_WORD_ZIPF = 5.0


def _reads_as_common_word(text: str) -> bool:
    from wordfreq import zipf_frequency

    return not text.isupper() and any(zipf_frequency(a.lower(), "en") >= COMMON_WORD_ZIPF
                                      for a in _ABBREVIATION.findall(text))


def usable_wording(text: str) -> bool:
    """Whether a page's word may be a wording (see the module docstring)."""
    key = wording_key(text)
    return (bool(key) and not _NOT_A_WORDING.search(text) and len(key.split()) <= MAX_WORDS
            and not (text.isupper() and len(text) <= 6) and not _reads_as_common_word(text))


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


#: how the wordings are derived: part of the service's knowledge-base fingerprint, so that a knowledge base built with
#: an earlier derivation is built again (2: the glosses of :func:`gloss_wordings` added; 3: no abbreviation that reads
#: as a common word)
WORDINGS_VERSION = 3
#: "<a term's wording> (<gloss>)": a parenthesis of lower-case words, and up to five words just before it
_GLOSS = re.compile(r"\(([a-z][a-z '-]{4,80})\)")
_WORDS_BEFORE = re.compile(r"((?:[A-Za-z'-]+\s+){0,4}[A-Za-z'-]+)\s+$")
#: words an explanation is made with and a name is not
_FUNCTION_WORDS = frozenset(
    "a an the to of in on into your you when too that with or and from for by at which who is are be no than under "
    "over out up about can its their one more less much many little".split())
#: how a qualifier, not a gloss, opens ("especially at night", "in men", "due to pinched nerves", "also called …")
_QUALIFIER_START = frozenset(
    "especially in on from due if with without for both beginning formerly including such also called see or which "
    "not after before during mainly mostly usually often sometimes rarely typically".split())
MIN_GLOSS_WORDS, MAX_GLOSS_WORDS = 2, 8
#: how many times a gloss must be written for the same term (twice let anatomy through: "palate (roof of the mouth)")
MIN_GLOSS_COUNT = 3


def read_answer_texts(root: PathLike | None = None, path: PathLike | None = None) -> list[str]:
    """The answer texts of every MedQuAD XML file (``path``: a folder of them; default the data root's ``medquad``)."""
    return [text for doc in _medquad_pages(root, path) for text in _answers(doc)]


def usable_gloss(gloss: str, wording: str) -> bool:
    """Whether ``gloss``, written in parentheses after ``wording``, explains it in everyday words (module docstring)."""
    words = re.findall(r"[a-z']+", gloss)
    return (MIN_GLOSS_WORDS <= len(words) <= MAX_GLOSS_WORDS and bool(set(words) & _FUNCTION_WORDS)
            and words[0] not in _QUALIFIER_START and not set(words) & set(wording_key(wording).split()))


def gloss_wordings(concepts: Sequence[Concept], answers: Iterable[str],
                   min_count: int = MIN_GLOSS_COUNT) -> dict[str, tuple[str, ...]]:
    """``HPO id → glosses`` read from ``answers`` for the terms ``concepts`` (see the module docstring)."""
    by_wording: dict[str, set[str]] = defaultdict(set)
    for c in concepts:
        for w in (c.name, *c.synonyms):
            by_wording[wording_key(w)].add(c.id)
    counts: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)  # gloss key → (term, gloss) → times
    for text in answers:
        for m in _GLOSS.finditer(text):
            gloss = " ".join(m.group(1).split())
            key = wording_key(gloss)
            if not key or key in by_wording or not usable_gloss(gloss, ""):
                continue  # already some term's wording, or no everyday explanation
            before = _WORDS_BEFORE.search(text, max(0, m.start() - 120), m.start())
            if before is None:
                continue
            words = before.group(1).split()
            # the longest run of the words before it that is one term's wording
            wording = next((w for w in (" ".join(words[i:]) for i in range(len(words)))
                            if len(by_wording.get(wording_key(w), ())) == 1), None)
            if wording is None or not usable_gloss(gloss, wording):
                continue
            content = [w for w in re.findall(r"[a-z']+", gloss) if w not in _FUNCTION_WORDS]
            if not all(wording_key(w) in by_wording for w in content):
                counts[key][(next(iter(by_wording[wording_key(wording)])), gloss)] += 1
    out: dict[str, list[str]] = defaultdict(list)
    for key in sorted(counts):
        terms = {t for t, _ in counts[key]}
        if len(terms) == 1 and sum(counts[key].values()) >= min_count:
            (term, gloss), _ = counts[key].most_common(1)[0]
            out[term].append(gloss)
    return {term: tuple(words) for term, words in sorted(out.items())}


def merge_wordings(*sources: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """``HPO id → words`` of every source, in order, each word once (case and punctuation aside)."""
    out: dict[str, list[str]] = defaultdict(list)
    seen: dict[str, set[str]] = defaultdict(set)
    for source in sources:
        for term, words in source.items():
            for w in words:
                if wording_key(w) not in seen[term]:
                    seen[term].add(wording_key(w))
                    out[term].append(w)
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
    the data root ``root`` (their focus annotations and their glosses); HPO alone, with a warning, when the data root
    holds no MedQuAD folder."""
    from medrank.config import DataNotFoundError
    from medrank.data.hpo import load_hpo

    concepts = list(concepts) if concepts is not None else load_hpo()
    pages: list[FocusAnnotation] = []
    answers: list[str] = []
    try:
        for doc in _medquad_pages(root):  # each page parsed once, for its annotation and its answers
            page = _focus_annotation(doc)
            if page is not None:
                pages.append(page)
            answers += _answers(doc)
    except (DataNotFoundError, FileNotFoundError) as exc:
        log.warning("no MedQuAD pages (%s): HPO terms without everyday wordings", exc)
        return concepts
    wordings = merge_wordings(consumer_wordings(concepts, pages, hpo_umls_terms()), gloss_wordings(concepts, answers))
    return with_consumer_wordings(concepts, wordings)
