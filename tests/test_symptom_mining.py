"""Pairs, clean batches, hard-negative miners and E-FN calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrank.pipelines.symptom.data import build_pair_data, no_duplicate_batches
from medrank.pipelines.symptom.efn import AlphaSchedule, FalseNegativeElimination, calibrate_threshold
from medrank.records import Concept, ConceptDataset, Qrels, Query
from medrank.training.miners import (
    Candidates,
    HDSamplingMiner,
    HigherThanTrueMiner,
    RandomMiner,
    TopKMiner,
    mine_candidates,
)


def toy_dataset() -> ConceptDataset:
    queries = (
        Query("a", "头痛"),
        Query("b", "头痛"),  # same text as "a": merged, gold sets united
        Query("c", "发热咳嗽"),
        Query("d", "高血压"),
        Query("e", "乳腺癌"),
    )
    qrels = Qrels(
        {
            "a": {"头痛": 1},
            "b": {"偏头痛": 1},
            "c": {"发热": 1, "咳嗽": 1, "O": 1},
            "d": {"高血压": 1},
            "e": {"乳腺恶性肿瘤": 1},
        }
    )
    vocab = tuple(Concept(n, n) for n in ["头痛", "偏头痛", "发热", "咳嗽", "高血压", "糖尿病", "胸痛"])
    return ConceptDataset("chip-cdn/toy", queries, qrels, vocab)


def test_build_pair_data_merges_texts_and_keeps_unmapped_gold():
    data = build_pair_data(toy_dataset(), toy_dataset().vocabulary)
    assert data.query_texts == ["头痛", "发热咳嗽", "高血压", "乳腺癌"]
    assert data.term_texts[:7] == ["头痛", "偏头痛", "发热", "咳嗽", "高血压", "糖尿病", "胸痛"]
    assert "乳腺恶性肿瘤" in data.term_texts and "O" not in data.term_texts  # unmapped kept, "O" dropped
    gold = {data.query_texts[q]: {data.term_texts[t] for t in g} for q, g in enumerate(data.gold)}
    assert gold["头痛"] == {"头痛", "偏头痛"} and gold["发热咳嗽"] == {"发热", "咳嗽"}
    pairs = {(data.query_texts[q], data.term_texts[t]) for q, t in data.pairs}
    assert len(pairs) == len(data.pairs) == 6
    qot = data.queries_of_term()
    assert list(qot[data.term_texts.index("咳嗽")]) == [1]


def test_build_pair_data_synonyms_are_gold_entries():
    vocab = (Concept("D1", "Breast Neoplasms", synonyms=("breast cancer", "breast tumor")), Concept("D2", "Fever"))
    ds = ConceptDataset("ncbi/toy", (Query("m", "breast carcinoma"),), Qrels({"m": {"D1": 1}}), vocab)
    data = build_pair_data(ds, vocab)
    assert data.term_texts == ["Breast Neoplasms", "breast cancer", "breast tumor", "Fever"]
    assert list(data.gold[0]) == [0, 1, 2]  # every synonym of the gold concept is off-limits as a negative
    assert data.pairs.tolist() == [[0, 0]]  # one pair with the preferred name
    assert build_pair_data(ds, vocab, positives="all").pairs.tolist() == [[0, 0], [0, 1], [0, 2]]
    with pytest.raises(ValueError, match="positives"):
        build_pair_data(ds, vocab, positives="some")


def test_build_pair_data_definitions_are_one_more_gold_entry():
    vocab = (Concept("HP:1", "Rhinorrhea", meta={"definition": "Discharge of mucus from the nose. It may be clear."}),
             Concept("HP:2", "Fever"))
    ds = ConceptDataset("hpo/toy", (Query("m", "runny nose"),), Qrels({"m": {"HP:1": 1}}), vocab)
    assert build_pair_data(ds, vocab).term_texts == ["Rhinorrhea", "Fever"]  # off by default
    data = build_pair_data(ds, vocab, use_definitions=True)
    assert data.term_texts == ["Rhinorrhea", "Discharge of mucus from the nose", "Fever"]
    assert list(data.gold[0]) == [0, 1]  # never a negative of its own term's query
    assert data.pairs.tolist() == [[0, 0]]  # the positive stays the preferred name


def test_no_duplicate_batches_have_disjoint_gold_sets():
    rng = np.random.default_rng(0)
    n_terms = 30
    queries, gold = [], {}
    for i in range(120):
        k = int(rng.integers(1, 4))
        gold[f"q{i}"] = {f"t{int(t)}": 1 for t in rng.choice(n_terms, k, replace=False)}
        queries.append(Query(f"q{i}", f"text {i % 100}"))  # 20 repeated texts
    ds = ConceptDataset("toy", tuple(queries), Qrels(gold), tuple(Concept(f"t{i}", f"t{i}") for i in range(n_terms)))
    data = build_pair_data(ds, ds.vocabulary)
    batches = no_duplicate_batches(data, np.arange(len(data.pairs)), 8, np.random.default_rng(1))
    seen = np.concatenate(batches)
    assert len(seen) == len(set(seen.tolist()))
    for b in batches:
        qs = data.pairs[b, 0]
        assert len(set(qs.tolist())) == len(qs)
        terms = [t for q in qs for t in data.gold[q]]
        assert len(terms) == len(set(map(int, terms))), "two queries of one batch share a gold term"
        for i, p in enumerate(b):  # every in-batch term is a true negative for every other query
            for j, p2 in enumerate(b):
                if i != j:
                    assert data.pairs[p2, 1] not in set(data.gold[data.pairs[p, 0]].tolist())
    # deterministic in the rng
    again = no_duplicate_batches(data, np.arange(len(data.pairs)), 8, np.random.default_rng(1))
    assert all((a == b).all() for a, b in zip(batches, again, strict=True))
    with pytest.raises(ValueError, match="batch_size"):
        no_duplicate_batches(data, np.arange(3), 1, np.random.default_rng(0))


def test_mine_candidates_excludes_gold_and_efn():
    anchors = np.eye(3, dtype=np.float32)
    cands = np.array([[1, 0, 0], [0.9, 0.1, 0], [0.5, 0.5, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    cands /= np.linalg.norm(cands, axis=1, keepdims=True)
    exclude = [np.array([0]), np.array([], dtype=np.int64), np.array([4])]
    res = mine_candidates(anchors, cands, exclude, pool=3)
    assert res.index[0].tolist() == [1, 2, 3]  # gold 0 never appears
    assert 4 not in res.index[2]
    assert np.all(np.diff(res.score, axis=1) <= 0)
    # E-FN: candidates scoring >= beta are probable positives, never negatives
    res = mine_candidates(anchors, cands, exclude, pool=3, beta=0.95)
    assert 1 not in res.index[0].tolist() and res.efn_excluded >= 1
    assert 3 not in res.index[1].tolist() and res.index[1][0] == 2  # cand 3 scores 1.0 >= beta for anchor 1
    # a pool wider than what is left is padded with -1 / -inf
    small = mine_candidates(anchors[:1], cands[:2], [np.array([0])], pool=5)
    assert small.index.tolist() == [[1, -1]] and math.isinf(small.score[0, 1])


def _toy_candidates() -> Candidates:
    index = np.array([[5, 6, 7, 8, 9, -1]])
    score = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, -np.inf]], dtype=np.float32)
    return Candidates(index, score)


def test_topk_miner():
    cands = _toy_candidates()
    idx, ok = TopKMiner().sample(cands, np.array([0, 0]), np.array([0.95, 0.1]), 2, np.random.default_rng(0))
    assert [sorted(r) for r in idx.tolist()] == [[5, 6], [5, 6]] and ok.all()
    idx, ok = TopKMiner(k=3).sample(cands, np.zeros(200, dtype=int), np.zeros(200), 2, np.random.default_rng(0))
    assert set(idx.ravel().tolist()) == {5, 6, 7}
    idx, ok = TopKMiner().sample(cands, np.array([0]), np.array([0.0]), 8, np.random.default_rng(0))
    assert sorted(idx[0, :5].tolist()) == [5, 6, 7, 8, 9] and ok[0].tolist() == [True] * 5 + [False] * 3
    assert (idx[~ok] == -1).all()


def test_higher_than_true_miner():
    cands = _toy_candidates()
    rng = np.random.default_rng(0)
    # gold scored 0.75: 5, 6 rank above it (drawn first), then the next best (7)
    idx, ok = HigherThanTrueMiner().sample(cands, np.zeros(100, dtype=int), np.full(100, 0.75), 3, rng)
    assert all(set(r[:2]) == {5, 6} and r[2] == 7 for r in idx.tolist())
    idx, _ = HigherThanTrueMiner().sample(cands, np.zeros(300, dtype=int), np.full(300, 0.55), 1, rng)
    assert set(idx.ravel().tolist()) == {5, 6, 7, 8}  # uniform over the four above the gold


def test_hd_sampling_follows_softmax():
    cands = Candidates(np.array([[1, 2, 3]]), np.array([[0.9, 0.8, -0.5]], dtype=np.float32))
    rows = np.zeros(20000, dtype=int)
    idx, ok = HDSamplingMiner(temperature=0.1).sample(cands, rows, np.zeros(20000), 1, np.random.default_rng(0))
    freq = np.bincount(idx.ravel(), minlength=4)[1:] / 20000
    p = np.exp(np.array([0.9, 0.8, -0.5]) / 0.1)
    p /= p.sum()
    np.testing.assert_allclose(freq, p, atol=0.01)
    # without replacement: n = all valid gives each once
    idx, ok = HDSamplingMiner().sample(cands, np.zeros(5, dtype=int), np.zeros(5), 3, np.random.default_rng(0))
    assert all(sorted(r) == [1, 2, 3] for r in idx.tolist())


def test_random_miner_never_draws_gold():
    exclude = [np.array([0, 1, 2]), np.array([], dtype=np.int64)]
    miner = RandomMiner(5, exclude)
    idx, ok = miner.sample(None, np.zeros(500, dtype=int), None, 2, np.random.default_rng(0))
    assert ok.all() and set(idx.ravel().tolist()) == {3, 4} and (idx[:, 0] != idx[:, 1]).all()
    full = RandomMiner(3, [np.array([0, 1, 2])])
    idx, ok = full.sample(None, np.array([0]), None, 2, np.random.default_rng(0))
    assert not ok.any()


def test_calibrate_threshold_by_hand():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    labels = np.array([1, 1, 0, 1, 0])
    # precision of the top n: 1, 1, 2/3, 3/4, 3/5
    assert calibrate_threshold(scores, labels, 0.75) == pytest.approx(0.6)
    assert calibrate_threshold(scores, labels, 0.8) == pytest.approx(0.8)
    assert calibrate_threshold(scores, labels, 0.6) == pytest.approx(0.5)
    assert math.isinf(calibrate_threshold(scores, np.zeros(5), 0.5))
    # ties are all in or all out: [0.9 pos, 0.8 neg, 0.8 pos] -> cut after 0.9 or after both 0.8s
    assert calibrate_threshold(np.array([0.9, 0.8, 0.8]), np.array([1, 0, 1]), 0.7) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="alpha"):
        calibrate_threshold(scores, labels, 0.0)


def test_alpha_rises_and_efn_logs_beta():
    sched = AlphaSchedule(0.8, 0.05, 0.9)
    assert [sched(e) for e in (1, 2, 3, 4)] == pytest.approx([0.8, 0.85, 0.9, 0.9])
    efn = FalseNegativeElimination(sched)
    beta = efn.calibrate(1, np.array([0.9, 0.8, 0.7]), np.array([1, 1, 0]))
    assert beta == pytest.approx(0.8) and efn.beta(1) == pytest.approx(0.8)
    assert efn.log[0]["precision_at_beta"] == 1.0 and efn.log[0]["alpha"] == 0.8
    efn.calibrate(1, np.array([0.9]), np.array([0]))
    assert len(efn.log) == 1 and efn.log[0]["beta"] is None
