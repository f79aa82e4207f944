from __future__ import annotations

import numpy as np
import pytest
import torch

from medrank.encoders import TransformerEncoder
from medrank.encoders.transformer import pool


def test_encode_shapes_and_unit_norm(tiny_encoder):
    emb = tiny_encoder.encode(["fever and cough", "chest pain", "头痛"])
    assert emb.shape == (3, 32) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    single = tiny_encoder.encode("chest pain")
    np.testing.assert_allclose(single, emb[1], atol=1e-5)


def test_length_sorted_batching_matches_one_by_one(tiny_encoder):
    texts = ["fever", "chest pain back pain nausea vomiting rash", "cough", "heart attack hypertension"]
    batched = tiny_encoder.encode(texts, batch_size=3)
    single = np.stack([tiny_encoder.encode(t) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_prompts_change_query_but_not_plain_kind(tiny_encoder):
    tiny_encoder.query_prompt = "fever "
    q = tiny_encoder.encode("cough", kind="query")
    plain = tiny_encoder.encode("cough")
    assert not np.allclose(q, plain)
    np.testing.assert_allclose(tiny_encoder.encode("fever cough"), q, atol=1e-5)


def test_pooling_mean_ignores_padding():
    hidden = torch.tensor([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool(hidden, mask, "mean").tolist() == [[2.0, 2.0]]
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 1.0]]


def test_bad_inputs(tiny_encoder):
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        tiny_encoder.encode(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="kind"):
        tiny_encoder.encode(["ok"], kind="doc")  # type: ignore[arg-type]
    assert tiny_encoder.encode([]).shape == (0, 32)


def test_save_reload_roundtrip(tiny_encoder, tmp_path):
    tiny_encoder.save(tmp_path / "enc")
    again = TransformerEncoder(tmp_path / "enc")
    texts = ["fever cough", "乳腺癌"]
    np.testing.assert_allclose(again.encode(texts), tiny_encoder.encode(texts), atol=1e-5)
    assert (tmp_path / "enc" / "model.safetensors").exists()
    assert again.pooling == "mean"


def test_sentence_transformers_loads_our_saved_folder(tiny_encoder, tmp_path):
    from sentence_transformers import SentenceTransformer

    tiny_encoder.save(tmp_path / "enc")
    st = SentenceTransformer(str(tmp_path / "enc"), device="cpu")
    texts = ["fever cough", "chest pain"]
    np.testing.assert_allclose(st.encode(texts), tiny_encoder.encode(texts), atol=1e-5)


def test_cached_encoder_reuses_vectors(tiny_encoder, tmp_path):
    from medrank.encoders import CachedEncoder

    calls = []
    inner = tiny_encoder._encode

    def counting(texts, kind, bs, prog):
        calls.append(list(texts))
        return inner(texts, kind, bs, prog)

    tiny_encoder._encode = counting
    cached = CachedEncoder(tiny_encoder, tmp_path)
    a = cached.encode(["fever", "cough", "fever"], kind="passage")
    b = CachedEncoder(tiny_encoder, tmp_path).encode(["cough", "chest pain"], kind="passage")
    assert calls == [["fever", "cough"], ["chest pain"]]  # duplicates and cached texts are not re-encoded
    np.testing.assert_allclose(a[1], b[0], atol=1e-6)
    np.testing.assert_allclose(b[1], inner(["chest pain"], "passage", 8, False)[0], atol=1e-5)


def test_missing_model_folder_is_a_clear_error(tmp_path):
    from medrank.encoders.registry import resolve_model_path

    with pytest.raises(FileNotFoundError, match="model folder .* not found"):
        resolve_model_path(str(tmp_path / "no-such-model"))
    assert resolve_model_path("org/hub-model") == "org/hub-model"  # hub ids pass through


def test_requested_threads_records_explicit_counts_only():
    import torch

    from medrank import config

    saved, n = config._requested_threads, torch.get_num_threads()
    try:
        config.set_threads(2)
        config.set_threads(None)  # the default (all cores) is not a request
        assert config.requested_threads() == 2
    finally:
        config.set_threads(n)
        config._requested_threads = saved
