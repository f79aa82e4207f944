"""ICD-10-CM as a concept vocabulary, from the CMS tabular data shipped in ``simple-icd-10-cm``.

Every category, subcategory and 7th-character extension (not chapters or
blocks) is one :class:`~medrank.records.Concept`: ``id`` = the code with its
dot (``R51.9``), ``name`` = its description, ``synonyms`` = its inclusion
terms, ``meta["codes"] = (code,)`` and ``meta["billable"]`` (a leaf code).

Licence: ICD-10-CM is published by CDC/NCHS and CMS and is in the public
domain; the ``simple-icd-10-cm`` package is MIT-licensed.
"""

from __future__ import annotations

import warnings

from medrank.records import Concept

#: ICD-10-CM categories outside chapter 18 that name a symptom a patient reports (pain of a body part, itch,
#: insomnia …); the rest of those chapters are diagnoses, and chapters 19-21 injuries, causes and administrative
#: encounters ("Immunization not carried out"), which no complaint should be answered with
SYMPTOM_CATEGORIES = ("G47.0", "H53.1", "H53.2", "H57.1", "H92", "H93.1", "K59.0", "L29", "M25.5", "M54", "M79.1", "M79.6",
                      "N94.6")


def is_symptom_code(code: str) -> bool:
    """True for ICD-10-CM codes of chapter 18 (R00-R99, symptoms and signs) and of :data:`SYMPTOM_CATEGORIES`."""
    return code.startswith("R") or code.startswith(SYMPTOM_CATEGORIES)


def _icd():  # noqa: ANN202 - module import kept lazy (it parses the XML at import time)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the package imports the deprecated pkg_resources
            import simple_icd_10_cm
    except ImportError as exc:  # pragma: no cover - dependency of the service
        raise FileNotFoundError("the ICD-10-CM knowledge base needs `simple-icd-10-cm` (pip install simple-icd-10-cm)") from exc
    return simple_icd_10_cm


def icd10cm_version() -> str:
    """The ICD-10-CM release the installed package ships (its package version names the release year)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"simple-icd-10-cm {version('simple-icd-10-cm')}"
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def load_icd10cm(billable_only: bool = False) -> list[Concept]:
    """ICD-10-CM codes below the block level as concepts (file order); ``billable_only`` keeps leaf codes."""
    icd = _icd()
    concepts = []
    for code in icd.get_all_codes(with_dots=True):
        if icd.is_chapter_or_block(code):
            continue
        leaf = bool(icd.is_leaf(code))
        if billable_only and not leaf:
            continue
        name = icd.get_description(code).strip()
        inclusion = [t.strip() for t in icd.get_inclusion_term(code) if t.strip() and t.strip() != name]
        concepts.append(Concept(code, name, tuple(dict.fromkeys(inclusion)), (), {"codes": (code,), "billable": leaf}))
    return concepts
