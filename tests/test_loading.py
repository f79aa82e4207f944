"""``medrank.load``: one entry point that recognises every saved artefact folder."""

from __future__ import annotations

import json

import pytest
import torch

import medrank
from medrank import Concept
from medrank.index import BM25Index
from medrank.retrieval.concept import ConceptRetriever
from tests.test_history_models import DIALOGUE, QUESTIONS, tiny_global

CONCEPTS = [Concept("C1", "chest pain"), Concept("C2", "fever", synonyms=("pyrexia",)), Concept("C3", "cough")]


def test_concept_retriever_and_plain_index_round_trip(tmp_path):
    retriever = ConceptRetriever.build(CONCEPTS, method="bm25", language="en")
    retriever.save(tmp_path / "retriever")
    assert medrank.artefact_kind(tmp_path / "retriever") == "concept-retriever"
    again = medrank.load(tmp_path / "retriever")
    assert isinstance(again, ConceptRetriever)
    assert again.search("pyrexia", k=1)[0].ids == ("C2",)

    BM25Index(language="en").build(["a", "b"], ["chest pain", "fever"]).save(tmp_path / "bm25")
    assert medrank.artefact_kind(tmp_path / "bm25") == "index"
    assert medrank.load(tmp_path / "bm25").search(["fever"], k=1)[0].ids == ("b",)


def test_history_reranker_in_a_run_folder(tmp_path):
    model = tiny_global()
    model.save(tmp_path / "run" / "model")
    (tmp_path / "run" / "config.json").write_text("{}")
    assert medrank.artefact_kind(tmp_path / "run") == "history-reranker"
    again = medrank.load(tmp_path / "run")
    with torch.no_grad():
        assert again.score(DIALOGUE, QUESTIONS) == pytest.approx(model.score(DIALOGUE, QUESTIONS), abs=1e-6)
    with pytest.raises(TypeError, match="takes no options"):
        medrank.load(tmp_path / "run", candidates="vocab")


@pytest.mark.parametrize(
    ("files", "kind"),
    [
        ({"normalizer.json": "{}", "config.json": '{"task": "procedures-kar"}'}, "procedure-normalizer"),
        ({"detector.json": "{}"}, "symptom-detector"),
        ({"manifest.json": '{"format": "medrank-cdv-index"}'}, "cdv-index"),
        ({"model/cdv.json": "{}"}, "cdv-model"),
        ({"matcher/matcher.json": "{}"}, "question-matcher"),
        ({"history_bi_encoder.json": "{}"}, "history-reranker"),
    ],
)
def test_kind_is_read_from_the_files_each_pipeline_writes(tmp_path, files, kind):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert medrank.artefact_kind(tmp_path) == kind


def test_folders_that_hold_no_loadable_artefact_say_why(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        medrank.load(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        medrank.load(tmp_path / "file.txt")
    with pytest.raises(ValueError, match="no medrank artefact .*known kinds: procedure-normalizer"):
        medrank.load(tmp_path)
    mtcg = tmp_path / "mtcg"
    (mtcg / "model").mkdir(parents=True)
    (mtcg / "config.json").write_text(json.dumps({"task": "procedures-mtcg"}))
    with pytest.raises(ValueError, match="candidate generator only: train KAR"):
        medrank.load(mtcg)
    unfinished = tmp_path / "unfinished"
    (unfinished / "checkpoints").mkdir(parents=True)
    (unfinished / "config.json").write_text(json.dumps({"task": "symptom"}))
    with pytest.raises(ValueError, match="training has not finished"):
        medrank.load(unfinished)


def test_a_moved_symptom_run_keeps_its_own_trained_encoder(tmp_path, tiny_encoder):
    """The run's index records the absolute folder of the encoder it was built with; once the run is moved, its
    own ``model/`` serves the queries (never the packaged model its spec is named after)."""
    import shutil

    from medrank.pipelines.symptom.inference import SymptomDetector

    run = tmp_path / "written" / "run"
    tiny_encoder.save(run / "model")
    from medrank.encoders import load_encoder

    trained = load_encoder(str(run / "model"))
    trained.name = "minilm"  # a trained copy keeps the name of the packaged model it came from
    ConceptRetriever.build(CONCEPTS, method="dense", encoder=trained).save(run / "index-gold")
    (run / "detector.json").write_text(json.dumps({"candidates": {"gold": "index-gold"}, "beta": {}, "k": 5}))
    moved = tmp_path / "elsewhere" / "run"
    shutil.move(str(run), str(moved))
    detector = SymptomDetector.load(moved)
    assert detector.retriever.index.encoder.model_path == str(moved / "model")
    texts = ["chest pain", "fever"]
    assert (detector.retriever.index.encoder.encode(texts) == trained.encode(texts)).all()
    # the index read on its own inside the run finds the run's model/ too
    alone = ConceptRetriever.load(moved / "index-gold")
    assert alone.index.encoder.model_path == str(moved / "model")
    # an index copied out of its run: the recorded spec no longer resolves: an error, not the packaged weights
    shutil.copytree(moved / "index-gold", tmp_path / "copied" / "index-gold")
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        ConceptRetriever.load(tmp_path / "copied" / "index-gold")


def test_a_packaged_model_recorded_in_another_venv_is_found_again():
    from medrank.encoders.registry import _packaged_location, resolve_model_path

    here = resolve_model_path("minilm")
    elsewhere = "/old/venv/" + "/".join(here.split("/")[-2:])
    assert _packaged_location("minilm", elsewhere) and not _packaged_location("minilm", "/gone/runs/x/model")
