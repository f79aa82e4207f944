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


def test_two_writers_of_one_cache_keep_each_others_vectors(tiny_encoder, tmp_path):
    # the service's side process and its build both write the same (encoder, kind) file: the last write
    # once replaced the other's vectors with its own view of the file
    from medrank.encoders import CachedEncoder

    first, second = CachedEncoder(tiny_encoder, tmp_path), CachedEncoder(tiny_encoder, tmp_path)
    first.encode(["warm"], kind="passage")
    second.encode(["seen"], kind="passage")  # reads the file now: holds "warm"
    a = first.encode(["fever", "cough"], kind="passage")  # written while `second` holds an older view
    b = second.encode(["chest pain"], kind="passage")
    calls = []
    inner = tiny_encoder._encode
    tiny_encoder._encode = lambda texts, kind, bs, prog: calls.append(list(texts)) or inner(texts, kind, bs, prog)
    again = CachedEncoder(tiny_encoder, tmp_path).encode(["warm", "seen", "fever", "cough", "chest pain"], kind="passage")
    assert calls == []  # every writer's texts are in the file
    np.testing.assert_array_equal(again[2:4], a)
    np.testing.assert_array_equal(again[4], b[0])


def test_cached_vectors_and_their_text_digests_live_in_one_file(tiny_encoder, tmp_path):
    import hashlib

    from safetensors.numpy import load_file, save_file

    from medrank.encoders import CachedEncoder

    cached = CachedEncoder(tiny_encoder, tmp_path)
    vecs = cached.encode(["fever", "cough"], kind="query")
    files = sorted(p.name for p in cached.directory.iterdir())
    # no separate key list to tear apart from the matrix (the lock only serialises writers)
    assert files == ["query.lock", "query.safetensors", "spec.json"]
    stored = load_file(str(cached.directory / "query.safetensors"))
    assert [bytes(r) for r in stored["sha1"]] == [hashlib.sha1(t.encode()).digest() for t in ("fever", "cough")]
    np.testing.assert_array_equal(stored["vectors"], vecs)

    # a file whose two tensors disagree in length is not trusted: its texts are encoded again
    save_file({"sha1": stored["sha1"][:1], "vectors": stored["vectors"]}, str(cached.directory / "query.safetensors"))
    calls = []
    inner = tiny_encoder._encode
    tiny_encoder._encode = lambda texts, kind, bs, prog: calls.append(list(texts)) or inner(texts, kind, bs, prog)
    CachedEncoder(tiny_encoder, tmp_path).encode(["fever"], kind="query")
    assert calls == [["fever"]]


def test_an_unreachable_hub_error_suggests_the_alias_a_typo_is_near(monkeypatch, tmp_path):
    import medrank.encoders.registry as registry

    _offline_hub(monkeypatch, tmp_path)
    with pytest.raises(OSError, match="unreachable: no network. Did you mean 'minilm'"):
        registry.resolve_model_path("minlm")
    with pytest.raises(OSError, match="unreachable: no network.$"):  # a real hub name gets no hint
        registry.resolve_model_path("bert-base-uncased")
    assert registry._near_alias("t5-small") == "e5-small"  # why the hint never refuses a name on its own


def test_missing_model_folder_is_a_clear_error(tmp_path):
    from medrank.encoders.registry import resolve_model_path

    with pytest.raises(FileNotFoundError, match="model folder .* not found"):
        resolve_model_path(str(tmp_path / "no-such-model"))


def test_hub_ids_pass_through_where_the_hub_answers(monkeypatch, tmp_path):
    import medrank.encoders.registry as registry

    probes = _offline_hub(monkeypatch, tmp_path)
    monkeypatch.setattr(registry, "hub_unreachable", lambda host, port: probes.append(host))
    assert registry.resolve_model_path("org/hub-model") == "org/hub-model"
    assert probes == ["huggingface.co"]


def test_set_threads_limits_the_blas_pool_numpy_already_started():
    from threadpoolctl import threadpool_info

    from medrank import config

    saved = config._requested_threads
    try:
        config.set_threads(1)
        assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {1}
    finally:
        config._requested_threads = saved
        config.set_threads(None)
        config._requested_threads = saved


def test_a_run_config_threads_yield_to_the_global_flag():
    import torch

    from medrank import config

    saved = config._requested_threads
    try:
        config._requested_threads = None
        assert config.set_run_threads(1) == 1 and torch.get_num_threads() == 1
        assert config.requested_threads() is None  # a config's count is not remembered as the user's choice
        config.set_threads(2)  # medrank --threads 2
        assert config.set_run_threads(1) == 2 and torch.get_num_threads() == 2
    finally:
        config._requested_threads = None
        config.set_threads(None)
        config._requested_threads = saved


def test_task_options_are_type_checked_with_their_name():
    from medrank.config import task_option

    assert task_option({"k": 5}, "k", 10, int) == 5
    assert task_option({}, "k", None, int) is None
    assert task_option({"w": 1}, "w", 0.5, float) == 1.0 and isinstance(task_option({"w": 1}, "w", 0.5, float), float)
    with pytest.raises(ValueError, match=r"--set max_samples must be an integer, got 'abc'"):
        task_option({"max_samples": "abc"}, "max_samples", None, int)
    with pytest.raises(ValueError, match="must be an integer, got 1.5"):
        task_option({"max_samples": 1.5}, "max_samples", None, int)
    with pytest.raises(ValueError, match="must be a number, got True"):
        task_option({"w": True}, "w", 0.5, float)


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


def test_a_name_that_is_neither_folder_nor_hub_id_fails_at_once():
    from medrank.encoders import resolve_model_path

    with pytest.raises(FileNotFoundError, match="not a Hugging Face hub id"):
        resolve_model_path("runs/no-such-run/model")


def _offline_hub(monkeypatch, tmp_path):
    """The hub unreachable (no probe leaves the machine) and an empty Hugging Face cache."""
    from huggingface_hub import constants

    import medrank.encoders.registry as registry

    for variable in registry._PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    probes = []
    monkeypatch.setattr(registry, "hub_unreachable", lambda host, port: probes.append((host, port)) or "no network")
    return probes


def test_unreachable_hub_fails_fast_with_the_reason(monkeypatch, tmp_path):
    from medrank.encoders import load_encoder

    probes = _offline_hub(monkeypatch, tmp_path)
    with pytest.raises(OSError, match=r"not in the Hugging Face cache, and the hub \(huggingface.co\) is unreachable: no network"):
        load_encoder("some-org/some-model")
    assert probes == [("huggingface.co", 443)]


def test_unreachable_hub_uses_the_cached_snapshot(monkeypatch, tmp_path, tiny_encoder):
    from medrank.encoders import load_encoder, resolve_model_path

    _offline_hub(monkeypatch, tmp_path)
    repo = tmp_path / "hub" / "models--some-org--some-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snapshot = repo / "snapshots" / ("0" * 40)
    tiny_encoder.save(snapshot)
    assert resolve_model_path("some-org/some-model") == str(snapshot)
    reloaded = load_encoder("some-org/some-model")
    np.testing.assert_allclose(reloaded.encode(["fever"]), tiny_encoder.encode(["fever"]), atol=1e-6)


def test_offline_mode_and_proxies_skip_the_probe(monkeypatch, tmp_path):
    from huggingface_hub import constants

    from medrank.encoders import resolve_model_path

    probes = _offline_hub(monkeypatch, tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert resolve_model_path("some-org/some-model") == "some-org/some-model"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert resolve_model_path("some-org/some-model") == "some-org/some-model"
    assert probes == []


def test_hub_probe_on_loopback():
    import socket

    from medrank.encoders.registry import hub_unreachable

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert hub_unreachable("127.0.0.1", port, timeout=2) is None
    assert hub_unreachable("127.0.0.1", port, timeout=2) is not None  # closed again: refused


def test_cache_key_follows_the_weights_not_the_folder_path(tiny_encoder, tmp_path):
    import shutil

    from medrank.encoders import CachedEncoder

    tiny_encoder.save(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "moved")
    a, moved = TransformerEncoder(tmp_path / "a"), TransformerEncoder(tmp_path / "moved")
    assert a.spec()["path"] != moved.spec()["path"]
    assert a.fingerprint() == moved.fingerprint()
    assert CachedEncoder(a, tmp_path / "cache").directory == CachedEncoder(moved, tmp_path / "cache").directory

    with torch.no_grad():  # a model re-saved in place with other weights gets a new key
        tiny_encoder.model.embeddings.word_embeddings.weight.add_(0.5)
    tiny_encoder.save(tmp_path / "a")
    resaved = TransformerEncoder(tmp_path / "a")
    assert resaved.fingerprint() != moved.fingerprint()
    assert CachedEncoder(resaved, tmp_path / "cache").directory != CachedEncoder(moved, tmp_path / "cache").directory


def test_a_hub_id_is_fingerprinted_through_its_cached_snapshot(monkeypatch, tmp_path, tiny_encoder):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--some-org--some-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    tiny_encoder.save(repo / "snapshots" / ("0" * 40))
    by_folder = TransformerEncoder(repo / "snapshots" / ("0" * 40))
    by_id = TransformerEncoder(repo / "snapshots" / ("0" * 40))
    by_id.model_path = "some-org/some-model"  # as from_pretrained records a hub id
    assert by_id.fingerprint() == by_folder.fingerprint() and by_id.fingerprint()["files"]
    by_id.model_path = "other-org/not-cached"  # no snapshot: the id stands in
    assert by_id.fingerprint()["path"] == "other-org/not-cached" and "files" not in by_id.fingerprint()


def test_hub_probe_has_one_deadline(monkeypatch):
    import socket
    import time

    from medrank.encoders.registry import hub_unreachable

    def stalled(address, timeout=None):  # a black-holed route: every address waits out its timeout
        time.sleep(5)
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", stalled)
    start = time.perf_counter()
    assert hub_unreachable("hub.invalid", 443, timeout=0.3) == "no connection within 0.3 s"
    assert time.perf_counter() - start < 2


def test_batch_order_runs_each_token_sequence_once_longest_first():
    from medrank.encoders.base import batch_order

    order, source = batch_order([[1, 5], [1, 6, 7], [1, 5], [2], [1, 6, 7]])
    assert order.tolist() == [1, 0, 3]  # distinct rows, longest first, ties in input order
    assert source.tolist() == [0, 1, 0, 3, 1]


def test_texts_that_tokenise_alike_get_one_vector_in_torch_and_int8(tiny_encoder, tmp_path, monkeypatch):
    from medrank.encoders import OnnxEncoder

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    # uncased: "Fever", "fever" and "FEVER" are the same tokens; as many tokens as "cough" and "rash", so
    # batches of 2 in length order would run them beside different texts
    texts = ["Fever", "cough", "rash", "fever", "chest pain and cough", "FEVER  "]
    for encoder in (tiny_encoder, OnnxEncoder(tiny_encoder, quantized=True)):
        vecs = encoder.encode(texts, batch_size=2)
        assert np.array_equal(vecs[0], vecs[3])
        assert np.array_equal(vecs[0], vecs[5]) and not np.array_equal(vecs[0], vecs[1])
