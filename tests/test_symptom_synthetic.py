"""Synthetic English complaints and the set decision an English trained run serves (``index-hpo`` + ``sets-hpo.json``)."""

from __future__ import annotations

import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from medrank.encoders.base import Encoder
from medrank.pipelines.symptom.synthetic import compose_complaints, fit_layperson_sets
from medrank.records import Concept


class WordHashEncoder(Encoder):
    """Bag of words hashed into 64 dimensions: phrases sharing words are close, a phrase is closest to itself."""

    name = "word-hash"

    @property
    def dim(self) -> int:
        return 64

    def _encode(self, texts, kind, batch_size, show_progress):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[i, zlib.crc32(word.encode()) % 64] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


class PairHierarchy:
    def __init__(self, pairs: set[frozenset[str]]) -> None:
        self.pairs = pairs

    def related(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.pairs

    def ancestors(self, a: str) -> frozenset[str]:
        return frozenset()

    def parents(self, a: str) -> frozenset[str]:
        return frozenset()

    def kin(self, a: str, b: str) -> bool:
        return self.related(a, b)

    def is_ancestor(self, a: str, b: str) -> bool:
        return False


def NoHierarchy() -> PairHierarchy:  # noqa: N802 - reads as the class it stands for
    return PairHierarchy(set())


WORDS = ["nose", "throat", "knee", "head", "belly", "chest", "back", "ear", "eye", "skin", "foot", "hand",
         "tooth", "neck", "hip", "arm"]


def terms(n: int = 16) -> list[Concept]:
    """``HP:n`` named like a clinical term, with a layperson synonym sharing one word with it."""
    out = []
    for i, w in enumerate(WORDS[:n]):
        lay = (f"sore {w}", f"my {w} hurts") if i % 2 else (f"sore {w}",)
        out.append(Concept(f"HP:{i:07d}", f"{w.capitalize()} pain", lay, meta={"layperson": lay}))
    return out


def test_complaints_name_two_or_three_unrelated_terms_through_their_layperson_synonyms() -> None:
    pool = terms()
    related = {frozenset(("HP:0000000", "HP:0000001"))}
    texts, gold = compose_complaints(pool, PairHierarchy(related), random.Random(3), 40)
    assert len(texts) == len(gold) == 40
    by_id = {c.id: c for c in pool}
    for text, ids in zip(texts, gold, strict=True):
        assert len(ids) in (2, 3) and {"HP:0000000", "HP:0000001"} - ids
        for i in ids:
            assert any(s.lower() in text for s in by_id[i].meta["layperson"]), (text, i)
    # the same seed gives the same complaints
    assert compose_complaints(pool, PairHierarchy(related), random.Random(3), 40) == (texts, gold)


def test_one_term_complaints_name_one_term_and_leave_the_other_draws_alone() -> None:
    pool = terms()
    texts, gold = compose_complaints(pool, NoHierarchy(), random.Random(5), 30, one_term=True)
    by_id = {c.id: c for c in pool}
    assert all(len(ids) == 1 for ids in gold)
    for text, ids in zip(texts, gold, strict=True):
        (i,) = ids
        assert any(s.lower() in text for s in by_id[i].meta["layperson"]), (text, i)
    assert any(t in {s.lower() for c in pool for s in c.meta["layperson"]} for t in texts)  # the bare "{a}" form
    assert compose_complaints(pool, NoHierarchy(), random.Random(5), 30, one_term=True) == (texts, gold)


def test_an_acronym_keeps_its_capitals_and_a_phrase_starts_lower_case() -> None:
    pool = [Concept("HP:1", "A", ("ADHD",), meta={"layperson": ("ADHD",)}),
            Concept("HP:2", "B", ("Runny nose",), meta={"layperson": ("Runny nose",)}),
            Concept("HP:3", "C", ("Sore throat",), meta={"layperson": ("Sore throat",)})]
    texts, _ = compose_complaints(pool, NoHierarchy(), random.Random(0), 20)
    assert all("Runny" not in t and "Sore" not in t for t in texts)
    assert any("ADHD" in t for t in texts)
    with pytest.raises(ValueError, match="at least 3 terms"):
        compose_complaints(pool[:2], NoHierarchy(), random.Random(0), 1)


def test_the_served_index_holds_every_synonym_and_the_calibration_never_sees_held_out_terms(tmp_path: Path) -> None:
    from medrank.pipelines.symptom.sets import SetCalibration, SetDetector
    from medrank.retrieval.concept import ConceptRetriever

    pool = terms()
    held_out = pool[:2]
    info = fit_layperson_sets(WordHashEncoder(), [c.id for c in pool], tmp_path, seed=1, n_complaints=60,
                              concepts=pool, held_out=held_out, hierarchy=NoHierarchy())
    assert info["terms"] == len(pool) - 2 and info["terms_unseen_by_index"] == (len(pool) - 2) // 2
    served = ConceptRetriever.load(tmp_path / "index-hpo", encoder=WordHashEncoder())
    entries = sum(1 + len(c.synonyms) for c in served.concepts.values())
    assert entries == sum(1 + len(c.synonyms) for c in pool)  # held-out terms' synonyms included: it is what is served
    calibration = SetCalibration.load(tmp_path / "sets-hpo.json")
    detector = SetDetector.from_retriever(served, calibration=calibration, language="en", hierarchy=NoHierarchy())
    found = detector.detect("I have a sore knee and my nose hurts")
    assert {t.name for t in found.terms} >= {"Knee pain"}


def test_a_run_records_the_everyday_wordings_its_index_holds(tmp_path: Path) -> None:
    import json

    from medrank.data.consumer import with_consumer_wordings

    pool = with_consumer_wordings(terms(), {terms()[0].id: ("Sore kneecap",)})
    fit_layperson_sets(WordHashEncoder(), [c.id for c in pool], tmp_path, seed=1, n_complaints=30, concepts=pool,
                       held_out=[], hierarchy=NoHierarchy())
    written = json.loads((tmp_path / "hpo-wordings.json").read_text(encoding="utf-8"))
    assert written["terms"] == {pool[0].id: ["Sore kneecap"]} and written["wordings"] == 1
