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
