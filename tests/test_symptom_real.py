"""Real data and real weights (``make test-slow``): CHIP-CDN pairs and the cached e5-small path."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.pipelines.symptom.data import build_pair_data, no_duplicate_batches

pytestmark = pytest.mark.slow


def test_chip_cdn_pairs_and_clean_batches(real_data):
    from medrank.retrieval.concept_data import load_candidates, load_eval_set

    train = load_eval_set("chip-cdn", "train", root=real_data)
    valid = load_eval_set("chip-cdn", "valid", root=real_data)
    terms = load_candidates("chip-cdn", "gold", eval_set=valid, root=real_data)
    data = build_pair_data(train, terms)
    assert len(train.queries) == 4800 and data.n_queries <= 4800
    assert 8000 < len(data.pairs) < 9500  # 54 % of the records have several gold names
    assert data.n_terms == len([t for t in terms if t.id != "O"]) and "O" not in data.term_texts
    valid_texts = {q.text for q in valid.queries}
    assert not valid_texts & set(data.query_texts)  # the split is grouped by text
    batches = no_duplicate_batches(data, np.arange(len(data.pairs)), 32, np.random.default_rng(13), min_size=16)
    assert all(len(b) >= 16 for b in batches) and all(len(b) == 32 for b in batches[:200])
    assert sum(len(b) for b in batches) >= 0.85 * len(data.pairs)
    for b in batches[:50]:
        gold = [int(t) for q in data.pairs[b, 0] for t in data.gold[q]]
        assert len(gold) == len(set(gold))


def test_cached_e5_small_matches_the_full_encoder(real_data):
    from medrank.encoders import load_encoder
    from medrank.models import BiEncoder
    from medrank.retrieval.concept_data import load_eval_set

    texts = [q.text for q in load_eval_set("chip-cdn", "valid", root=real_data).queries[:24]]
    full = load_encoder("e5-small", max_length=32).encode(texts, kind="query")
    bi = BiEncoder(load_encoder("e5-small", max_length=32), train_layers=1)
    cached = bi.encode(texts, "query")
    cos = (full * cached).sum(1)
    assert cos.min() > 0.99999
