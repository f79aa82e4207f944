"""Procedure-normalisation metrics (exact-set, implication count, recall@k) and FB's θ rule, hand-computed."""

from __future__ import annotations

import math

import numpy as np

from medrank.pipelines.procedures.data import Mention, TermBase
from medrank.pipelines.procedures.evaluation import count_accuracy, recall_at, set_accuracy
from medrank.pipelines.procedures.fusion import select_terms, tune_theta
from medrank.pipelines.procedures.normalizer import Prediction

M1 = Mention("m1", "a", ("A",))
M2 = Mention("m2", "b", ("B",))
M3 = Mention("m3", "ab", ("A", "B"))
M4 = Mention("m4", "abc", ("A", "B", "C"))
M5 = Mention("m5", "c", ("C",))


def test_set_accuracy_splits_single_and_multi_term_mentions() -> None:
    mentions = [M1, M2, M3, M4, M5]
    predicted = [{"A"}, {"A"}, {"B", "A"}, {"A", "B"}, {"C"}]  # right, wrong, right (any order), partial, right
    out = set_accuracy(mentions, predicted)
    # single: m1 m2 m5 → 2/3; multi: m3 m4 → 1/2; all: 3/5
    assert out == {"single": 66.67, "multi": 50.0, "total": 60.0, "n_single": 3, "n_multi": 2}
    # Prediction objects are read through their terms
    preds = [Prediction(m.text, list(p), [], [], [], [], None, 0) for m, p in zip(mentions, predicted, strict=True)]
    assert set_accuracy(mentions, preds) == out
    # no multi-term mention: its accuracy is undefined (NaN), not 0
    only_single = set_accuracy([M1, M2], [{"A"}, {"B"}])
    assert only_single["single"] == 100.0 and only_single["total"] == 100.0 and only_single["n_multi"] == 0
    assert math.isnan(only_single["multi"])


def test_count_accuracy_per_gold_class() -> None:
    mentions = [M1, M2, M3, M4, M5]  # count classes 0, 0, 1, 2, 0
    assert [m.count_class for m in mentions] == [0, 0, 1, 2, 0]
    out = count_accuracy(mentions, [0, 1, 1, 1, 0])
    # "1": m1 ✓ m2 ✗ m5 ✓ → 2/3; "2": m3 ✓; ">=3": m4 ✗; total 3/5
    assert out == {"total": 60.0, "1": 66.67, "n_1": 3, "2": 100.0, "n_2": 1, ">=3": 0.0, "n_>=3": 1}
    # a class with no gold mention has a count of 0 and no accuracy
    out = count_accuracy([M1, M4], [np.int64(0), np.int64(2)])
    assert out == {"total": 100.0, "1": 100.0, "n_1": 1, "n_2": 0, ">=3": 100.0, "n_>=3": 1}


def test_recall_at_k_over_candidate_rows() -> None:
    terms = TermBase(["A", "B", "C", "D", "E"], [("1",), ("2",), ("3",), ("4",), ("5",)])
    mentions = [M1, M3, M4]
    rows = np.array([
        [1, 0, 2, 3, 4],  # m1: A at rank 2
        [2, 0, 3, 1, 4],  # m3: A at 2, B at 4
        [4, 3, 2, 1, 0],  # m4: C at 3, B at 4, A at 5
    ])
    out = recall_at(mentions, rows, terms, ks=(1, 2, 3, 4, 5))
    assert out == {
        "recall@1": 0.0,
        "recall@2": round(100 * (1 + 1 / 2 + 0) / 3, 2),
        "recall@3": round(100 * (1 + 1 / 2 + 1 / 3) / 3, 2),
        "recall@4": round(100 * (1 + 1 + 2 / 3) / 3, 2),
        "recall@5": 100.0,
    }
    assert out["recall@3"] == 61.11


def test_fb_theta_is_strict_and_top3_always_kept() -> None:
    cands = ["a", "b", "c", "d", "e", "f"]
    scores = [0.9, 0.5, 0.75, 0.5, 0.25, 0.625]  # binary fractions: exact comparisons
    # ≥ 3 terms: the top 3 (a, c, f) plus the others scoring strictly above θ
    assert select_terms(cands, scores, 2, theta=0.5) == ["a", "c", "f"]  # b and d sit exactly at θ
    assert select_terms(cands, scores, 2, theta=0.375) == ["a", "c", "f", "b", "d"]
    assert select_terms(cands, scores, 2, theta=0.95) == ["a", "c", "f"]  # the top 3 even below θ
    # fewer than 3 predicted: θ plays no part
    assert select_terms(cands, scores, 1, theta=0.0) == ["a", "c"]
    # tuning: θ = 0.5 (strict) gives the gold {a, c, f}; θ = 0.25 would add b and d
    theta, acc = tune_theta([cands], [scores], [2], [{"a", "c", "f"}], grid=[0.5])
    assert (theta, acc) == (0.5, 1.0)
    theta, acc = tune_theta([cands], [scores], [2], [{"a", "c", "f", "b", "d"}], grid=[0.5])
    assert acc == 0.0
