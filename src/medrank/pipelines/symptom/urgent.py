"""Urgent signs: the decided symptom terms that ask for emergency care, or crisis support, before any questionnaire.

A pre-consultation flow that detects "I don't want to live anymore" as Suicidal ideation and goes on to ask "Do
you smoke?" fails the patient. The terms of each vocabulary that are signs to act on now (chest pain, a face
drooping on one side, difficulty breathing, collapse, a fit, vomiting or coughing up blood, a swelling throat;
thoughts of suicide or self-harm) are listed in a signs file, grouped by sign, each with a label and one message per
kind (``emergency``, ``crisis``) and language:

- HPO terms by id, each with the terms below it in the is-a hierarchy (``hpo_except``: ids left out, with their own
  descendants still in: Exertional dyspnea is not flagged, Respiratory distress is);
- ICD-10-CM and ICD-10 Beijing (CHIP-CDN) terms by code prefix ("R07.1" holds R07.101);
- the DXY list's symptoms by name;
- ``words``: patterns (regular expressions, per language) that raise the sign from the patient's own words where the
  detector decides no such term. The vocabularies hold no overdose, and the zero-shot Chinese detector reads 吐血 as
  呕吐 and 咳血 as 咳嗽 (the blood is lost); a notice must not wait on those readings. A pattern preceded closely by a
  negation (没有吐血, "never coughed up blood") raises nothing.

Words said of a resolved past ("I fainted once at a concert years ago", 小时候抽过一次) raise nothing either, and a
service leaves out a decided term whose words are (:func:`said_of_the_past`): the notice is for what happens now.

The file shipped with the package (:data:`DEFAULT_SIGNS`) was written from public emergency guidance, not reviewed
by a clinician; it says so (``"reviewed": false``) and a deployment passes its own reviewed, localised copy
(:meth:`UrgentSigns.load`). Of the terms, only decided ones are read: a sign among the alternatives raises nothing
until the patient ticks it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrank.pipelines.symptom.sets import HpoHierarchy, code_key

DEFAULT_SIGNS = Path(__file__).with_name("urgent_signs.json")
FORMAT = "medrank-urgent-signs"
KINDS = ("crisis", "emergency")  # the order notices are listed in
LANGUAGES = ("en", "zh")
#: the code system of each service vocabulary's terms
CODE_SYSTEMS = {"hpo": "hpo", "icd10cm": "icd10cm", "chip-cdn": "icd10_beijing", "dxy": "dxy"}
_LISTS = ("hpo", "hpo_except", "icd10cm", "icd10_beijing", "dxy")


@dataclass(frozen=True)
class UrgentSign:
    """One sign to act on now: its terms in each code system and how a person reads it (``label`` per language)."""

    key: str
    kind: str
    label: Mapping[str, str]
    hpo: frozenset[str] = frozenset()
    hpo_except: frozenset[str] = frozenset()
    icd10cm: tuple[str, ...] = ()
    icd10_beijing: tuple[str, ...] = ()
    dxy: frozenset[str] = frozenset()
    #: language → patterns of the patient's words that raise this sign by themselves
    words: Mapping[str, tuple[re.Pattern[str], ...]] = field(default_factory=dict)

    def holds(self, system: str, term_id: str, codes: Iterable[str] = (),
              ancestors: Callable[[str], Iterable[str]] | None = None) -> bool:
        """Whether the term ``term_id`` (with its ``codes``) of code system ``system`` is this sign; an HPO term is
        when it or one of its ``ancestors`` is listed and the term itself is not excepted."""
        if system == "hpo":
            if term_id in self.hpo_except:
                return False
            return term_id in self.hpo or (ancestors is not None and not self.hpo.isdisjoint(ancestors(term_id)))
        if system in ("icd10cm", "icd10_beijing"):
            prefixes = self.icd10cm if system == "icd10cm" else self.icd10_beijing
            keys = [code_key(c) for c in (*codes, term_id) if c]
            return any(k.startswith(p) for k in keys for p in prefixes)
        if system == "dxy":
            return term_id in self.dxy
        return False


@dataclass(frozen=True)
class UrgentNotice:
    """What to tell the patient now: the ``kind`` of care, the signs read (labels) and the terms that raised it."""

    kind: str
    signs: tuple[str, ...]
    terms: tuple[str, ...]
    message: str
    source: str
    #: ``[start, end)`` of the words that raised it by themselves (:attr:`UrgentSign.words`), in the text read
    spans: tuple[tuple[int, int], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "signs": list(self.signs), "terms": list(self.terms), "message": self.message,
                "source": self.source, "spans": [list(x) for x in self.spans]}


@dataclass(frozen=True)
class UrgentSigns:
    """The signs of a signs file, with its messages (``messages[kind][language]``, ``{signs}`` standing for the
    labels read) and the page each kind's advice comes from (``sources``)."""

    signs: tuple[UrgentSign, ...]
    messages: Mapping[str, Mapping[str, str]]
    sources: Mapping[str, str] = field(default_factory=dict)
    reviewed: bool = False
    path: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str] = DEFAULT_SIGNS) -> UrgentSigns:
        """Read and check a signs file (JSON, the shape of :data:`DEFAULT_SIGNS`); raises ``ValueError`` naming the
        first problem."""
        from medrank.utils.io import read_json_file

        return cls.from_dict(read_json_file(path, "urgent signs file"), str(path))

    @classmethod
    def from_dict(cls, raw: Any, where: str = "signs") -> UrgentSigns:
        def fail(why: str) -> ValueError:
            return ValueError(f"{where}: {why}")

        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise fail(f"expected an object with \"format\": \"{FORMAT}\"")
        messages = raw.get("messages")
        if not isinstance(messages, dict):
            raise fail("\"messages\" must map each kind to its message per language")
        for kind in KINDS:
            for lang in LANGUAGES:
                text = messages.get(kind, {}).get(lang) if isinstance(messages.get(kind), dict) else None
                if not isinstance(text, str) or not text.strip():
                    raise fail(f"no {kind} message in {lang!r}")
        signs, seen = [], set()
        for i, s in enumerate(raw.get("signs") or []):
            if not isinstance(s, dict) or not isinstance(s.get("key"), str) or not s["key"]:
                raise fail(f"sign {i} has no key")
            if s["key"] in seen:
                raise fail(f"sign {s['key']!r} is listed twice")
            seen.add(s["key"])
            if s.get("kind") not in KINDS:
                raise fail(f"sign {s['key']!r}: kind must be one of {', '.join(KINDS)}")
            label = s.get("label")
            if not isinstance(label, dict) or any(not isinstance(label.get(lang), str) for lang in LANGUAGES):
                raise fail(f"sign {s['key']!r}: label must give a text per language ({', '.join(LANGUAGES)})")
            lists = {}
            for name in _LISTS:
                values = s.get(name, [])
                if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                    raise fail(f"sign {s['key']!r}: {name} must be a list of strings")
                lists[name] = values
            words = s.get("words", {})
            if not isinstance(words, dict) or any(lang not in LANGUAGES or not isinstance(v, list)
                                                  or not all(isinstance(p, str) and p for p in v)
                                                  for lang, v in words.items()):
                raise fail(f"sign {s['key']!r}: words must map a language ({', '.join(LANGUAGES)}) to a list of patterns")
            try:
                compiled = {lang: tuple(re.compile(p, re.I) for p in v) for lang, v in words.items()}
            except re.error as exc:
                raise fail(f"sign {s['key']!r}: a words pattern is not a regular expression ({exc})") from None
            signs.append(UrgentSign(
                s["key"], s["kind"], dict(label), frozenset(lists["hpo"]), frozenset(lists["hpo_except"]),
                tuple(code_key(c) for c in lists["icd10cm"]), tuple(code_key(c) for c in lists["icd10_beijing"]),
                frozenset(lists["dxy"]), compiled))
        if not signs:
            raise fail("no signs")
        sources = raw.get("sources") or {}
        return cls(tuple(signs), {k: dict(messages[k]) for k in KINDS},
                   {k: str(v) for k, v in sources.items()} if isinstance(sources, dict) else {},
                   bool(raw.get("reviewed", False)), where)

    def signs_of(self, system: str, term_id: str, codes: Iterable[str] = (),
                 ancestors: Callable[[str], Iterable[str]] | None = None) -> list[UrgentSign]:
        """The signs a term of code system ``system`` is."""
        codes = tuple(codes)
        return [s for s in self.signs if s.holds(system, term_id, codes, ancestors)]

    def words_in(self, text: str) -> list[tuple[UrgentSign, tuple[int, int]]]:
        """The signs whose :attr:`~UrgentSign.words` (of any language) occur in ``text``, with where; a match closely
        preceded by a negation is left out."""
        out = []
        for sign in self.signs:
            for patterns in sign.words.values():
                for pattern in patterns:
                    for m in pattern.finditer(text):
                        if not _negated(text, m.start()) and not said_of_the_past(text, *m.span()):
                            out.append((sign, m.span()))
        return out

    def notices(self, terms: Iterable[tuple[str, str, Iterable[str]]], language: str,
                ancestors: Callable[[str], Iterable[str]] | None = None,
                texts: Iterable[str] = (), read: Iterable[tuple[str, tuple[int, int]]] = ()) -> list[UrgentNotice]:
        """The notices for decided ``terms`` (``(code system, term id, codes)`` each) and for the signs' words in
        ``texts`` (the patient's), in ``language`` (``zh``, else English): at most one per kind, crisis first, each
        naming the signs read (in the file's order), the terms that raised them and, when one text was read, where
        the words that raised one by themselves are. ``read``: signs (by key) another reader raised in the one text,
        with where (:mod:`medrank.pipelines.symptom.crisis`). ``ancestors`` of an HPO term: default, the HPO is-a
        hierarchy (:func:`hpo_ancestors`)."""
        lang = "zh" if language == "zh" else "en"
        terms, texts = list(terms), list(texts)
        if ancestors is None and any(system == "hpo" for system, _, _ in terms):
            ancestors = hpo_ancestors()
        found: dict[str, dict[str, list[str]]] = {}  # kind → sign key → term ids
        spans: dict[str, list[tuple[int, int]]] = {}  # kind → words that raised a sign of it
        for system, term_id, codes in terms:
            for sign in self.signs_of(system, term_id, codes, ancestors):
                ids = found.setdefault(sign.kind, {}).setdefault(sign.key, [])
                if term_id not in ids:
                    ids.append(term_id)
        for text in texts:
            for sign, span in self.words_in(text):
                found.setdefault(sign.kind, {}).setdefault(sign.key, [])
                if len(texts) == 1 and span not in spans.setdefault(sign.kind, []):
                    spans[sign.kind].append(span)
        keys = {s.key: s for s in self.signs}
        for key, span in read:
            if key not in keys:
                raise ValueError(f"no urgent sign {key!r} in {self.path or 'the signs'}")
            sign = keys[key]
            found.setdefault(sign.kind, {}).setdefault(sign.key, [])
            if tuple(span) not in spans.setdefault(sign.kind, []):
                spans[sign.kind].append(tuple(span))
        out = []
        for kind in KINDS:
            if kind not in found:
                continue
            signs = [s for s in self.signs if s.kind == kind and s.key in found[kind]]
            labels = tuple(s.label[lang] for s in signs)
            joined = "、".join(labels) if lang == "zh" else "; ".join(labels)
            if lang == "en":
                joined = joined[:1].upper() + joined[1:]
            message = self.messages[kind][lang].replace("{signs}", joined)
            terms_read = tuple(dict.fromkeys(t for s in signs for t in found[kind][s.key]))
            out.append(UrgentNotice(kind, labels, terms_read, message, self.sources.get(kind, ""),
                                    tuple(sorted(spans.get(kind, ())))))
        return out


#: a negation just before a sign's words: they deny it ("没有吐血", "I have never coughed up blood")
_NEGATED_ZH = re.compile(r"(?:没有|没|无|未|不|否认)\s*$")
_NEGATED_EN = re.compile(r"(?:\b(?:no|not|never|without|denies)\b|n't\b)(?:\W+\w+){0,2}\W*$", re.I)


def _negated(text: str, start: int) -> bool:
    before = text[max(0, start - 40):start]
    return bool(_NEGATED_ZH.search(before[-3:]) or _NEGATED_EN.search(re.split(r"[.,;!?，。；！？]", before)[-1]))


#: a resolved past: years ago, in childhood, a year named; a death of long ago ("my grandad died of a stroke")
_PAST = re.compile(
    r"\b(?:\d+|a\s+few|few|several|many|two|three|four|five|six|seven|eight|nine|ten|twenty)\s+years?\s+ago\b|\byears\s+ago\b"
    r"|\blast\s+year\b|\bas\s+a\s+(?:child|kid|teen(?:ager)?|baby|student)\b"
    r"|\bwhen\s+(?:i|he|she|they)\s+(?:was|were)\s+(?:young|little|small|a\s+(?:child|kid|teen(?:ager)?|baby|student)|\d+)\b"
    r"|\b(?:in|back\s+in|since)\s+(?:19|20)\d\d\b|\bdied\s+(?:of|from|after)\b|\bpassed\s+away\b|\bhistory\s+of\b"
    r"|\d+\s*年前|几年前|多年前|好几年|去年|前年|小时候|年轻(?:的)?时候|(?:19|20)\d\d\s*年|病史|死于|去世|过世", re.I)
#: … unless the same words say it is back now ("had chest pain years ago and again now")
_NOW = re.compile(r"\b(?:now|again|today|tonight|this\s+(?:morning|evening|afternoon)|right\s+now|currently|just\s+now)\b"
                  r"|现在|又|今天|刚才|刚刚|这会儿|目前", re.I)
_CLAUSE_END = re.compile(r"[.!?;。！？；，,\n]")


def said_of_the_past(text: str, start: int, end: int) -> bool:
    """Whether the words ``text[start:end]`` stand in a clause that puts them in a resolved past (:data:`_PAST`) and
    does not bring them back to now (:data:`_NOW`)."""
    a = max((m.end() for m in _CLAUSE_END.finditer(text, 0, start)), default=0)
    b = next((m.start() for m in _CLAUSE_END.finditer(text, end)), len(text))
    clause = text[a:b]
    return bool(_PAST.search(clause)) and not _NOW.search(clause)


_HIERARCHY: list[HpoHierarchy] = []


def hpo_ancestors() -> Callable[[str], frozenset[str]]:
    """The is-a ancestors of an HPO term, from the ontology read once (``hp.obo`` is parsed once per process, so a
    set detector's hierarchy and this one share that work)."""
    if not _HIERARCHY:
        _HIERARCHY.append(HpoHierarchy())
    return _HIERARCHY[0].ancestors
