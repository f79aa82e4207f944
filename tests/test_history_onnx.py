"""The global re-ranker on ONNX Runtime: agreement with torch, the export cache, the backend choice."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from medrank.pipelines.history.models import GlobalInputConfig, GlobalReranker
from tests.conftest import make_tiny_bert

DIALOGUE = "patient: fever cough\ndoctor: headache ?\npatient: pain chest back nausea vomiting rash itch fatigue"
QUESTIONS = ["fever cough", "chest pain", "rash itch fatigue", "nausea", "back pain dizziness", "asthma",
             "kidney liver stroke", "anemia", "diabetes hypertension heart attack"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tiny_global(seed: int = 3) -> GlobalReranker:
    model, tok = make_tiny_bert(seed=seed)
    torch.manual_seed(seed)
    reranker = GlobalReranker(model, tok, GlobalInputConfig(max_dialogue_tokens=12, max_question_tokens=4)).eval()
    torch.nn.init.normal_(reranker.head.weight, std=0.5)  # spread scores, so orders are meaningful
    return reranker


def test_onnx_scores_agree_with_torch_for_any_dialogue_and_candidate_count(cache: Path) -> None:
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    model = tiny_global()
    onnx_fp32 = OnnxGlobalReranker(model)
    # one export serves other lengths and candidate counts (dynamic axes), and an empty dialogue
    for dialogue, questions in ((DIALOGUE, QUESTIONS), ("fever", QUESTIONS[:2]), ("", QUESTIONS[3:]),
                                (DIALOGUE, QUESTIONS[::-1])):
        reference = np.array(model.score(dialogue, questions))
        got = np.array(onnx_fp32.score(dialogue, questions))
        assert got.shape == reference.shape
        np.testing.assert_allclose(got, reference, atol=1e-5)
    # permutation-equivariant like the torch model: shuffled candidates, shuffled scores
    forward, backward = onnx_fp32.score(DIALOGUE, QUESTIONS), onnx_fp32.score(DIALOGUE, QUESTIONS[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)
    int8 = OnnxGlobalReranker(model, quantized=True)
    assert int8.folder != onnx_fp32.folder
    reference = np.array(model.score(DIALOGUE, QUESTIONS))
    got = np.array(int8.score(DIALOGUE, QUESTIONS))
    assert np.corrcoef(reference, got)[0, 1] > 0.99
    with pytest.raises(ValueError, match="at least one candidate"):
        onnx_fp32.score(DIALOGUE, [])


def test_a_global_reranker_cut_to_fewer_layers_runs_on_onnx_with_its_own_export(cache: Path) -> None:
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker
    from medrank.utils.hf import keep_first_layers

    deep = tiny_global()
    shallow = tiny_global()
    keep_first_layers(shallow.encoder, 1)
    deep_onnx, shallow_onnx = OnnxGlobalReranker(deep), OnnxGlobalReranker(shallow)
    assert shallow_onnx.folder != deep_onnx.folder  # the 1-block model is exported, not the cached 2-block one
    reference = np.array(shallow.score(DIALOGUE, QUESTIONS))
    np.testing.assert_allclose(shallow_onnx.score(DIALOGUE, QUESTIONS), reference, atol=1e-5)
    assert not np.allclose(deep_onnx.score(DIALOGUE, QUESTIONS), reference, atol=1e-3)


def test_a_damaged_export_is_rebuilt_and_new_weights_are_exported_again(cache: Path) -> None:
    from medrank.encoders import onnx as onnx_module
    from medrank.encoders.onnx import INFO_FILE, MODEL_FILE
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    model = tiny_global()
    reference = model.score(DIALOGUE, QUESTIONS)
    first = OnnxGlobalReranker(model)
    model_file = first.folder / MODEL_FILE
    written = model_file.stat().st_mtime_ns
    info = json.loads((first.folder / INFO_FILE).read_text())
    assert OnnxGlobalReranker(model).folder == first.folder and model_file.stat().st_mtime_ns == written  # reused
    data = bytes(model_file.read_bytes())
    for how in ("truncate", "flip"):
        if how == "truncate":
            model_file.write_bytes(data[: len(data) // 2])
        else:  # one weight byte, same size and time: only the digest can tell (in a process that has not read it)
            flipped = bytearray(data)
            flipped[len(data) * 3 // 4] ^= 0xFF
            model_file.write_bytes(bytes(flipped))
            os.utime(model_file, ns=(written, written))
            onnx_module._FILE_DIGESTS.clear()
        again = OnnxGlobalReranker(model)
        assert again.folder == first.folder
        assert json.loads((again.folder / INFO_FILE).read_text())["sha256"] == info["sha256"]
        np.testing.assert_allclose(again.score(DIALOGUE, QUESTIONS), reference, atol=1e-5)
    assert [p.name for p in (cache / "onnx").iterdir()] == [first.folder.name]  # nothing half-written left
    # a trained head changes the weights' digest: a new export, which follows the new weights
    with torch.no_grad():
        model.head.bias.add_(1.0)
    moved = OnnxGlobalReranker(model)
    assert moved.folder != first.folder
    np.testing.assert_allclose(moved.score(DIALOGUE, QUESTIONS), np.array(reference) + 1.0, atol=1e-5)


def test_compare_counts_correlation_and_top5_order() -> None:
    from medrank.pipelines.history.models.backend_choice import compare, top_order

    assert top_order([0.1, 0.9, 0.5, 0.7, 0.2, 0.3]) == [1, 3, 2, 5, 4]
    same = compare([[1, 2, 3, 4, 5, 6]], [[2, 4, 6, 8, 10, 12]])  # a scaled copy: correlation 1, same order
    assert same.min_correlation == pytest.approx(1.0) and same.same_top5 == 1.0
    # the second input swaps the 5th and 6th best: the top-5 differs, the correlation stays high
    mixed = compare([[6, 5, 4, 3, 2, 1], [6, 5, 4, 3, 2, 1]], [[6, 5, 4, 3, 2, 1], [6, 5, 4, 3, 0.9, 1]])
    assert mixed.same_top5 == 0.5 and mixed.inputs == 2 and 0.9 < mixed.min_correlation < 1.0
    with pytest.raises(ValueError, match="non-empty"):
        compare([], [])


def test_choose_keeps_the_fastest_that_agrees_and_torch_when_none_does(cache: Path) -> None:
    from medrank.pipelines.history.models.backend_choice import (
        DEFAULT_RERANKER_AGREEMENT,
        choose_reranker_backend,
    )

    model = tiny_global()
    checks = [(DIALOGUE, QUESTIONS), ("fever", QUESTIONS[:6])]
    choice = choose_reranker_backend(model, checks, repeats=2)
    assert set(choice.median_ms) == {"torch", "onnx", "onnx-int8"}
    assert choice.agreement["onnx"].min_correlation > 0.9999 and choice.agreement["onnx"].same_top5 == 1.0
    passing = ["torch"] + [b for b, a in choice.agreement.items() if a.min_correlation >= DEFAULT_RERANKER_AGREEMENT[b][0]
                           and a.same_top5 >= DEFAULT_RERANKER_AGREEMENT[b][1]]
    assert "onnx" in passing and choice.backend == min(passing, key=choice.median_ms.get)
    assert choice.backend in choice.reason
    strict = choose_reranker_backend(model, checks, bars={"onnx": (1.1, 1.0), "onnx-int8": (1.1, 1.0)}, repeats=1)
    assert strict.backend == "torch" and strict.scorer is model and "disagrees with torch" in strict.reason
    with pytest.raises(ValueError, match="at least one"):
        choose_reranker_backend(model, [])


def test_open_reranker_runs_a_saved_run_on_each_backend(tmp_path: Path, cache: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from medrank.encoders.onnx import OnnxBackendError
    from medrank.pipelines.history.evaluation import open_reranker
    from medrank.pipelines.history.models import HistoryCrossEncoder

    model = tiny_global()
    model.save(tmp_path / "run" / "model")
    reference = model.score(DIALOGUE, QUESTIONS)
    for backend in ("torch", "onnx", "onnx-int8"):
        loaded = open_reranker(tmp_path / "run", backend)
        assert loaded.kind == "global" and loaded.backend == backend
        got = loaded.scorer.score(DIALOGUE, QUESTIONS)
        assert np.corrcoef(reference, got)[0, 1] > (0.9999 if backend != "onnx-int8" else 0.99)
    auto = open_reranker(tmp_path / "run", "auto", [(DIALOGUE, QUESTIONS)])
    assert auto.backend in ("torch", "onnx", "onnx-int8") and "agreeing with torch" in auto.reason
    with pytest.raises(ValueError, match="needs check inputs"):
        open_reranker(tmp_path / "run", "auto")
    with pytest.raises(OnnxBackendError, match="backend must be one of"):
        open_reranker(tmp_path / "run", "tensorrt")
    _, tok = make_tiny_bert()
    cfg = BertConfig(vocab_size=len(tok.get_vocab()), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=1)
    HistoryCrossEncoder(BertForSequenceClassification(cfg).eval(), tok).save(tmp_path / "ce")
    assert open_reranker(tmp_path / "ce", "auto").backend == "torch"
    with pytest.raises(OnnxBackendError, match="only the global re-ranker"):
        open_reranker(tmp_path / "ce", "onnx")


@pytest.mark.slow
def test_real_weights_agree_on_inquiry_states() -> None:
    """MiniLM base on the English engine's inquiry states: fp32 matches torch; int8, which does not keep the
    order, is not chosen."""
    from medrank.pipelines.history.inquiry.build import build_engine, reranker_checks
    from medrank.pipelines.history.models.backend_choice import choose_reranker_backend, compare
    from medrank.pipelines.history.models.global_onnx import OnnxGlobalReranker

    torch.manual_seed(0)
    model = GlobalReranker.from_pretrained("minilm").eval()
    torch.nn.init.normal_(model.head.weight, std=0.5)
    checks = reranker_checks(build_engine("en"))
    reference = [model.score(d, q) for d, q in checks]
    fp32 = compare(reference, [OnnxGlobalReranker(model).score(d, q) for d, q in checks])
    int8 = compare(reference, [OnnxGlobalReranker(model, quantized=True).score(d, q) for d, q in checks])
    assert fp32.min_correlation > 0.9999 and fp32.same_top5 == 1.0
    # int8 follows torch only loosely (mean correlation 0.94, no state with the same top-5 order), so the
    # backend choice must not serve it
    assert int8.mean_correlation > 0.8
    assert choose_reranker_backend(model, checks, repeats=1).backend in ("torch", "onnx")
