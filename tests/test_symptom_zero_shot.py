"""Zero-shot set detection over a named vocabulary (``zero_shot_set_detector``, ``medrank detect --model hpo``):
built once, cached, the shipped calibration, queries never cached. A tiny random encoder and a handful of HPO terms
stand in for MiniLM and HPO here; the real vocabularies are read in ``test_symptom_sets_real.py`` (slow)."""

from __future__ import annotations

import json

import pytest

from medrank.pipelines.symptom import inference
from medrank.pipelines.symptom.sets import shipped_calibration
from medrank.records import Concept

TERMS = [Concept("HP:0001945", "Fever", ("High temperature",)), Concept("HP:0033050", "Pharyngalgia", ("Sore throat",)),
         Concept("HP:0002315", "Headache", ("Head pain",)), Concept("HP:0012378", "Fatigue", ("Tiredness",)),
         Concept("HP:0012735", "Cough", ()), Concept("HP:0002027", "Abdominal pain", ("Stomach pain",))]


@pytest.fixture
def small_hpo(monkeypatch, tmp_path, tiny_encoder):
    """HPO stands for the six terms above, every encoder is the tiny one; the cache is the test's own."""
    import medrank.encoders

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(inference, "zero_shot_concepts", lambda vocabulary, data_root=None: list(TERMS))
    monkeypatch.setattr(medrank.encoders, "load_encoder", lambda name, **kwargs: tiny_encoder)
    return tmp_path / "cache"


def test_an_unknown_vocabulary_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: hpo, icd10cm, chip-cdn"):
        inference.zero_shot_set_detector("snomed")
    with pytest.raises(ValueError, match="known: hpo"):
        inference.zero_shot_concepts("snomed")


def test_the_index_is_built_once_then_loaded_with_the_shipped_calibration(small_hpo, monkeypatch) -> None:
    from medrank.retrieval.concept import ConceptRetriever

    detector = inference.zero_shot_set_detector("hpo", show_progress=False)
    assert detector.language == "en" and detector.name == "hpo"
    assert detector.calibration.to_json() == shipped_calibration("hpo", "hybrid").to_json()
    built = list((small_hpo / "zero-shot-sets").iterdir())
    assert len(built) == 1 and built[0].name.startswith("hpo-")

    def no_build(*args, **kwargs):
        raise AssertionError("the cached index was built again")

    monkeypatch.setattr(ConceptRetriever, "build", no_build)
    again = inference.zero_shot_set_detector("hpo", show_progress=False)
    found = again.detect("I have a sore throat and a fever")
    assert {t.id for t in found.terms + found.alternatives} <= {c.id for c in TERMS}
    # the entries' vectors are in the embedding cache; the complaint's are not (query text is never kept)
    cached = {p.name for p in (small_hpo / "embeddings").rglob("*.safetensors")}
    assert cached == {"passage.safetensors"}, cached


def test_another_vocabulary_gets_its_own_index(small_hpo) -> None:
    inference.zero_shot_set_detector("hpo", show_progress=False)
    inference.zero_shot_set_detector("icd10cm", show_progress=False)
    assert sorted(p.name.split("-")[0] for p in (small_hpo / "zero-shot-sets").iterdir()) == ["hpo", "icd10cm"]


def test_detect_cli_decides_over_a_zero_shot_vocabulary(small_hpo) -> None:
    from typer.testing import CliRunner

    from medrank.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["detect", "--model", "hpo", "--json", "I have a sore throat and a fever", "宝宝发烧"])
    assert res.exit_code == 1, res.output  # the Chinese complaint is reported, not read as English
    first, second = json.loads(res.stdout)
    assert set(first) == {"query", "terms", "alternatives"} and "reads as Chinese" in second["error"]
    res = runner.invoke(app, ["detect", "--model", "hpo", "--ranking", "I have a fever"])
    assert res.exit_code != 0 and "a zero-shot vocabulary with its shipped calibration" in res.output
