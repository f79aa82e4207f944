"""ONNX Runtime backends: a tiny random BERT exported, cached, damaged, re-saved and served."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import make_tiny_bert

TEXTS = [
    "fever",
    "chest pain and cough",
    "headache nausea vomiting rash itch fatigue dizziness back pain",
    "breast cancer",
    "高 血 压 头 痛",
    "kidney liver stroke anemia asthma diabetes hypertension heart attack fever cough headache",
    "unknownword fever",
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _saved_tiny(folder: Path, seed: int = 0, prompt: str = "fever ") -> Path:
    from medrank.encoders import TransformerEncoder

    model, tok = make_tiny_bert(seed=seed)
    TransformerEncoder(model, tok, pooling="mean", query_prompt=prompt, name="tiny").save(folder)
    return folder


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)


def test_onnx_agrees_with_torch_at_every_batch_size_and_kind(tmp_path: Path, cache: Path) -> None:
    from medrank.encoders import CachedEncoder, OnnxEncoder, load_encoder

    folder = _saved_tiny(tmp_path / "tiny")
    torch_enc = load_encoder(str(folder))
    onnx_enc = load_encoder(str(folder), backend="onnx")
    assert isinstance(onnx_enc, OnnxEncoder) and onnx_enc.backend == "onnx" and torch_enc.backend == "torch"
    assert onnx_enc.folder.parent == cache / "onnx" and onnx_enc.dim == torch_enc.dim
    for kind in (None, "query", "passage"):
        reference = torch_enc.encode(TEXTS, kind=kind)
        for batch_size in (1, 3, 64):
            got = onnx_enc.encode(TEXTS, kind=kind, batch_size=batch_size)
            assert got.shape == reference.shape and got.dtype == np.float32
            assert _cos(reference, got).min() >= 0.9999
    assert np.allclose(np.linalg.norm(onnx_enc.encode(TEXTS), axis=1), 1, atol=1e-5)
    # the prompt is applied: a query differs from a plain text
    assert _cos(onnx_enc.encode(["cough"], kind="query"), onnx_enc.encode(["cough"]))[0] < 0.9999
    assert onnx_enc.encode("fever").shape == (torch_enc.dim,)
    assert onnx_enc.encode([]).shape == (0, torch_enc.dim)
    # the spec names the backend and rebuilds it; the cache key keeps backends apart
    spec = onnx_enc.spec()
    assert spec["backend"] == "onnx" and load_encoder(spec).backend == "onnx"
    assert load_encoder(spec, backend="torch").backend == "torch"
    assert onnx_enc.fingerprint() != torch_enc.fingerprint()
    assert {k: v for k, v in onnx_enc.fingerprint().items() if k != "backend"} == torch_enc.fingerprint()
    assert CachedEncoder(onnx_enc, tmp_path / "emb").backend == "onnx"
    with pytest.raises(ValueError, match="backend must be one of torch, torch-bf16, onnx, onnx-int8"):
        load_encoder(str(folder), backend="tensorrt")


def test_an_export_is_reused_and_a_damaged_one_is_rebuilt(tmp_path: Path, cache: Path) -> None:
    from medrank.encoders import OnnxEncoder, load_encoder
    from medrank.encoders.onnx import INFO_FILE, MODEL_FILE

    torch_enc = load_encoder(str(_saved_tiny(tmp_path / "tiny")))
    reference = torch_enc.encode(TEXTS)
    first = OnnxEncoder(torch_enc)
    model_file = first.folder / MODEL_FILE
    written = model_file.stat().st_mtime_ns
    assert OnnxEncoder(torch_enc).folder == first.folder and model_file.stat().st_mtime_ns == written  # reused
    info = json.loads((first.folder / INFO_FILE).read_text())
    assert info["source"]["variant"] == "fp32" and info["details"] == {"token_type_ids": True}
    # the graph stays unfused and the session keeps it so: plain LayerNormalization and MatMul, no fused contrib ops
    import onnx

    from medrank.encoders.onnx import SLOW_FUSIONS

    ops = {node.op_type for node in onnx.load(str(model_file)).graph.node}
    assert {"LayerNormalization", "MatMul", "Softmax"} <= ops and not ops & {"Attention", "SkipLayerNormalization", "BiasGelu"}
    assert "SkipLayerNormFusion" in SLOW_FUSIONS and "AttentionFusion" in SLOW_FUSIONS

    def damage(how: str) -> None:
        data = bytearray(model_file.read_bytes())
        if how == "truncate":
            model_file.write_bytes(bytes(data[: len(data) // 2]))
        elif how == "flip":  # same size, one weight byte changed: only the digest can tell
            data[len(data) * 3 // 4] ^= 0xFF
            model_file.write_bytes(bytes(data))
            os.utime(model_file, ns=(written, written))
        else:
            (first.folder / INFO_FILE).unlink()

    for how in ("truncate", "flip", "no info"):
        damage(how)
        again = OnnxEncoder(torch_enc)
        assert again.folder == first.folder
        assert json.loads((again.folder / INFO_FILE).read_text())["sha256"] == info["sha256"]
        assert _cos(reference, again.encode(TEXTS)).min() >= 0.9999
    # nothing half-written is left beside the export
    assert [p.name for p in (cache / "onnx").iterdir()] == [first.folder.name]


def test_a_resaved_or_retrained_model_is_exported_again(tmp_path: Path, cache: Path) -> None:
    from medrank.cache_admin import list_entries
    from medrank.encoders import OnnxEncoder, TransformerEncoder, load_encoder

    folder = _saved_tiny(tmp_path / "tiny")
    before = OnnxEncoder(load_encoder(str(folder)))
    # a model re-saved in place with other weights: a new export, never the stale one
    model, tok = make_tiny_bert(seed=1)
    TransformerEncoder(model, tok, pooling="mean", query_prompt="fever ", name="tiny").save(folder)
    resaved = load_encoder(str(folder))
    after = OnnxEncoder(resaved)
    assert after.folder != before.folder
    assert _cos(resaved.encode(TEXTS), after.encode(TEXTS)).min() >= 0.9999
    # weights changed in memory (training) without any file changing: a new export too
    with torch.no_grad():
        resaved.model.encoder.layer[-1].output.dense.weight.mul_(1.5)
    trained = OnnxEncoder(resaved)
    assert trained.folder not in (before.folder, after.folder)
    assert _cos(resaved.encode(TEXTS), trained.encode(TEXTS)).min() >= 0.9999
    # the exports are cache entries `medrank cache list/prune` see
    listed = {e.path for e in list_entries()}
    assert {before.folder, after.folder, trained.folder} <= listed


def test_added_characters_are_served(tmp_path: Path, cache: Path) -> None:
    from medrank.encoders import OnnxEncoder, TransformerEncoder

    model, tok = make_tiny_bert()
    encoder = TransformerEncoder(model, tok, pooling="cls", name="tiny")
    plain = OnnxEncoder(encoder)
    encoder.add_characters(["癫", "痫"])
    texts = ["癫 痫 发 热", "痫", "fever"]
    served = OnnxEncoder(encoder)
    assert served.folder != plain.folder and served.added_characters == ("癫", "痫")
    assert _cos(encoder.encode(texts), served.encode(texts)).min() >= 0.9999


def test_int8_agrees_loosely(tmp_path: Path, cache: Path) -> None:
    from medrank.encoders import load_encoder
    from medrank.encoders.onnx import INFO_FILE

    folder = _saved_tiny(tmp_path / "tiny")
    torch_enc, int8 = load_encoder(str(folder)), load_encoder(str(folder), backend="onnx-int8")
    assert int8.backend == "onnx-int8"
    info = json.loads((int8.folder / INFO_FILE).read_text())
    assert info["source"]["variant"] == "int8"
    # the quantisation recipe keys the export and the vectors cached from it
    from medrank.encoders.onnx import INT8_RECIPE

    assert info["source"]["quantised"] == INT8_RECIPE and int8.fingerprint()["quantised"] == INT8_RECIPE
    cos = _cos(torch_enc.encode(TEXTS, kind="query"), int8.encode(TEXTS, kind="query"))
    assert cos.mean() >= 0.98 and cos.min() >= 0.9
    # the fp32 export it was quantised from is cached too, beside it
    assert len(list((cache / "onnx").iterdir())) == 2


def test_choose_backend_takes_the_first_that_agrees_and_falls_back_to_torch(
    tmp_path: Path, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from medrank.encoders import TransformerEncoder, choose_backend

    folder = _saved_tiny(tmp_path / "tiny")
    encoder, backend, reason = choose_backend(str(folder), TEXTS, prefer=("onnx", "torch"))
    assert backend == "onnx" and encoder.backend == "onnx" and "cosine to torch min" in reason
    choice = choose_backend(str(folder), TEXTS, min_cosine=1.5)  # no ONNX backend can agree that well
    assert choice.backend == "torch" and isinstance(choice.encoder, TransformerEncoder)
    assert "onnx-int8 disagrees" in choice.reason and "onnx disagrees" in choice.reason
    assert set(choice.agreement) == {"onnx-int8", "onnx"}
    with caplog.at_level("INFO", logger="medrank.encoders.backend_choice"):
        choose_backend(str(folder), TEXTS, prefer=("onnx-int8", "onnx"), min_cosine={"onnx-int8": 1.5})
    assert "served by onnx:" in caplog.text and "fever" not in caplog.text  # the reason, never the sentences
    # an export that cannot be written (the cache is a file): skipped with the reason
    (tmp_path / "file").write_text("x")
    broken = choose_backend(TransformerEncoder(*make_tiny_bert(), name="tiny"), TEXTS, prefer=("onnx",), cache_root=tmp_path / "file")
    assert broken.backend == "torch" and "onnx unavailable" in broken.reason
    with pytest.raises(ValueError, match="at least one sentence"):
        choose_backend(str(folder), [])
    with pytest.raises(ValueError, match="backend must be one of"):
        choose_backend(str(folder), TEXTS, prefer=("gpu",))


def test_threads_follow_medrank_setting(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import medrank.config as config
    from medrank.encoders import OnnxEncoder, load_encoder

    monkeypatch.setattr(config, "_requested_threads", 1)
    encoder = load_encoder(str(_saved_tiny(tmp_path / "tiny")))
    follows, fixed = OnnxEncoder(encoder), OnnxEncoder(encoder, threads=1)
    assert follows.threads == 1
    monkeypatch.setattr(config, "_requested_threads", 2)
    follows.encode(TEXTS)
    fixed.encode(TEXTS)
    assert follows.threads == 2 and fixed.threads == 1
    with pytest.raises(ValueError, match="threads must be"):
        OnnxEncoder(encoder, threads=0)


def test_a_cross_encoder_scores_pairs_like_torch(tmp_path: Path, cache: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from medrank.encoders.onnx import OnnxPairScorer
    from medrank.models.pair_classifier import PairScorer

    _, tok = make_tiny_bert()
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=1)
    model = BertForSequenceClassification(cfg).eval()
    queries = ["fever", "chest pain", "cough", "headache nausea"] * 2
    passages = TEXTS[:4] + TEXTS[3:7]
    reference = PairScorer(model, tok, max_length=32).score_pairs(queries, passages, batch_size=3)
    for quantized, tolerance in ((False, 1e-4), (True, 0.2)):
        scorer = OnnxPairScorer(model, tok, max_length=32, quantized=quantized)
        got = scorer.score_pairs(queries, passages, batch_size=3)
        assert got.shape == reference.shape and np.abs(got - reference).max() <= tolerance * max(1.0, np.abs(reference).max())
    # a pair is read in order (segment ids, truncation of the second text): swapped pairs score otherwise
    assert not np.allclose(scorer.score_pairs(passages, queries), got, atol=1e-6)
    with pytest.raises(ValueError, match="one query per passage"):
        scorer.score_pairs(queries, passages[:2])


@pytest.mark.slow
@pytest.mark.parametrize("name, kind, texts", [
    ("minilm", None, ["Patient reports chest pain radiating to the left arm.", "No fever or chills.", "Any history of diabetes?"]),
    ("e5-small", "query", ["右肾结石", "2型糖尿病伴周围神经病变", "急性上呼吸道感染"]),
])
def test_real_weights_agree(name: str, kind: str | None, texts: list[str]) -> None:
    from medrank.encoders import load_encoder
    from medrank.encoders.onnx import with_backend

    torch_enc = load_encoder(name)
    reference = torch_enc.encode(texts, kind=kind)
    fp32 = with_backend(torch_enc, "onnx").encode(texts, kind=kind)
    int8 = with_backend(torch_enc, "onnx-int8").encode(texts, kind=kind)
    assert _cos(reference, fp32).min() >= 0.999
    assert _cos(reference, int8).mean() >= 0.98
    # the same neighbour order on a tiny retrieval: each text is nearest to itself
    assert (np.argmax(int8 @ reference.T, axis=1) == np.arange(len(texts))).all()


def test_prepare_for_serving_swaps_the_query_encoder_and_the_search(tmp_path, monkeypatch):
    from medrank.encoders import OnnxEncoder, TransformerEncoder
    from medrank.pipelines.symptom.artefacts import prepare_for_serving
    from medrank.records import Concept
    from medrank.retrieval.concept import ConceptRetriever

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    concepts = [Concept(str(i), t) for i, t in enumerate(TEXTS)]
    retriever = ConceptRetriever.build(concepts, "dense", TransformerEncoder(*make_tiny_bert(), name="tiny"))
    before = retriever.search(TEXTS, k=2)
    notes = prepare_for_serving(retriever, backend="onnx", search="hnsw")
    assert notes == "queries on onnx, HNSW search"
    assert isinstance(retriever.index.encoder, OnnxEncoder) and retriever.index.factory == "hnsw"
    # fp32 ONNX queries over the same vectors, searched exhaustively on so few entries: the same hits
    assert [r.ids for r in retriever.search(TEXTS, k=2)] == [r.ids for r in before]
    assert prepare_for_serving(retriever, backend="torch", search="exact") == ""
    with pytest.raises(ValueError, match="search must be"):
        prepare_for_serving(retriever, search="ivf")


def test_a_frozen_bottom_runs_on_onnx_like_torch_and_keeps_its_own_cache(tmp_path: Path, cache: Path) -> None:
    from medrank.encoders import TransformerEncoder
    from medrank.encoders.onnx import OnnxBackendError
    from medrank.models import BiEncoder

    model, tok = make_tiny_bert(seed=3, layers=3)
    torch_bi = BiEncoder(TransformerEncoder(model, tok, pooling="mean", name="tiny"), train_layers=1)
    onnx_bi = BiEncoder(TransformerEncoder(model, tok, pooling="mean", name="tiny"), train_layers=1)
    torch_key = onnx_bi.cache_key()
    onnx_bi.set_bottom_backend("onnx")
    assert onnx_bi.bottom_backend == "onnx" and onnx_bi.cache_key() != torch_key  # never reads torch's states
    features = torch_bi.encoder.tokenize(TEXTS, None)
    want, got = torch_bi.frozen_states(features), onnx_bi.frozen_states(features)
    assert got.shape == want.shape and got.dtype == torch.float32
    real = features["attention_mask"].bool()
    assert torch.allclose(got[real], want[real], atol=1e-4)
    # the whole cached path (bottom on onnx, top block on torch) gives torch's vectors
    assert _cos(torch_bi.encode(TEXTS, None), onnx_bi.encode(TEXTS, None)).min() >= 0.9999
    int8 = BiEncoder(TransformerEncoder(model, tok, pooling="mean", name="tiny"), train_layers=1)
    int8.set_bottom_backend("onnx-int8")
    assert _cos(torch_bi.encode(TEXTS, None), int8.encode(TEXTS, None)).min() >= 0.9
    # back to torch: the states of the export are dropped, the torch key comes back
    onnx_bi.set_bottom_backend("torch")
    assert onnx_bi.cache_key() == torch_key and onnx_bi.cache_size() == 0
    with pytest.raises(OnnxBackendError, match="torch, onnx or onnx-int8"):
        onnx_bi.set_bottom_backend("torch-bf16")
    with pytest.raises(OnnxBackendError, match="no frozen bottom"):
        BiEncoder(TransformerEncoder(model, tok, pooling="mean", name="tiny"), train_layers=None, cache=False).set_bottom_backend("onnx")
