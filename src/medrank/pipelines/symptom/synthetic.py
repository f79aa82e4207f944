"""Synthetic English multi-symptom complaints from HPO layperson synonyms, and the set decision fitted on them.

No labelled English complaint corpus exists offline, so English set detection is checked and calibrated on
complaints composed from 2–3 layperson synonyms of HPO terms ("I have a runny nose and a sore throat"), never
two terms on one is-a path. A composed complaint is a synthetic check, not patient text. Complaints of one
synonym ("I have a runny nose", ``one_term``) are a second check: a patient often names one symptom.

:func:`fit_layperson_sets` fits the set decision a trained English run serves (``RUN/sets-hpo.json`` over
``RUN/index-hpo``, every HPO name and synonym). A served complaint may use a phrase the index holds word for
word or one it has never seen, so the calibration complaints hold both: they are composed from the run's
validation terms (never trained on), and half of those terms have their layperson synonyms left out of the
index the calibration searches. A calibration fitted only on unseen phrases never sees an exact match and
gives one a low probability.

ICD-10-CM has no layperson phrases. :func:`layperson_terms_by_code` carries HPO's over: an HPO term whose name or a
synonym is, word for word, the description or a synonym of exactly one ICD-10-CM code ("Epistaxis" and R04.0
"Epistaxis"; ", unspecified" and "NEC" set aside) lends that code its layperson synonyms ("nose bleed"), so the
same composition checks and calibrates set detection over ICD-10-CM.
"""

from __future__ import annotations

import logging
import random
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.records import Concept

log = logging.getLogger(__name__)

TEMPLATES = (
    "I have {a} and {b}", "{a}, {b} and {c}", "my son has {a} with {b}", "I've had {a} for two days, also {b}",
    "{a} and {b}", "I have been having {a}, {b} and {c}", "she has {a} and {b}",
)
#: a complaint that names one symptom ("I feel sick")
ONE_TERM_TEMPLATES = ("I have {a}", "{a}", "my daughter has {a}", "I've had {a} for a week", "she has {a}")
#: complaints the served calibration is fitted on
CALIBRATION_COMPLAINTS = 600


def compose_complaints(terms: Sequence[Concept], hierarchy: Any, rng: random.Random, n: int,
                       one_term: bool = False) -> tuple[list[str], list[set[str]]]:
    """``n`` complaints, each 2–3 layperson synonyms (``meta["layperson"]``) of distinct ``terms`` in a template
    (``one_term``: one synonym, :data:`ONE_TERM_TEMPLATES`), and each one's gold term ids; a draw holding two terms
    related by is-a (``hierarchy.related``) is skipped."""
    if len(terms) < 3:
        raise ValueError(f"composing complaints needs at least 3 terms with layperson synonyms, got {len(terms)}")
    texts: list[str] = []
    gold: list[set[str]] = []
    while len(texts) < n:
        template = rng.choice(ONE_TERM_TEMPLATES if one_term else TEMPLATES)
        pick = rng.sample(list(terms), 1 if one_term else 3 if "{c}" in template else 2)
        ids = [c.id for c in pick]
        if hierarchy is not None and any(hierarchy.related(x, y) for i, x in enumerate(ids) for y in ids[i + 1:]):
            continue
        words = {}
        for key, c in zip("abc", pick, strict=False):
            synonym = rng.choice(c.meta["layperson"])
            # lower-case the first letter as in running text, but keep an acronym ("ADHD") as written
            words[key] = synonym if synonym[:2].isupper() else synonym[0].lower() + synonym[1:]
        texts.append(template.format(**words))
        gold.append(set(ids))
    return texts, gold


def fit_layperson_sets(encoder: Any, valid_term_ids: Sequence[str], run_dir: Path, seed: int = 13,
                       n_complaints: int = CALIBRATION_COMPLAINTS, concepts: Sequence[Concept] | None = None,
                       held_out: Sequence[Concept] | None = None, hierarchy: Any = None,
                       use_definitions: bool = False, reranker: Any = None, write_index: bool = True,
                       weights: Sequence[float] | None = None, depth: int = 100,
                       data_root: str | None = None) -> dict[str, Any]:
    """Write ``run_dir/index-hpo`` (every name and synonym of ``concepts``, default HPO's, dense, through ``encoder``)
    and fit its set decision (``run_dir/sets-hpo.json``) on complaints composed from ``valid_term_ids`` (see the
    module docstring); returns what was fitted. ``held_out`` (default: the check terms of
    :func:`medrank.data.hpo.layperson_split`) never reach the calibration, and their layperson synonyms never its
    index; ``hierarchy`` defaults to HPO's is-a; ``use_definitions`` indexes each term's definition too (both
    indexes, :func:`medrank.retrieval.concept.definition_entry`); ``reranker`` (a
    :class:`~medrank.pipelines.symptom.reranker.TermReranker`) re-ranks the calibration's search, so the decision is
    fitted on its scores; ``write_index=False`` leaves ``run_dir/index-hpo`` unwritten (a re-ranker's folder).
    ``encoder`` may be a list: the indexes then score by the ``weights``-mean of the encoders' cosines (each
    retrieving ``depth`` items first; :mod:`~medrank.pipelines.symptom.ensemble`). ``concepts`` default to HPO's with
    the everyday wordings of the MedQuAD pages under ``data_root`` (:mod:`medrank.data.consumer`), as the service's
    HPO knowledge base holds them."""
    from medrank.data.consumer import hpo_with_consumer_wordings
    from medrank.data.hpo import layperson_split, without_layperson_of
    from medrank.encoders import CachedEncoder
    from medrank.pipelines.symptom.sets import JOIN_MARGINS, HpoHierarchy, SetDetector
    from medrank.retrieval.concept import ConceptRetriever

    t0 = time.perf_counter()
    concepts = list(concepts) if concepts is not None else hpo_with_consumer_wordings(data_root)
    check = list(held_out) if held_out is not None else layperson_split(concepts)[0]
    check_ids = {c.id for c in check}
    by_id = {c.id: c for c in concepts}
    terms = [by_id[i] for i in dict.fromkeys(valid_term_ids) if i in by_id and i not in check_ids
             and by_id[i].meta.get("layperson")]
    rng = random.Random(seed)
    unseen = rng.sample(terms, len(terms) // 2)
    hierarchy = hierarchy if hierarchy is not None else HpoHierarchy()
    encoders = list(encoder) if isinstance(encoder, (list, tuple)) else [encoder]
    with tempfile.TemporaryDirectory(prefix="medrank-hpo-sets-") as tmp:
        # the calibration index is the served one less some synonyms: each entry is encoded once
        cached = [CachedEncoder(e, Path(tmp) / str(i)) for i, e in enumerate(encoders)]

        def dense(vocabulary: Sequence[Concept]) -> Any:
            parts = [ConceptRetriever.build(vocabulary, method="dense", encoder=e, language="en",
                                            use_definitions=use_definitions) for e in cached]
            return parts[0] if len(parts) == 1 else ConceptRetriever.mean_of(parts, weights, depth)

        if write_index:
            dense(concepts).save(run_dir / "index-hpo")
        calibration_index = dense(without_layperson_of(concepts, check + unseen))
        texts, gold = compose_complaints(terms, hierarchy, rng, n_complaints)
        detector = SetDetector.from_retriever(calibration_index, language="en", hierarchy=hierarchy, name="hpo",
                                              reranker=reranker)
        calibration = detector.fit(texts, gold, span_rule=True, join_margins=JOIN_MARGINS)
    calibration.save(run_dir / "sets-hpo.json")
    write_everyday_wordings(concepts, run_dir)
    info = {"file": "sets-hpo.json", "index": "index-hpo", "reranked": reranker is not None, "f1": calibration.info["fit_f1"],
            "definitions": use_definitions, "complaints": len(texts), "terms": len(terms), "terms_unseen_by_index": len(unseen),
            "seconds": round(time.perf_counter() - t0, 1)}
    log.info("English set decision fitted on %d synthetic complaints: F1 %.4f", len(texts), info["f1"])
    return info


#: the everyday wordings (not HPO's own) a run's HPO index and set decision were built over
EVERYDAY_WORDINGS_FILE = "hpo-wordings.json"


def write_everyday_wordings(concepts: Sequence[Concept], run_dir: Path) -> Path:
    """Write ``run_dir/hpo-wordings.json``: each term's everyday wordings (``meta["consumer"]``,
    :mod:`medrank.data.consumer`) in the vocabulary the run's HPO index and set decision were built over. It says what
    the index holds beside HPO, and a run without it predates them (``make models`` finishes such a run again)."""
    from medrank.utils.io import atomic_write_json

    terms = {c.id: list(c.meta["consumer"]) for c in concepts if c.meta.get("consumer")}
    path = run_dir / EVERYDAY_WORDINGS_FILE
    atomic_write_json(path, {"source": "MedQuAD focus annotations joined to HPO through UMLS (medrank.data.consumer)",
                             "terms": terms, "wordings": sum(map(len, terms.values()))})
    return path


_UNSPECIFIED = re.compile(r",?\s*\b(?:unspecified|not elsewhere classified|nec|nos)\b")


def _name_key(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", _UNSPECIFIED.sub("", name.lower())).split())


def layperson_terms_by_code(hpo: Sequence[Concept], codes: Sequence[Concept]) -> list[Concept]:
    """One concept per code of ``codes`` (e.g. ICD-10-CM's symptom codes) that an HPO term with layperson synonyms
    names exactly (see the module docstring), carrying the code's id and name and, in ``meta["layperson"]``, the
    layperson synonyms of every HPO term that names only that code (``meta["hpo"]``: those terms)."""
    by_key: dict[str, set[str]] = {}
    for c in codes:
        for name in (c.name, *c.synonyms):
            by_key.setdefault(_name_key(name), set()).add(c.id)
    names = {c.id: c for c in codes}
    phrases: dict[str, dict[str, None]] = {}  # ordered sets
    sources: dict[str, list[str]] = {}
    for term in hpo:
        if not term.meta.get("layperson"):
            continue
        matched = set().union(*(by_key.get(_name_key(n), set()) for n in (term.name, *term.synonyms)))
        if len(matched) != 1:  # none, or a name shared by several codes: no single right answer
            continue
        code = matched.pop()
        phrases.setdefault(code, {}).update(dict.fromkeys(term.meta["layperson"]))
        sources.setdefault(code, []).append(term.id)
    return [Concept(code, names[code].name, meta={"layperson": tuple(phrases[code]), "hpo": tuple(sources[code]),
                                                 "codes": (code,)}) for code in sorted(phrases)]
