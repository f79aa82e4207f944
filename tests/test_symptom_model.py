"""The bi-encoder with a cached frozen bottom, and the cross-encoder (tiny random-weight BERT)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medrank.encoders import TransformerEncoder
from medrank.models import BiEncoder
from medrank.pipelines.symptom.model import CrossEncoder
from tests.conftest import make_tiny_bert

TEXTS = ["头 痛", "高 血 压 病", "fever and cough", "乳 腺 癌", "chest pain", "糖 尿 病 心 肌 梗 死 膝 关 节 炎"]


def tiny(seed: int = 0, layers: int = 3) -> TransformerEncoder:
    model, tok = make_tiny_bert(seed=seed, layers=layers)
    return TransformerEncoder(model, tok, pooling="mean", query_prompt="", passage_prompt="", name="tiny")


@pytest.mark.parametrize("train_layers", [1, 2, None])
def test_cached_path_equals_full_model(train_layers):
    enc = tiny()
    reference = enc.encode(TEXTS, kind="query")
    bi = BiEncoder(enc, train_layers=train_layers)
    np.testing.assert_allclose(bi.encode(TEXTS, "query"), reference, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(bi.embed(TEXTS, "query").numpy(), reference, atol=1e-5)
    # several length buckets in one step give the same result
    bi.bucket_size = 2
    with torch.no_grad():
        np.testing.assert_allclose(bi.embed(TEXTS, "query").numpy(), reference, atol=1e-5)


def test_only_the_top_blocks_train():
    enc = tiny(layers=3)
    bi = BiEncoder(enc, train_layers=1)
    trainable = {n for n, p in enc.model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("encoder.layer.2.") for n in trainable)
    assert {n for n, _ in bi.trainable.named_parameters()} == {f"top_layers.0.{n.split('encoder.layer.2.')[1]}" for n in trainable}
    emb = bi.embed(TEXTS[:3], "query")
    emb.sum().backward()
    assert all(p.grad is not None for p in bi.trainable.parameters())
    assert enc.model.embeddings.word_embeddings.weight.grad is None
    full = BiEncoder(tiny(), train_layers=None)
    names = {n for n, p in full.encoder.model.named_parameters() if p.requires_grad}
    assert not any(n.startswith("embeddings.") or n.startswith("pooler.") for n in names)
    with pytest.raises(ValueError, match="train_layers"):
        BiEncoder(tiny(layers=2), train_layers=3)


@pytest.mark.parametrize("bucket_size", [96, 2])
def test_uncached_paths_match_cached(bucket_size):
    a = BiEncoder(tiny(seed=3), train_layers=1, cache=True)
    b = BiEncoder(tiny(seed=3), train_layers=1, cache=False)
    full = BiEncoder(tiny(seed=3), train_layers=None)
    b.bucket_size = full.bucket_size = bucket_size
    with torch.no_grad():
        ref = a.embed(TEXTS, "passage").numpy()
        np.testing.assert_allclose(b.embed(TEXTS, "passage").numpy(), ref, atol=1e-5)
        np.testing.assert_allclose(full.embed(TEXTS, "passage").numpy(), ref, atol=1e-5)
    assert a.cache_size() == len(TEXTS) and b.cache_size() == 0


def test_cache_roundtrip_and_key(tmp_path):
    bi = BiEncoder(tiny(), train_layers=1)
    bi.fill_cache(TEXTS, "query")
    bi.fill_cache(TEXTS[:2], "passage")
    bi.save_cache(tmp_path)
    other = BiEncoder(tiny(), train_layers=1)
    assert other.cache_key() == bi.cache_key()
    assert other.load_cache(tmp_path) == len(TEXTS) + 2
    np.testing.assert_allclose(other.encode(TEXTS, "query"), bi.encode(TEXTS, "query"), atol=1e-6)
    deeper = BiEncoder(tiny(), train_layers=2)
    assert deeper.cache_key() != bi.cache_key() and deeper.load_cache(tmp_path) == 0


def test_dropout_stays_on_in_training_after_encode():
    enc = tiny()
    bi = BiEncoder(enc, train_layers=1)
    module = torch.nn.ModuleDict({"encoder": bi.trainable})
    module.train()
    bi.encode(TEXTS, "query")  # inference in the middle of training (mining) ...
    assert all(m.training for m in bi.trainable.modules())  # ... must not switch training off
    bi.embed(["a brand new text"], "query")  # a cache fill mid-step neither
    assert all(m.training for m in bi.trainable.modules())


def test_cross_encoder_scores_pairs_and_trains_top():
    enc = tiny()
    ce = CrossEncoder(enc, train_layers=1)
    logits = ce(["头 痛", "fever"], ["头 痛", "cough"])
    assert logits.shape == (2,)
    logits.sum().backward()
    assert ce.head.weight.grad is not None
    assert enc.model.encoder.layer[0].attention.self.query.weight.grad is None
    scores = ce.score(["头 痛"] * 3, ["头 痛", "高 血 压", "fever"], batch_size=2)
    assert scores.shape == (3,) and np.isfinite(scores).all()
    with pytest.raises(ValueError, match="queries"):
        ce(["a"], ["b", "c"])


@pytest.mark.parametrize("cache", [True, False])
def test_encode_memo_is_invalidated_by_any_weight_change(cache):
    bi = BiEncoder(tiny(), train_layers=1, cache=cache)
    first = bi.encode(TEXTS, "query")
    np.testing.assert_array_equal(bi.encode(TEXTS[::-1], "query"), first[::-1])  # served from the memo
    opt = torch.optim.AdamW(bi.trainable.parameters(), lr=0.1)
    bi.embed(TEXTS, "query").sum().backward()
    opt.step()
    after_step = bi.encode(TEXTS, "query")
    assert not np.allclose(after_step, first)
    # loading other weights (resume, best epoch) must not serve vectors of the previous weights
    fresh = BiEncoder(tiny(), train_layers=1, cache=cache)
    bi.trainable.load_state_dict(fresh.trainable.state_dict())
    np.testing.assert_allclose(bi.encode(TEXTS, "query"), first, atol=1e-5)


def test_frozen_bottom_cache_key_follows_the_weights_not_the_path(tmp_path):
    import shutil

    tiny().save(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "moved")
    key_a = BiEncoder(TransformerEncoder(tmp_path / "a"), train_layers=1).cache_key()
    assert key_a == BiEncoder(TransformerEncoder(tmp_path / "moved"), train_layers=1).cache_key()
    assert key_a != BiEncoder(TransformerEncoder(tmp_path / "a"), train_layers=2).cache_key()  # another depth
    tiny(seed=1).save(tmp_path / "a")  # other weights re-saved in place: the old states must not be reused
    assert key_a != BiEncoder(TransformerEncoder(tmp_path / "a"), train_layers=1).cache_key()
