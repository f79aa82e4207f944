"""An English trained symptom run (``index-hpo`` + ``sets-hpo.json``) serves the service's HPO knowledge base,
its set detector reads English complaints, and a run without that index leaves HPO zero-shot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medrank.records import Concept
from tests.conftest import make_tiny_bert

WORDS = ["fever", "cough", "headache", "nausea", "vomiting", "rash", "pain", "chest", "abdominal", "diarrhea",
         "dizziness", "fatigue"]


def _terms() -> list[Concept]:
    out = []
    for i, w in enumerate(WORDS):
        lay = (f"{w} {WORDS[(i + 1) % len(WORDS)]}",)
        out.append(Concept(f"HP:{i:07d}", w, lay, meta={"layperson": lay}))
    return out


@pytest.fixture
def english_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from medrank.encoders import TransformerEncoder, load_encoder
    from medrank.pipelines.symptom.synthetic import fit_layperson_sets
    from medrank.retrieval.concept import ConceptRetriever

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "runs" / "symptom" / "cpu" / "hpo-layperson-bi-hardnce"
    model, tok = make_tiny_bert(seed=2)
    TransformerEncoder(model, tok, pooling="mean", name="tiny").save(run / "model")
    encoder = load_encoder(str(run / "model"))
    pool = _terms()
    ConceptRetriever.build(pool, method="dense", encoder=encoder, language="en").save(run / "index-vocab")

    class Flat:
        def related(self, a: str, b: str) -> bool:
            return False

        def ancestors(self, a: str) -> frozenset[str]:
            return frozenset()

        def parents(self, a: str) -> frozenset[str]:
            return frozenset()

        def kin(self, a: str, b: str) -> bool:
            return self.related(a, b)

        def is_ancestor(self, a: str, b: str) -> bool:
            return False

    fit_layperson_sets(encoder, [c.id for c in pool], run, seed=1, n_complaints=80, concepts=pool, held_out=[],
                       hierarchy=Flat())
    (run / "detector.json").write_text(json.dumps({"name": "tiny", "candidates": {"vocab": "index-vocab", "hpo": "index-hpo"},
                                                   "beta": {"vocab": 0.5}, "alpha": 0.95, "k": 5}), encoding="utf-8")
    return run


def _settings(tmp_path: Path, **kw):
    from medrank.service.settings import ServiceSettings

    return ServiceSettings(data_root=tmp_path / "data", state_dir=tmp_path / "state", backend="torch",
                           models_dir=tmp_path / "runs", kbs=("hpo",), **kw)


def test_the_english_run_serves_hpo_with_its_own_set_decision(english_run: Path, tmp_path: Path) -> None:
    from medrank.service.build import Builder

    builder = Builder(_settings(tmp_path), show_progress=False)
    kb = builder.knowledge_base("hpo")
    assert kb.info.trained and kb.info.language == "en" and "hpo-layperson-bi-hardnce" in kb.info.model
    assert len(kb.concepts) == len(WORDS)
    detector = builder.set_detector(kb)
    assert detector is not None and detector.language == "en"
    found = detector.detect("fever and cough")
    # English clauses: two spans, never the Chinese reading of the whole text as one
    assert {tuple(t.span) for t in found.terms + found.alternatives} >= {(0, 5), (10, 15)}


def test_a_run_without_the_hpo_index_leaves_hpo_zero_shot(english_run: Path, tmp_path: Path) -> None:
    from medrank.service.build import Builder

    meta = json.loads((english_run / "detector.json").read_text(encoding="utf-8"))
    meta["candidates"].pop("hpo")
    (english_run / "detector.json").write_text(json.dumps(meta), encoding="utf-8")
    said: list[str] = []
    builder = Builder(_settings(tmp_path), show_progress=False)
    builder.say = said.append  # type: ignore[method-assign]
    assert builder.trained_symptom_kb("hpo") is None
    assert any("cannot serve it" in s for s in said)
