"""History builders (parsing, question bank, first stage), training and CLI on tiny fixtures."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from medrank.pipelines.history.builders import build_mts_aci
from medrank.pipelines.history.builders.mts_aci import normalize_question, parse_transcript, questions_in
from medrank.pipelines.history.builders.question_bank import leader_clusters
from medrank.pipelines.history.data import read_bank, read_samples, render_dialogue
from tests.conftest import make_tiny_bert

MTS = [
    "Doctor: Hello. Do you have fever?\r\nPatient: Yes, fever and cough.\r\nDoctor: Okay. Any chest pain?\r\n"
    "Patient: No chest pain.\r\nDoctor: Any nausea or vomiting?\r\nPatient: Some nausea.",
    "Doctor: What brings you in?\r\nPatient: Headache and dizziness.\r\nDoctor: Any nausea or vomiting?\r\n"
    "Patient: no\r\nand some back pain\r\nDoctor: Do you have fever? Right?",
    "Doctor: How can I help?\r\nPatient: I have a rash.\r\nDoctor: Any itch? Any fatigue?\r\nPatient: Itch, yes.",
    "Doctor: Hi there.\r\nPatient: Cough for a week.\r\nDoctor: Do you have fever?\r\nPatient: No.\r\n"
    "Doctor: Any chest pain?\r\nPatient: Some.",
]
ACI = [
    "[doctor] hi , how are you ?\n[patient] i have abdominal pain .\n[doctor] any nausea or vomiting ?\n"
    "[patient] yes .\n[doctor] hey dragon , show me the labs ?\n[doctor] do you have fever ?\n[patient] no .",
    "[doctor] hello .\n[patient] my back pain is bad .\n[doctor] any chest pain ?\n[patient] no .",
]


def write_fixture(tmp_path):
    mts = tmp_path / "mts.csv"
    with open(mts, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["ID", "section_header", "section_text", "dialogue"])
        for i, d in enumerate(MTS):
            w.writerow([i, "GENHX", "note", d])
    aci = tmp_path / "aci.csv"
    with open(aci, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["dataset", "encounter_id", "dialogue", "note"])
        for i, d in enumerate(ACI):
            w.writerow(["aci", f"D2N{i:03d}", d, "note"])
    return mts, aci


@pytest.fixture
def tiny_st(tiny_encoder):
    return tiny_encoder


def test_parse_both_formats_and_continuation_lines():
    turns = parse_transcript(MTS[1])
    assert [t.speaker for t in turns] == ["doctor", "patient", "doctor", "patient", "doctor"]
    assert turns[3].text == "no and some back pain"
    aci = parse_transcript("[doctor] hi .\n[patient_guest] he is fine .\n[patient] ok .")
    assert [t.speaker for t in aci] == ["doctor", "family", "patient"]


def test_questions_are_normalised_and_backchannels_dropped():
    assert normalize_question("Okay, so do you SMOKE?") == "do you smoke?"
    assert questions_in("Okay. Any chest pain? Right? Is that correct? Hey dragon, show me labs?") == ["any chest pain?"]
    assert questions_in("Do you smoke? Do you smoke? What about alcohol?") == ["do you smoke?", "what about alcohol?"]


def test_leader_clustering_by_frequency_and_threshold():
    v = np.array([[1.0, 0.0], [0.95, np.sqrt(1 - 0.95**2)], [0.0, 1.0]], dtype=np.float32)
    # the most frequent text leads; the near duplicate (cos 0.95) joins it at 0.9 but not at 0.99
    assert leader_clusters(["a", "b", "c"], [1, 5, 2], v, 0.9) == [1, 1, 2]
    assert leader_clusters(["a", "b", "c"], [1, 5, 2], v, 0.99) == [0, 1, 2]
    with pytest.raises(ValueError):
        leader_clusters(["a"], [1], v[:1], 0.0)


def test_build_split_and_rebuild_independent_split(tmp_path, tiny_st):
    mts, aci = write_fixture(tmp_path)
    out = tmp_path / "built"
    meta = build_mts_aci(out, {"train": [mts, aci]}, valid_fraction=0.34, seed=1, k=5, threshold=0.999,
                         encoder=tiny_st, show_progress=False)
    assert meta["bank"]["size"] == len(read_bank(out / "bank.jsonl")) > 0
    assert meta["carved_from_train"]["dialogues"] == 2
    train = read_samples(out / "train.jsonl")
    valid = read_samples(out / "valid.jsonl") if (out / "valid.jsonl").exists() else []
    assert train
    assert not {s.dialogue_id for s in train} & {s.dialogue_id for s in valid}
    for s in train + valid:
        assert len(s.candidates) <= 5 and set(s.positives) & set(s.candidates)
        assert s.context and all(t.text for t in s.context)
        # questions asked earlier in the dialogue are never candidates again
        assert len(s.candidates) == len(set(s.candidates))
    # an independent file in the same raw format, built against the saved bank and first stage
    meta2 = build_mts_aci(tmp_path / "test-built", {"test": [mts]}, bank_dir=out, encoder=tiny_st, show_progress=False)
    assert meta2["bank"]["size"] == meta["bank"]["size"] and meta2["splits"]["test"]["questioning_turns"] > 0
    assert json.loads((tmp_path / "test-built" / "meta.json").read_text())["first_stage"] == meta["first_stage"]


def _tiny_base(tmp_path):
    model, tok = make_tiny_bert(seed=1)
    path = tmp_path / "tiny-bert"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("model_kind", ["global", "cross-encoder", "bi-encoder"])
def test_train_evaluate_and_rerank_end_to_end(tmp_path, tiny_st, model_kind):
    from typer.testing import CliRunner

    from medrank.cli import app
    from medrank.pipelines.history.evaluation import evaluate_history
    from medrank.pipelines.history.training import train_history

    mts, aci = write_fixture(tmp_path)
    built = tmp_path / "built"
    build_mts_aci(built, {"train": [mts, aci], "valid": [mts]}, valid_fraction=0.0, k=5, threshold=0.999,
                  encoder=tiny_st, show_progress=False)
    cfg = {"model": model_kind, "base": str(_tiny_base(tmp_path)), "data_dir": str(built), "max_dialogue_tokens": 16,
           "max_question_tokens": 8, "max_train_samples": 4, "max_eval_samples": 3, "eval_shuffles": 2,
           "batch_size": 2, "loss": "lambdaloss", "ce_negatives": 2, "bi_negatives": 2, "threads": 1}
    report = train_history(cfg, tmp_path / "run", resume=False)
    assert 0.0 <= report["valid"]["metrics"]["ndcg"] <= 1.0 and report["steps"] == 2
    assert (tmp_path / "run" / "model").is_dir() and (tmp_path / "run" / "eval_valid.json").exists()
    res = evaluate_history(None, "valid", tmp_path / "run", {"data_dir": str(built), "shuffles": 1})
    assert set(res["systems"]) == {"first stage", f"{model_kind}:run"}
    # the rerank command on a dialogue file and a candidate list
    sample = read_samples(built / "valid.jsonl")[0]
    (tmp_path / "d.txt").write_text(render_dialogue(sample.context))
    (tmp_path / "c.txt").write_text("any chest pain?\ndo you have fever?\nany itch?\n")
    out = CliRunner().invoke(app, ["rerank", "--model", str(tmp_path / "run"), "--dialogue", str(tmp_path / "d.txt"),
                                   "--candidates", str(tmp_path / "c.txt"), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert sorted(r["question"] for r in rows) == ["any chest pain?", "any itch?", "do you have fever?"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    # best first, with the scores the saved re-ranker gives these questions
    from medrank.pipelines.history.builders.mts_aci import parse_transcript
    from medrank.pipelines.history.evaluation import load_reranker

    questions = ["any chest pain?", "do you have fever?", "any itch?"]
    direct = load_reranker(tmp_path / "run")[1].score(render_dialogue(parse_transcript((tmp_path / "d.txt").read_text())), questions)
    expected = sorted(zip(questions, (float(x) for x in direct), strict=True), key=lambda x: -x[1])
    assert [r["question"] for r in rows] == [q for q, _ in expected]
    assert [r["score"] for r in rows] == [round(s, 4) for _, s in expected]
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    # every kind of re-ranker refuses an empty candidate with the same clear error

    with pytest.raises(ValueError, match="candidate question 1 must be a non-empty string"):
        load_reranker(tmp_path / "run")[1].score(render_dialogue(sample.context), ["any itch?", ""])


def test_training_resumes_exactly_and_keeps_the_best_epoch(tmp_path, tiny_st):
    import shutil

    import torch
    from safetensors.torch import load_file

    from medrank.pipelines.history.training import train_history

    mts, aci = write_fixture(tmp_path)
    built = tmp_path / "built"
    build_mts_aci(built, {"train": [mts, aci], "valid": [mts]}, valid_fraction=0.0, k=5, threshold=0.999,
                  encoder=tiny_st, show_progress=False)
    cfg = {"model": "bi-encoder", "base": str(_tiny_base(tmp_path)), "data_dir": str(built), "max_dialogue_tokens": 16,
           "max_question_tokens": 8, "max_train_samples": 4, "max_eval_samples": 3, "batch_size": 2,
           "bi_negatives": 2, "threads": 1, "lr": 1e-3, "eval_each_epoch": True}
    # the negatives are drawn from a generator that a resumed run continues, not replays
    cfg["epochs"] = 3
    full = train_history(cfg, tmp_path / "full", resume=False)
    a = load_file(str(tmp_path / "full" / "checkpoints" / "epoch-3" / "model.safetensors"))
    # as if killed during epoch 3: its checkpoint never landed
    shutil.rmtree(tmp_path / "full" / "checkpoints" / "epoch-3")
    train_history(cfg, tmp_path / "full", resume=True)
    b = load_file(str(tmp_path / "full" / "checkpoints" / "epoch-3" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the saved model and the report are the epoch the validation picked
    state = json.loads((tmp_path / "full" / "checkpoints" / "epoch-3" / "trainer_state.json").read_text())
    assert full["best_epoch"] == state["best_epoch"]
    best = {h["epoch"]: h["ndcg"] for h in state["history"]}[state["best_epoch"]]
    assert full["valid"]["metrics"]["ndcg"] == pytest.approx(best, abs=1e-6)


def _ddx_fixture(tmp_path):
    ev = {
        "E_1": {"name": "E_1", "code_question": "E_1", "question_en": "Do you have a fever?", "data_type": "B",
                "value_meaning": {}},
        "E_2": {"name": "E_2", "code_question": "E_2", "question_en": "Do you cough?", "data_type": "B",
                "value_meaning": {}},
        "E_3": {"name": "E_3", "code_question": "E_3", "question_en": "Do you feel pain?", "data_type": "B",
                "value_meaning": {}},
        "E_4": {"name": "E_4", "code_question": "E_3", "question_en": "Where is the pain?", "data_type": "M",
                "value_meaning": {"V_1": {"en": "chest"}, "V_2": {"en": "back"}}},
        "E_5": {"name": "E_5", "code_question": "E_5", "question_en": "Any rash?", "data_type": "B",
                "value_meaning": {}},
    }
    cond = {
        "Flu": {"condition_name": "Flu", "symptoms": {"E_1": {}, "E_2": {}, "E_3": {}, "E_4": {}}, "antecedents": {}},
        "Measles": {"condition_name": "Measles", "symptoms": {"E_1": {}, "E_5": {}}, "antecedents": {}},
    }
    (tmp_path / "release_evidences.json").write_text(json.dumps(ev))
    (tmp_path / "release_conditions.json").write_text(json.dumps(cond))
    rows = [
        ["30", "[]", "M", "Flu", str(["E_1", "E_2", "E_3", "E_4_@_V_1", "E_4_@_V_2"]), "E_1"],
        ["40", "[]", "F", "Measles", str(["E_1", "E_5"]), "E_5"],
        ["50", "[]", "F", "Flu", str(["E_2", "E_3", "E_4_@_V_2"]), "E_2"],
    ] * 2
    path = tmp_path / "patients.txt"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["age", "top5_diagnoses", "sex", "diagnosis", "features", "feature_id"])
        w.writerows(rows)
    return path


def test_ddxplus_builder_knowledge_base_first_stage(tmp_path):
    from medrank.pipelines.history.builders.ddxplus import DDXPlusKnowledgeBase, build_ddxplus, load_kb

    patients = _ddx_fixture(tmp_path)
    kb = DDXPlusKnowledgeBase(*load_kb(tmp_path))
    cands, _ = kb.candidates(["E_1"], k=30)
    # consistent with E_1: Flu and Measles; the follow-up E_4 waits for its main evidence E_3
    assert "E_1" not in cands and "E_4" not in cands and set(cands) == {"E_2", "E_3", "E_5"}
    assert "E_4" in kb.candidates(["E_2", "E_3"], k=30)[0]
    meta = build_ddxplus(tmp_path / "out", {"train": [patients]}, valid_fraction=0.34, seed=0, k=30)
    assert meta["splits"]["train"]["patients"] + meta["splits"]["valid"]["patients"] == 6
    train = read_samples(tmp_path / "out" / "train.jsonl")
    assert train
    for s in train:
        assert set(s.positives) <= set(s.candidates) and s.positives
        assert s.context[0].speaker == "doctor" and s.context[1].speaker == "patient"
    flu = [s for s in train if s.context[0].text == "Do you have a fever?"]
    assert flu and flu[0].context[1].text == "yes"


def test_system_names_mark_ablations_and_the_backbone():
    from medrank.pipelines.history.config import resolve_config
    from medrank.pipelines.history.training import system_name

    assert system_name(resolve_config({"loss": "neural_ndcg"})) == "global re-ranker (neural_ndcg)"
    assert system_name(resolve_config({"loss": "listnet", "base": "e5-small", "type_embeddings": False})) == (
        "global re-ranker (listnet, no type emb., e5-small)")
    assert system_name(resolve_config({"model": "cross-encoder", "base": "e5-small"})) == "cross-encoder (e5-small)"
    assert system_name(resolve_config({"model": "bi-encoder"})) == "bi-encoder"
    assert system_name(resolve_config({"loss": "bce", "train_split": "train-d200"})) == (
        "global re-ranker (bce, trained on train-d200)")


def test_evaluate_scorer_maps_shuffled_scores_back_to_their_candidates():
    """An order-independent scorer (score = question length) gives the same, hand-computed metrics
    for any number of shuffled candidate orders."""
    import math

    from medrank.pipelines.history.data import Sample, Turn
    from medrank.pipelines.history.evaluation import evaluate_scorer

    texts = {f"c{n}": "x" * n for n in range(1, 7)}  # c1 .. c6, question length n
    turns = [Turn("doctor", "hello"), Turn("patient", "fever")]
    samples = [
        Sample("a", "a", "toy", turns, [], ["c4"], ["c1", "c2", "c3", "c4", "c5", "c6"]),  # c4 at rank 3
        Sample("b", "b", "toy", turns, [], ["c6", "c1"], ["c3", "c1", "c6", "c2", "c5", "c4"]),  # ranks 1 and 6
    ]
    calls = []

    def score(dialogue, questions):
        calls.append(list(questions))
        return [float(len(q)) for q in questions]

    idcg_b = 1 + 1 / math.log2(3)
    expected = {
        "map": (1 / 3 + (1 + 2 / 6) / 2) / 2,
        "mrr": (1 / 3 + 1) / 2,
        "ndcg": (1 / math.log2(4) + (1 + 1 / math.log2(7)) / idcg_b) / 2,
        "ndcg@5": (1 / math.log2(4) + 1 / idcg_b) / 2,
    }
    one = evaluate_scorer(score, samples, texts, shuffles=1)
    assert one["metrics"] == pytest.approx(expected, abs=1e-4)
    three = evaluate_scorer(score, samples, texts, shuffles=3, seed=13)
    assert three["metrics"] == pytest.approx(expected, abs=1e-4)
    assert three["std_over_shuffles"] == pytest.approx({m: 0.0 for m in expected}, abs=1e-9)
    # the scorer did see shuffled orders
    assert len(calls) == 2 + 6 and any(c != [texts[x] for x in samples[i % 2].candidates] for i, c in enumerate(calls[2:]))


def test_keep_first_layers_matches_a_model_built_with_that_many_layers():
    import torch
    from transformers import BertModel

    from medrank.utils.hf import keep_first_layers

    deep, _ = make_tiny_bert(seed=2, layers=3)
    shallow = BertModel(deep.config.__class__(**{**deep.config.to_dict(), "num_hidden_layers": 1})).eval()
    # a 1-block model takes every weight of the 3-block one except blocks 2 and 3
    shallow.load_state_dict({k: v for k, v in deep.state_dict().items()
                             if not k.startswith(("encoder.layer.1.", "encoder.layer.2."))}, strict=True)
    ids = torch.tensor([[2, 7, 9, 11, 3]])
    before = deep(input_ids=ids).last_hidden_state
    keep_first_layers(deep, 1)
    assert len(deep.encoder.layer) == 1 and deep.config.num_hidden_layers == 1
    after = deep(input_ids=ids).last_hidden_state
    assert torch.equal(after, shallow(input_ids=ids).last_hidden_state)
    assert not torch.allclose(after, before)
    with pytest.raises(ValueError, match="from 1 to the base model's 1 blocks"):
        keep_first_layers(deep, 2)


def test_a_global_reranker_with_fewer_layers_trains_saves_and_reloads_with_them(tmp_path, tiny_st):
    import torch
    from safetensors.torch import load_file

    from medrank.pipelines.history.config import resolve_config
    from medrank.pipelines.history.evaluation import load_reranker
    from medrank.pipelines.history.models import GlobalReranker
    from medrank.pipelines.history.training import train_history

    mts, aci = write_fixture(tmp_path)
    built = tmp_path / "built"
    build_mts_aci(built, {"train": [mts, aci], "valid": [mts]}, valid_fraction=0.0, k=5, threshold=0.999,
                  encoder=tiny_st, show_progress=False)
    model, tok = make_tiny_bert(seed=1, layers=3)
    base = tmp_path / "tiny-bert-3"
    model.save_pretrained(base)
    tok.save_pretrained(base)
    cfg = {"model": "global", "base": str(base), "layers": 1, "data_dir": str(built), "max_dialogue_tokens": 16,
           "max_question_tokens": 8, "max_train_samples": 4, "max_eval_samples": 3, "eval_shuffles": 1,
           "batch_size": 2, "threads": 1, "lr": 1e-3}
    report = train_history(cfg, tmp_path / "run", resume=False)
    assert report["steps"] == 2 and report["system"].endswith(", 1 layers)")
    # the trained weights hold one block, and so does the saved model when it is loaded again
    trained = load_file(str(tmp_path / "run" / "checkpoints" / "epoch-1" / "model.safetensors"))
    assert any(k.startswith("encoder.encoder.layer.0.") for k in trained)
    assert not any(k.startswith("encoder.encoder.layer.1.") for k in trained)
    assert json.loads((tmp_path / "run" / "model" / "config.json").read_text())["num_hidden_layers"] == 1
    reloaded = load_reranker(tmp_path / "run")[1]
    assert isinstance(reloaded, GlobalReranker) and len(reloaded.encoder.encoder.layer) == 1
    # ... with the scores of the trained weights: a fresh 1-block re-ranker given the checkpoint scores the same
    fresh = GlobalReranker.from_pretrained(str(base), reloaded.config, layers=1)
    fresh.load_state_dict(trained)
    sample = read_samples(built / "valid.jsonl")[0]
    questions = ["any chest pain?", "do you have fever?", "any itch?"]
    dialogue = render_dialogue(sample.context)
    assert torch.allclose(torch.tensor(reloaded.score(dialogue, questions)),
                          torch.tensor(fresh.score(dialogue, questions)), atol=1e-6)
    # the 3-block base scores differently: the checks above are about the 1-block weights
    full = GlobalReranker.from_pretrained(str(base), reloaded.config)
    full.load_state_dict(full.state_dict() | trained)
    assert not torch.allclose(torch.tensor(full.score(dialogue, questions)), torch.tensor(fresh.score(dialogue, questions)))
    for bad in (0, -1, True, "three"):
        with pytest.raises(ValueError, match="layers must be"):
            resolve_config({**cfg, "layers": bad})


def test_a_question_bank_on_the_first_stage_ranks_from_the_dialogue(tmp_path, tiny_st):
    from medrank.pipelines.history.builders import build_first_stage, load_first_stage
    from medrank.pipelines.history.question_bank import (
        NextQuestionRanker,
        QuestionBank,
        display_question,
        is_tagged_statement,
    )

    mts, aci = write_fixture(tmp_path)
    out = tmp_path / "first-stage"
    meta = build_first_stage(out, tiny_st, files=[mts, aci], valid_fraction=0.0, threshold=0.999)
    assert not (out / "train.jsonl").exists() and meta["memory"] > 0  # the bank and the memory, no split samples
    stage, _, _ = load_first_stage(out, encoder=tiny_st)
    assert meta["bank"]["size"] == len(stage.bank)
    stage.remember_tails = False
    bank = QuestionBank.from_first_stage("en", stage, "fixture")
    ranker = NextQuestionRanker({"en": bank}, {"en": tiny_st})
    dialogue = [{"speaker": "patient", "text": "I have a cough."}, {"speaker": "doctor", "text": "Okay. Do you have FEVER?"},
                {"speaker": "patient", "text": "No."}]
    remembered = len(stage._cache)
    out_rank = ranker.rank(dialogue, [], None, "en", k=20)
    texts = [r["text"] for r in out_rank["results"]]
    assert texts and len(texts) == len(set(texts)) == len(stage.bank) - 1  # every question but the one asked
    assert "Do you have fever?" not in texts  # asked in another casing: the bank's phrasing map finds it
    assert all(t == display_question(t.lower()) and t[0].isupper() for t in texts)
    assert {r["id"] for r in out_rank["results"]} <= set(bank.ids) and all(i.startswith("en-q") for i in bank.ids)
    assert "history first stage" in out_rank["retrieval"]
    assert len(stage._cache) == remembered  # a user's turns are not kept
    # the same dialogue twice: the same list (no state kept between calls)
    assert ranker.rank(dialogue, [], None, "en", k=20)["results"] == out_rank["results"]
    # statements with a confirmation tag are never proposed; a question left out that way is left out of every list
    assert bank.never_asked == {q.id for q in stage.bank if is_tagged_statement(q.text)}
    left_out = next(q for q in stage.bank if q.text != "do you have fever?")
    bank.never_asked = frozenset({left_out.id})
    texts = [r["text"] for r in ranker.rank(dialogue, [], None, "en", k=20)["results"]]
    assert display_question(left_out.text) not in texts and len(texts) == len(stage.bank) - 2


def test_a_statement_with_a_confirmation_tag_is_no_question_to_propose():
    from medrank.pipelines.history.question_bank import is_tagged_statement

    for statement in ("you're seventy eight years old correct?", "i'm gon na prescribe you some meloxicam okay?",
                      "call me if anything happens okay?", "doctor x referred you to us is that correct?",
                      "no drugs and stuff right?"):
        assert is_tagged_statement(statement), statement
    for question in ("are you doing okay?", "which side left or right?", "is that all right?", "any fever or chills?",
                     "does it hurt on the right?", "how are you feeling today?", "okay?"):
        assert not is_tagged_statement(question), question


def test_display_question_restores_the_capitals_normalising_took():
    from medrank.pipelines.history.question_bank import display_question

    assert display_question("do you have anything i should know about?") == "Do you have anything I should know about?"
    assert display_question("i'm sorry, is it itchy?") == "I'm sorry, is it itchy?"
    assert display_question("is it itchy in the nights?") == "Is it itchy in the nights?"


def test_the_services_english_bank_is_the_first_stage_built_once(tmp_path, monkeypatch):
    from medrank.encoders import TransformerEncoder
    from medrank.service.build import Builder
    from medrank.service.settings import ServiceSettings

    model, tok = make_tiny_bert()
    minilm = TransformerEncoder(model, tok, pooling="mean", name="minilm")  # tiny weights under MiniLM's name
    root = tmp_path / "data"
    (root / "mts-dialog" / "Main-Dataset").mkdir(parents=True)
    (root / "aci-bench" / "data" / "challenge_data").mkdir(parents=True)
    mts, aci = write_fixture(tmp_path)
    mts.rename(root / "mts-dialog" / "Main-Dataset" / "MTS-Dialog-TrainingSet.csv")
    aci.rename(root / "aci-bench" / "data" / "challenge_data" / "train.csv")

    def builder(state, data):
        b = Builder(ServiceSettings(api_token=None, state_dir=state, data_root=data), show_progress=False)
        monkeypatch.setattr(b, "encoder", lambda lang: minilm)
        monkeypatch.setattr(b, "build_encoder", lambda lang, track=True: minilm)
        return b

    b = builder(tmp_path / "state", root)
    bank = b._first_stage_bank()
    assert bank is not None and bank.first_stage is not None and "history first stage" in bank.retrieval
    assert bank.first_stage.remember_tails is False and bank.first_stage.encoder is minilm
    saved = tmp_path / "state" / "questions-en-first-stage" / "bank.jsonl"
    stamp = saved.stat().st_mtime_ns
    again = b._first_stage_bank()  # loaded from the state, not built again
    assert saved.stat().st_mtime_ns == stamp and again.ids == bank.ids
    # no dialogues under the data root: the plain bank serves instead (None here), and says why
    assert builder(tmp_path / "state-2", tmp_path / "nothing")._first_stage_bank() is None
    # another English encoder than the MiniLM the first stage's weights were chosen for: the plain bank
    other = builder(tmp_path / "state-3", root)
    monkeypatch.setattr(other, "encoder", lambda lang: TransformerEncoder(model, tok, pooling="mean", name="tiny"))
    assert other._first_stage_bank() is None


def test_a_question_that_takes_a_finding_as_said_waits_for_it():
    from medrank.index import BM25Index
    from medrank.pipelines.history.question_bank import (
        NextQuestionRanker,
        QuestionBank,
        mentions_pain,
        presupposed_findings,
        said,
    )

    assert presupposed_findings("What have you taken for the pain?") == {"pain"}
    assert presupposed_findings("Does the dizziness make you nauseous?") == {"dizziness"}
    assert presupposed_findings("How is your asthma?") == {"asthma"}
    assert presupposed_findings("From a scale of zero to ten how would you rate the worst pain?") == {"pain"}
    for q in ("Any pain?", "Do you have any chest pain?", "Any pain in the morning?", "Was the loss sudden?"):
        assert presupposed_findings(q) == frozenset(), q
    assert mentions_pain(["my knee hurts"]) and mentions_pain(["a headache"]) and mentions_pain(["Knee pain"])
    assert not mentions_pain(["my voice is hoarse", "Hoarse voice"])
    assert said("dizziness", ["I feel dizzy"]) and said("fever", ["I'm feverish"]) and said("pain", ["it hurts"])
    assert not said("asthma", ["I keep coughing"])

    texts = ["What have you taken for the pain?", "Any fever or chills?", "Does the dizziness make you nauseous?"]
    ids = [f"q{i}" for i in range(len(texts))]
    bank = QuestionBank("en", ids, texts, BM25Index(language="en").build(ids, texts), "bm25", "test")
    ranker = NextQuestionRanker({"en": bank}, {})

    def asked(dialogue, symptoms=()):
        return [r["text"] for r in ranker.rank(dialogue, list(symptoms), None, "en", k=5)["results"]]

    # (BM25 returns the questions sharing a word with the patient's: "what have you taken", "chills", "nauseous")
    hoarse = [{"speaker": "patient", "text": "my voice is hoarse, what have you taken for chills? I'm nauseous"}]
    assert asked(hoarse) == ["Any fever or chills?"]
    back = [{"speaker": "patient", "text": "my back hurts and I'm dizzy, what have you taken for chills? nauseous"}]
    assert set(asked(back)) == set(texts)
    assert "What have you taken for the pain?" in asked(hoarse, ["Back pain"])  # a confirmed pain counts



def test_a_question_about_a_third_person_waits_for_one():
    from medrank.index import BM25Index
    from medrank.pipelines.history.question_bank import NextQuestionRanker, QuestionBank, asks_of_another

    assert asks_of_another("What is his living status?", ["I keep forgetting things"])
    assert not asks_of_another("Did he have a fever?", ["my 5 year old has started wetting the bed"])
    assert not asks_of_another("Is she eating?", ["my daughter has a rash"])
    assert not asks_of_another("How is he doing?", ["Hello", "He is better"])  # the dialogue speaks of him
    assert not asks_of_another("Any fever?", ["I keep forgetting things"])

    texts = ["What is his living status?", "Do you forget things often?"]
    ids = ["q0", "q1"]
    bank = QuestionBank("en", ids, texts, BM25Index(language="en").build(ids, texts), "bm25", "test")
    ranker = NextQuestionRanker({"en": bank}, {})

    def asked(text):
        return [r["text"] for r in ranker.rank([{"speaker": "patient", "text": text}], [], None, "en", k=5)["results"]]

    # (BM25 finds both by "living", "status", "forget", "things")
    assert asked("I forget things, my living status") == ["Do you forget things often?"]
    assert set(asked("my father forgets things, his living status")) == set(texts)



def test_why_the_patient_came_is_not_asked_once_a_symptom_is_named():
    from medrank.index import BM25Index
    from medrank.pipelines.history.question_bank import (
        NextQuestionRanker,
        QuestionBank,
        asks_for_the_complaint,
    )

    for q in ("What brings you here today?", "what brought you in?", "What seems to be the problem?",
              "What is the reason for your visit?", "How can I help you today?", "Tell me what is going on with you?"):
        assert asks_for_the_complaint(q), q
    for q in ("What happened?", "What happened when you fell?", "Any fever or chills?", "What helps the pain?"):
        assert not asks_for_the_complaint(q), q

    texts = ["What brings you here today eyes?", "Any dry eyes or itching?"]
    bank = QuestionBank("en", ["q0", "q1"], texts, BM25Index(language="en").build(["q0", "q1"], texts), "bm25", "test")
    ranker = NextQuestionRanker({"en": bank}, {})

    def asked(dialogue, symptoms):
        return [r["text"] for r in ranker.rank(dialogue, symptoms, None, "en", k=5)["results"]]

    said = [{"speaker": "patient", "text": "my eyes are dry"}]
    assert set(asked(said, [])) == set(texts)  # nothing named yet: the patient may only have greeted
    assert asked(said, ["Dry eye syndrome"]) == ["Any dry eyes or itching?"]


def test_a_question_whether_something_is_still_so_waits_for_the_doctor():
    from medrank.index import BM25Index
    from medrank.pipelines.history.question_bank import NextQuestionRanker, QuestionBank, asks_after_the_known

    assert asks_after_the_known("Are you still taking that?", [])
    assert not asks_after_the_known("Are you still taking that?", ["What do you take for it?"])
    assert not asks_after_the_known("Are you taking anything for it?", [])

    texts = ["Are you still taking that?", "Are you taking anything for it?"]
    bank = QuestionBank("en", ["q0", "q1"], texts, BM25Index(language="en").build(["q0", "q1"], texts), "bm25", "test")
    ranker = NextQuestionRanker({"en": bank}, {})

    def asked(dialogue):
        return [r["text"] for r in ranker.rank(dialogue, [], None, "en", k=5)["results"]]

    opening = [{"speaker": "patient", "text": "I feel low, taking anything still"}]
    assert asked(opening) == ["Are you taking anything for it?"]
    later = [*opening, {"speaker": "doctor", "text": "What medicines do you take?"}, {"speaker": "patient", "text": "pills"}]
    assert set(asked(later)) == set(texts)
