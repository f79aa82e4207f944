"""BioSyn parts: synonym-marginalisation loss, character TF-IDF and sparse + dense indexes, abbreviations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from medrank.data.abbreviations import best_long_form, expand_mention, find_abbreviations
from medrank.index import CharTfidfIndex, DenseIndex, SparseDenseIndex, load_index
from medrank.losses import SynonymMarginalizationLoss
from medrank.pipelines.symptom.biosyn import BioSynConfig, top_entries


def test_synonym_marginalization_by_hand() -> None:
    scores = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]])
    positives = torch.tensor([[True, True, False], [False, False, True]])
    # row 0: p = (e + 1) / (e + 2); row 1: p = e / (1 + e² + e)
    row0 = -math.log((math.e + 1) / (math.e + 2))
    row1 = -math.log(math.e / (1 + math.e**2 + math.e))
    loss = SynonymMarginalizationLoss()(scores, positives)
    assert loss.item() == pytest.approx((row0 + row1) / 2, rel=1e-6)
    # temperature 0.5 doubles the scores
    halved = SynonymMarginalizationLoss(temperature=0.5)(scores / 2, positives)
    assert halved.item() == pytest.approx(loss.item(), rel=1e-6)


def test_synonym_marginalization_skips_rows_without_a_positive() -> None:
    scores = torch.tensor([[1.0, 0.0], [5.0, -5.0]], requires_grad=True)
    positives = torch.tensor([[False, True], [False, False]])
    loss = SynonymMarginalizationLoss()(scores, positives)
    assert loss.item() == pytest.approx(-math.log(1 / (1 + math.e)), rel=1e-6)
    loss.backward()
    assert scores.grad is not None and torch.all(scores.grad[1] == 0)
    none = SynonymMarginalizationLoss()(scores, torch.zeros(2, 2, dtype=torch.bool))
    assert none.item() == 0.0 and none.requires_grad
    with pytest.raises(ValueError, match="must match"):
        SynonymMarginalizationLoss()(scores, positives[:, :1])


ENTRIES = (["a#0", "a#1", "b#0", "c#0"], ["colon cancer", "colorectal tumour", "breast cancer", "diabetes"], ["a", "a", "b", "c"])


def test_char_tfidf_matches_spelling_variants_and_round_trips(tmp_path) -> None:
    index = CharTfidfIndex().build(*ENTRIES)
    top = index.search("colorectal tumor", k=2)[0]
    assert top.ids[0] == "a"
    scores = index.entry_scores(["diabetes"])[0]
    assert scores[3] == pytest.approx(1.0, abs=1e-6) and scores.argmax() == 3
    index.save(tmp_path / "sparse")
    again = load_index(tmp_path / "sparse")
    assert again.search("colorectal tumor", k=2)[0].ids == top.ids
    pair = index.pair_scores(["diabetes", "breast cancer"], np.array([[3, 0], [2, 3]]))
    assert pair[0, 0] == pytest.approx(1.0, abs=1e-6) and pair[1, 0] == pytest.approx(1.0, abs=1e-6)


class _Fixed:
    """A toy encoder: fixed 2-d vectors per text (the dense half of the sum)."""

    name, dim = "fixed", 2
    table = {"colon cancer": [1, 0], "colorectal tumour": [0.6, 0.8], "breast cancer": [0, 1], "diabetes": [0.8, 0.6]}

    def encode(self, texts, kind=None, batch_size=32, show_progress=False):
        return np.array([self.table.get(t, [0.0, 1.0]) for t in texts], dtype=np.float32)

    def spec(self):
        return None


def test_sparse_dense_is_the_weighted_sum(tmp_path) -> None:
    dense = DenseIndex(_Fixed())
    dense.build(*ENTRIES)
    sparse = CharTfidfIndex().build(*ENTRIES)
    for w in (0.0, 0.7):
        index = SparseDenseIndex.from_built(dense, sparse, w)
        d, s = index.entry_scores(["diabetes"])
        expected = d[0] + w * s[0]
        ranking = index.search("diabetes", k=3)[0]
        best_per_item = {item: max(expected[i] for i in range(4) if ENTRIES[2][i] == item) for item in "abc"}
        assert list(ranking.ids) == sorted(best_per_item, key=lambda x: -best_per_item[x])
        assert ranking.scores[0] == pytest.approx(max(best_per_item.values()), abs=1e-5)
    # "diabetis" (unknown to the toy encoder) is dense-closest to "breast cancer"; the sparse half flips it
    assert SparseDenseIndex.from_built(dense, sparse, 0.0).search("diabetis", k=1)[0].ids == ("b",)
    assert SparseDenseIndex.from_built(dense, sparse, 2.0).search("diabetis", k=1)[0].ids == ("c",)
    index = SparseDenseIndex.from_built(dense, sparse, 2.0)
    index.save(tmp_path / "fused")
    again = load_index(tmp_path / "fused", encoder=_Fixed())
    assert again.sparse_weight == 2.0 and again.search("diabetis", k=1)[0].ids == ("c",)
    with pytest.raises(ValueError, match="sparse_weight"):
        SparseDenseIndex(dense, sparse, -1.0)


def test_abbreviations_schwartz_hearst() -> None:
    text = ("Germline mutations of the adenomatous polyposis coli (APC) gene cause familial adenomatous "
            "polyposis (FAP). Patients (n=12) and a value (p<0.05) are not abbreviations.")
    found = find_abbreviations(text)
    assert found == {"APC": "adenomatous polyposis coli", "FAP": "familial adenomatous polyposis"}
    assert best_long_form("HNPCC", "with hereditary nonpolyposis colorectal cancer") == "hereditary nonpolyposis colorectal cancer"
    assert best_long_form("XYZ", "no match here") is None
    assert expand_mention("APC", found) == "adenomatous polyposis coli"
    assert expand_mention("APC tumours", found) == "adenomatous polyposis coli tumours"
    assert expand_mention("adenomatous polyposis coli (APC)", found) == "adenomatous polyposis coli (APC)"
    assert expand_mention("colon cancer", {}) == "colon cancer"


def test_top_entries_and_config() -> None:
    scores = np.array([[0.1, 0.9, 0.5, 0.7]])
    assert top_entries(scores, 2) == [[1, 3]]
    assert top_entries(scores, 2, [{1}]) == [[3, 2]]
    with pytest.raises(ValueError, match="unknown biosyn config"):
        BioSynConfig.from_dict({"task": "biosyn", "topk_": 3})
    with pytest.raises(ValueError, match="sparse_ratio"):
        BioSynConfig.from_dict({"task": "biosyn", "sparse_ratio": 2.0})


def test_char_tfidf_postings_path_equals_the_matrix_product() -> None:
    from medrank.index.char_tfidf import POSTINGS_BATCH

    index = CharTfidfIndex().build(*ENTRIES)
    texts = ["colorectal tumor", "diabetis", "zzz", "cancer of the colon"]
    # the reference: every query row times every entry row
    reference = (index.transform(texts) @ index.matrix.T).toarray()
    np.testing.assert_allclose(index.entry_scores(texts), reference, atol=1e-6)  # a few texts: postings
    many = texts * (POSTINGS_BATCH // len(texts) + 1)
    np.testing.assert_allclose(index.entry_scores(many), np.tile(reference, (len(many) // len(texts), 1)), atol=1e-6)
    # "zzz" shares no n-gram but the word boundary with any entry: only that feature scores
    q = index.transform(["zzz"])
    assert set(index.vectorizer.get_feature_names_out()[q.indices]) <= {" ", "z", " z", "z "}
    np.testing.assert_allclose(index.postings_scores(np.array([], dtype=np.int32), np.array([])), np.zeros(4))


def test_sparse_dense_pooled_search_matches_the_exact_sum() -> None:
    """With an approximate dense half the exact sum is taken over each query's pool of dense and sparse top entries."""
    rng = np.random.default_rng(0)
    words = ["colon", "cancer", "tumour", "breast", "diabetes", "renal", "failure", "acute", "chronic", "liver"]
    texts = sorted({" ".join(rng.choice(words, size=rng.integers(1, 4), replace=False)) for _ in range(300)})
    vectors = rng.normal(size=(len(texts), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    class Table:
        name, dim = "table", 8
        table = dict(zip(texts, vectors, strict=True))

        def encode(self, batch, kind=None, batch_size=32, show_progress=False):
            return np.stack([self.table.get(t, vectors[0]) for t in batch])

        def spec(self):
            return None

    ids = [f"e{i}" for i in range(len(texts))]
    items = [f"c{i // 3}" for i in range(len(texts))]  # three entries per concept
    dense = DenseIndex(Table())
    dense.build(ids, texts, items)
    sparse = CharTfidfIndex().build(ids, texts, items)
    exact = SparseDenseIndex.from_built(dense, sparse, 0.7)
    queries = texts[::7] + ["colon tumor", "diabetis"]
    want = exact.search(queries, k=5)
    dense.to_hnsw(hnsw_m=16, ef_search=64)
    pooled = SparseDenseIndex.from_built(dense, sparse, 0.7)
    pooled.candidates = len(texts)  # a pool of every entry: the same ranking as the exact sum
    got = pooled.search(queries, k=5)
    assert [r.ids for r in got] == [r.ids for r in want]
    np.testing.assert_allclose([r.scores for r in got], [r.scores for r in want], atol=1e-5)
    # a small pool still scores its entries exactly: the best entry is scored as in the exact sum
    pooled.candidates = 10
    for r, w in zip(pooled.search(queries, k=1), want, strict=True):
        assert r.scores[0] <= w.scores[0] + 1e-5
    assert sum(r.ids == w.ids[:1] for r, w in zip(pooled.search(queries, k=1), want, strict=True)) >= 0.9 * len(queries)
    with pytest.raises(ValueError, match="candidates"):
        SparseDenseIndex(dense, sparse, 1.0, candidates=0)


def test_rank_entries_breaks_ties_by_entry_position() -> None:
    from medrank.index.char_tfidf import rank_entries

    items = np.array([f"c{i}" for i in range(200)], dtype=object)
    rng = np.random.default_rng(1)
    for _ in range(20):
        scores = rng.random(200).astype(np.float32) * 0.5
        tied = np.sort(rng.choice(200, size=5, replace=False))
        scores[tied] = 1.0  # five entries share the best score
        assert rank_entries("q", scores, items, 3).ids == tuple(items[tied[:3]])
