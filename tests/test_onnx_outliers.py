"""The feed-forward outlier split of int8 encoder exports: exact in fp32, the right channels, the right nodes kept fp32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import make_tiny_bert

TEXTS = ["fever", "chest pain and cough", "headache nausea vomiting rash", "高 血 压 头 痛", "unknownword fever"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _encoder_with_an_outlier(channel: int = 2):
    """A tiny BERT whose first block's feed-forward channel ``channel`` is large for every token."""
    from medrank.encoders import TransformerEncoder

    model, tok = make_tiny_bert()
    with torch.no_grad():
        model.encoder.layer[0].intermediate.dense.bias[channel] = 40.0
    return TransformerEncoder(model, tok, pooling="mean", name="tiny")


def _feed(tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    enc = tokenizer(texts, padding=True, return_tensors="np")
    return {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": enc["attention_mask"].astype(np.int64),
            "token_type_ids": np.zeros_like(enc["input_ids"], dtype=np.int64)}


def _run(model, feed: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feed.items() if k in names})[0]


def test_the_largest_channel_is_found_and_the_split_graph_computes_the_same(tmp_path: Path) -> None:
    import onnx
    from onnx import numpy_helper

    from medrank.encoders.onnx import MODEL_FILE, ensure_export
    from medrank.encoders.onnx_outliers import feed_forward_maxima, split_outlier_channels

    encoder = _encoder_with_an_outlier(channel=2)
    maxima = feed_forward_maxima(encoder.model, encoder.tokenizer, TEXTS)
    assert sorted(maxima) == [0, 1] and maxima[0].shape == (64,)
    assert int(np.argmax(maxima[0])) == 2 and maxima[0][2] > 30  # GELU(40 + x W1) over real tokens

    original = onnx.load(str(ensure_export(encoder, "fp32", tmp_path / "onnx") / MODEL_FILE))
    split = onnx.load(str(ensure_export(encoder, "fp32", tmp_path / "onnx") / MODEL_FILE))
    keep = split_outlier_channels(split, maxima, share=1 / 64)  # one channel of 64
    weights = {i.name: numpy_helper.to_array(i) for i in split.graph.initializer}
    w1 = encoder.model.encoder.layer[0].intermediate.dense.weight.detach().numpy()  # (64, 32): torch's (out, in)
    assert np.allclose(weights["/outliers/layer.0/w1"], w1[[2]].T)
    assert weights["/outliers/layer.0/w2"].shape == (1, 32)
    assert "/outliers/layer.0/out/MatMul" in keep and "/outliers/layer.1/out/MatMul" in keep
    assert not any(name.endswith("/output/dense/MatMul") for name in keep)  # the main projections are quantised
    onnx.checker.check_model(split)
    feed = _feed(encoder.tokenizer, TEXTS)
    assert np.allclose(_run(original, feed), _run(split, feed), atol=1e-5)


def test_smoothing_finds_the_residual_streams_outlier_and_computes_the_same_in_fp32(tmp_path: Path) -> None:
    import onnx
    from onnx import numpy_helper

    from medrank.encoders import TransformerEncoder
    from medrank.encoders.onnx import MODEL_FILE, ensure_export
    from medrank.encoders.onnx_outliers import (
        calibration_feeds,
        product_input_maxima,
        product_inputs,
        smooth_product_inputs,
    )

    model, tok = make_tiny_bert()
    with torch.no_grad():
        model.embeddings.LayerNorm.bias[3] = 30.0  # the first block's queries, keys and values read a large channel 3
    encoder = TransformerEncoder(model, tok, pooling="mean", name="tiny-stream")
    file = ensure_export(encoder, "fp32", tmp_path / "onnx") / MODEL_FILE
    original, smoothed = onnx.load(str(file)), onnx.load(str(file))
    groups = product_inputs(smoothed.graph, set())
    query = next(n for n in smoothed.graph.node if n.name.endswith("layer.0/attention/self/query/MatMul"))
    stream = query.input[0]
    assert {n.name.rsplit("/", 2)[-2] for n in groups[stream]} == {"query", "key", "value"}  # one input, three products
    assert not any(n.name.endswith("layer.0/output/dense/MatMul") for products in groups.values() for n in products)
    maxima = product_input_maxima(original, list(groups), calibration_feeds(tok, TEXTS), tmp_path / "probe.onnx")
    assert int(np.argmax(maxima[stream])) == 3 and maxima[stream][3] > 25

    before = numpy_helper.to_array(next(i for i in smoothed.graph.initializer if i.name == query.input[1]))
    assert smooth_product_inputs(smoothed, maxima, alpha=0.5) == len(groups)
    after = {i.name: numpy_helper.to_array(i) for i in smoothed.graph.initializer}
    scale = after[query.input[1]][3] / before[3]
    assert np.allclose(scale, scale[0]) and scale[0] > 1  # row 3 of the weight takes a share of the channel's range
    assert query.input[0].startswith("/smoothed/") and np.isclose(after[f"{query.input[0]}/inverse_scale"][3], 1 / scale[0])
    onnx.checker.check_model(smoothed)
    feed = _feed(tok, TEXTS)
    assert np.allclose(_run(original, feed), _run(smoothed, feed), atol=1e-4)


def test_an_encoders_int8_export_keeps_only_the_outlier_branches_fp32(tmp_path: Path, cache: Path) -> None:
    import onnx

    from medrank.encoders import OnnxEncoder
    from medrank.encoders.onnx import INT8_RECIPE, MODEL_FILE, ExportSource, ensure_export, int8_recipe

    encoder = _encoder_with_an_outlier()
    int8 = OnnxEncoder(encoder, quantized=True)
    graph = onnx.load(str(int8.folder / MODEL_FILE)).graph
    weights = {i.name for i in graph.initializer}
    fp32_products = [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert fp32_products and all(name.startswith("/outliers/") for name in fp32_products)
    assert any(n.op_type == "Mul" and n.name.startswith("/smoothed/") for n in graph.node)
    assert int8.fingerprint()["quantised"] == INT8_RECIPE and "calibration" in int8.fingerprint()
    cos = np.sum(encoder.encode(TEXTS) * int8.encode(TEXTS), axis=1)
    assert cos.min() >= 0.95
    # a cross-encoder keeps the earlier recipe: whole output projections fp32, no branches
    scorer = ExportSource(encoder.model, encoder.tokenizer, "logit", "tiny")
    assert int8_recipe(scorer) != INT8_RECIPE
    pooled = ExportSource(encoder.model, encoder.tokenizer, "cls", "tiny-cls")
    cls_graph = onnx.load(str(ensure_export(pooled, "int8") / MODEL_FILE)).graph
    assert any(n.name.startswith("/outliers/") for n in cls_graph.node)


def test_a_block_it_cannot_read_keeps_its_whole_output_projection_fp32(tmp_path: Path) -> None:
    import onnx
    from transformers import BertConfig, BertModel

    from medrank.encoders import TransformerEncoder
    from medrank.encoders.onnx import MODEL_FILE, ensure_export
    from medrank.encoders.onnx_outliers import feed_forward_maxima, split_outlier_channels

    _, tok = make_tiny_bert()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_act="relu")  # Relu: not a traced GELU
    encoder = TransformerEncoder(BertModel(config).eval(), tok, pooling="mean", name="tiny-relu")
    model = onnx.load(str(ensure_export(encoder, "fp32", tmp_path / "onnx") / MODEL_FILE))
    keep = split_outlier_channels(model, feed_forward_maxima(encoder.model, tok, TEXTS))
    assert sorted(keep) == sorted(
        n.name for n in model.graph.node if n.op_type == "MatMul" and n.name.endswith("/output/dense/MatMul") and "/attention/" not in n.name
    ) and len(keep) == 2
    assert not any(n.name.startswith("/outliers/") for n in model.graph.node)


def test_other_calibration_sentences_make_another_export(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medrank.encoders.onnx_outliers as outliers
    from medrank.encoders.onnx import export_key

    encoder = _encoder_with_an_outlier()
    key, described = export_key(encoder, "int8")
    assert described["calibration"] and export_key(encoder, "fp32")[1].get("calibration") is None
    monkeypatch.setattr(outliers, "calibration_sentences", lambda: ["another sentence"])
    assert export_key(encoder, "int8")[0] != key


def test_the_packaged_calibration_sentences_hold_both_languages() -> None:
    from medrank.encoders.onnx_outliers import calibration_sentences

    sentences = calibration_sentences()
    assert len(sentences) >= 60 and len(set(sentences)) == len(sentences)
    chinese = [s for s in sentences if any("\u4e00" <= ch <= "\u9fff" for ch in s)]
    assert 20 <= len(chinese) <= len(sentences) - 20


def test_a_frozen_bottoms_int8_export_is_smoothed_not_split_and_its_states_name_the_export(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx

    import medrank.encoders.onnx as onnx_module
    from medrank.encoders import TransformerEncoder
    from medrank.encoders.onnx import INFO_FILE, INT8_RECIPE_UNSPLIT, MODEL_FILE
    from medrank.models import BiEncoder

    model, tok = make_tiny_bert(seed=3, layers=3)
    bi = BiEncoder(TransformerEncoder(model, tok, pooling="mean", name="tiny"), train_layers=1)
    bi.set_bottom_backend("onnx-int8")
    folder = bi._bottom_runner.folder
    assert INT8_RECIPE_UNSPLIT in (folder / INFO_FILE).read_text(encoding="utf-8")
    graph = onnx.load(str(folder / MODEL_FILE)).graph
    weights = {i.name for i in graph.initializer}
    fp32_products = [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    # the two frozen blocks' whole feed-forward output projections, no outlier branches, nothing of the top block
    assert len(fp32_products) == 2 and all(name.endswith("/output/dense/MatMul") for name in fp32_products)
    # the other products' inputs are smoothed: per block one Mul before the queries, keys and values, one before the
    # attention output, one before the feed-forward input
    assert sum(n.op_type == "Mul" and n.name.startswith("/smoothed/") for n in graph.node) == 6
    key = bi.cache_key()
    # another int8 recipe writes another export, and its states live under another key
    monkeypatch.setattr(onnx_module, "INT8_RECIPE_UNSPLIT", INT8_RECIPE_UNSPLIT + " (another)")
    bi.set_bottom_backend("torch")
    bi.set_bottom_backend("onnx-int8")
    assert bi._bottom_runner.folder != folder and bi.cache_key() != key
