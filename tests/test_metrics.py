"""Tests for medrank.metrics: hand-computed cases, a ranx cross-check and set metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrank.metrics import (
    binary_prf,
    evaluate,
    evaluate_sets,
    exact_set_accuracy,
    parse_metric,
    set_prf,
    to_markdown_table,
)
from medrank.records import Qrels, Ranking

LOG2_3 = math.log2(3)


def ranking(qid: str, *ids: str) -> Ranking:
    """A Ranking with strictly decreasing scores in the given order."""
    return Ranking(qid, tuple(ids), tuple(float(len(ids) - i) for i in range(len(ids))))


# ---------------------------------------------------------------------------
# Hand-computed ranking metrics
# ---------------------------------------------------------------------------


def test_ndcg_binary_hand_computed() -> None:
    qrels = Qrels({"q": {"a": 1, "c": 1}})
    run = {"q": ranking("q", "a", "b", "c", "d")}
    # relevant at ranks 1 and 3: DCG@3 = 1/log2(2) + 1/log2(4) = 1 + 1/2
    # ideal: both relevant at ranks 1, 2: IDCG@3 = 1 + 1/log2(3)
    expected = (1 + 1 / math.log2(4)) / (1 + 1 / LOG2_3)
    assert evaluate(qrels, run, "ndcg@3")["ndcg@3"] == pytest.approx(expected)
    # @1: DCG = 1, IDCG = 1
    assert evaluate(qrels, run, "ndcg@1")["ndcg@1"] == pytest.approx(1.0)


def test_graded_relevance_hand_computed() -> None:
    # x (grade 2) is relevant but never retrieved; z is judged non-relevant (grade 0).
    qrels = {"q": {"a": 1, "b": 3, "x": 2, "z": 0}}
    run = {"q": ranking("q", "a", "b", "z")}
    res = evaluate(
        qrels,
        run,
        [
            "ndcg@2",
            "ndcg@3",
            "ndcg",
            "recall@2",
            "precision@2",
            "precision@5",
            "precision",
            "map",
            "map@1",
            "mrr",
            "r-precision",
        ],
    )
    # linear gain = grade; DCG@2 = 1/log2(2) + 3/log2(3); ideal grades 3, 2, 1
    # IDCG@2 = 3/log2(2) + 2/log2(3)
    assert res["ndcg@2"] == pytest.approx((1 + 3 / LOG2_3) / (3 + 2 / LOG2_3))
    # DCG@3 adds z (gain 0); IDCG@3 = 3 + 2/log2(3) + 1/log2(4)
    assert res["ndcg@3"] == pytest.approx((1 + 3 / LOG2_3) / (3 + 2 / LOG2_3 + 0.5))
    # no cutoff: IDCG over all three relevant items, DCG over the whole run
    assert res["ndcg"] == pytest.approx(res["ndcg@3"])
    # recall@2 = |{a, b}| / |{a, b, x}| = 2/3
    assert res["recall@2"] == pytest.approx(2 / 3)
    assert res["precision@2"] == pytest.approx(1.0)  # 2 hits / 2
    assert res["precision@5"] == pytest.approx(2 / 5)  # short run still divided by k
    assert res["precision"] == pytest.approx(2 / 3)  # 2 hits / run length 3
    # AP = (P@1 + P@2) / R = (1 + 1) / 3; AP@1 = P@1 / R = 1/3
    assert res["map"] == pytest.approx(2 / 3)
    assert res["map@1"] == pytest.approx(1 / 3)
    assert res["mrr"] == pytest.approx(1.0)
    # R = 3: top-3 holds a, b -> 2/3
    assert res["r-precision"] == pytest.approx(2 / 3)


def test_map_mrr_hit_rate_hand_computed() -> None:
    qrels = {"q": {"a": 1, "b": 1, "c": 1}}
    run = {"q": ranking("q", "x", "a", "y", "b")}
    res = evaluate(qrels, run, ["map", "map@3", "mrr", "mrr@1", "acc@1", "acc@2", "hit_rate@2", "recall@4"])
    # hits at ranks 2 and 4: AP = (P@2 + P@4) / 3 = (1/2 + 2/4) / 3 = 1/3
    assert res["map"] == pytest.approx(1 / 3)
    # AP@3 = P@2 / 3 = 1/6 (divided by all relevant items, as in ranx)
    assert res["map@3"] == pytest.approx(1 / 6)
    assert res["mrr"] == pytest.approx(1 / 2)  # first relevant at rank 2
    assert res["mrr@1"] == 0.0
    assert res["acc@1"] == 0.0
    assert res["acc@2"] == 1.0
    assert res["hit_rate@2"] == res["acc@2"]
    assert res["recall@4"] == pytest.approx(2 / 3)


def test_averaging_skips_unjudged_and_zeroes_missing_queries() -> None:
    qrels = {
        "q1": {"a": 1},
        "q2": {"a": 0},  # no relevant item: skipped
        "q3": {"b": 2},  # missing from the run: scores 0
    }
    run = {
        "q1": {"x": 0.9, "a": 0.5},
        "q2": {"a": 1.0},
        "q9": {"b": 1.0},  # not in qrels: ignored
    }
    means, per_query = evaluate(qrels, run, ["mrr", "recall@5"], return_per_query=True)
    # q1: first relevant at rank 2 -> 1/2; q3 -> 0; mean over {q1, q3} = 1/4
    assert means["mrr"] == pytest.approx(0.25)
    assert means["recall@5"] == pytest.approx(0.5)
    assert per_query["mrr"] == {"q1": 0.5, "q3": 0.0}


def test_empty_ranking_scores_zero() -> None:
    qrels = {"q": {"a": 1}}
    for run in ({"q": {}}, {"q": Ranking("q", (), ())}):
        res = evaluate(qrels, run, ["ndcg", "precision", "precision@3", "map", "mrr", "acc", "r-precision"])
        assert all(v == 0.0 for v in res.values()), res


def test_ties_keep_insertion_order_for_mappings() -> None:
    qrels = {"q": {"b": 1}}
    # descending score: c (2.0) then the a/b tie in insertion order -> b at rank 3
    assert evaluate(qrels, {"q": {"a": 1.0, "b": 1.0, "c": 2.0}}, "mrr")["mrr"] == pytest.approx(1 / 3)
    # same scores, b inserted before a -> b at rank 2
    assert evaluate(qrels, {"q": {"b": 1.0, "a": 1.0, "c": 2.0}}, "mrr")["mrr"] == pytest.approx(1 / 2)
    # item ids do not break ties: "z" inserted first stays first
    assert evaluate({"q": {"z": 1}}, {"q": {"z": 0.5, "a": 0.5}}, "mrr")["mrr"] == 1.0


def test_ranking_order_is_used_as_is() -> None:
    # A Ranking is already ranked: it is not re-sorted by its scores.
    run = {"q": Ranking("q", ("a", "b", "c"), (0.1, 0.9, 0.5))}
    assert evaluate({"q": {"a": 1}}, run, "mrr")["mrr"] == 1.0
    # equal scores: Ranking order wins
    run = {"q": Ranking("q", ("b", "a"), (1.0, 1.0))}
    assert evaluate({"q": {"a": 1}}, run, "mrr")["mrr"] == 0.5


def test_mapping_and_ranking_runs_agree() -> None:
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
    mapping_run = {"q1": {"b": 0.2, "x": 0.7, "a": 0.4}, "q2": {"c": 0.1, "d": 0.3}}
    ranking_run = {"q1": ranking("q1", "x", "a", "b"), "q2": ranking("q2", "d", "c")}
    names = ["ndcg@2", "map", "mrr", "recall@1", "precision@2", "acc@1", "r-precision"]
    assert evaluate(qrels, mapping_run, names) == pytest.approx(evaluate(qrels, ranking_run, names))


def test_metric_names_are_case_insensitive_and_keys_preserved() -> None:
    qrels = {"q": {"a": 1}}
    run = {"q": ranking("q", "a", "b")}
    res = evaluate(qrels, run, ["NDCG@2", "MRR", "Hit_Rate@1", "ACC@1", "R-Precision"])
    assert set(res) == {"NDCG@2", "MRR", "Hit_Rate@1", "ACC@1", "R-Precision"}
    assert all(v == 1.0 for v in res.values())
    assert parse_metric(" nDCG @ 10 ") == ("ndcg", 10)
    assert parse_metric("acc@1") == ("hit_rate", 1)
    assert parse_metric("map") == ("map", None)
    assert evaluate(qrels, run, "mrr") == {"mrr": 1.0}


@pytest.mark.parametrize("name", ["ndcg@0", "ndcg@-1", "recall@x", "precision@1.5", "mrr@"])
def test_bad_k_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, name)


def test_unknown_metric_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown metric 'ndcg_burges'.*ndcg@k.*hit_rate@k"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg", "ndcg_burges"])
    with pytest.raises(ValueError, match="takes no @k"):
        parse_metric("r-precision@5")
    with pytest.raises(ValueError, match="no metric requested"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, [])


def test_nan_scores_name_the_query() -> None:
    with pytest.raises(ValueError, match="'q7'.*NaN"):
        evaluate({"q7": {"a": 1}}, {"q7": {"a": 0.3, "b": float("nan")}}, "mrr")
    with pytest.raises(ValueError, match="'q7'.*NaN"):
        evaluate({"q7": {"a": 1}}, {"q7": Ranking("q7", ("a", "b"), (1.0, float("nan")))}, "mrr")


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="more than once"):
        evaluate({"q": {"a": 1}}, {"q": Ranking("q", ("a", "a"), (2.0, 1.0))}, "mrr")
    with pytest.raises(TypeError, match="must be an int"):
        evaluate({"q": {"a": 1.0}}, {"q": {"a": 1.0}}, "mrr")  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="Ranking or a mapping"):
        evaluate({"q": {"a": 1}}, {"q": ["a", "b"]}, "mrr")  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="no query in qrels has a relevant item"):
        evaluate({"q": {"a": 0}}, {"q": {"a": 1.0}}, "mrr")
    with pytest.raises(ValueError, match="no query in qrels has a relevant item"):
        evaluate({}, {}, "mrr")


# ---------------------------------------------------------------------------
# Cross-check against ranx
# ---------------------------------------------------------------------------


def _random_case(seed: int = 13) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """~200 graded queries: short runs (<= 15 items) with heavy ties, long tie-free runs,
    queries missing from the run and run queries missing from qrels."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i:03d}" for i in range(300)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for qi in range(200):
        qid = f"q{qi:03d}"
        docs = rng.choice(pool, size=8, replace=False)
        n_rel = int(rng.integers(1, 5))
        qrels[qid] = {str(d): int(rng.integers(1, 4)) for d in docs[:n_rel]}
        qrels[qid].update({str(d): 0 for d in docs[n_rel : n_rel + 2]})  # judged non-relevant
        if qi % 20 == 7:
            continue  # missing from the run
        if qi % 2 == 0:
            # short run with many tied scores (ranx's numba sort is stable up to 15 items)
            n = int(rng.integers(1, 16))
            scores = rng.integers(0, 4, size=n).astype(float)
        else:
            # long run, tie-free scores
            n = int(rng.integers(16, 101))
            scores = rng.random(n)
        judged = [str(d) for d in docs[: n_rel + 2]]
        kept = [d for d in judged if rng.random() < 0.8]  # most judged items are retrieved
        others = [d for d in map(str, rng.permutation(pool)) if d not in judged]
        picked = (kept + others)[:n]
        picked = [picked[i] for i in rng.permutation(len(picked))]  # random rank order
        run[qid] = dict(zip(picked, scores.tolist(), strict=True))
    for qi in range(5):
        run[f"extra{qi}"] = {"d000": 1.0, "d001": 0.5}  # not in qrels
    return qrels, run


@pytest.mark.filterwarnings("ignore::Warning")  # numba type-safety warnings inside ranx
def test_cross_check_with_ranx() -> None:
    ranx = pytest.importorskip("ranx")
    qrels, run = _random_case()
    names = ["ndcg@5", "ndcg@10", "recall@5", "precision@5", "map", "mrr", "hit_rate@5"]

    ranx_run = ranx.Run(run)
    ranx_means = ranx.evaluate(ranx.Qrels(qrels), ranx_run, names, make_comparable=True)
    means, per_query = evaluate(qrels, run, names, return_per_query=True)
    # Tie-free runs or ties within <= 15 items: ranx's order equals medrank's stable rule.
    assert sum(1 for q in qrels if q not in run) == 10
    for name in names:
        assert means[name] == pytest.approx(float(ranx_means[name]), abs=1e-6), name
        ranx_per_query = dict(ranx_run.scores[name])
        assert set(ranx_per_query) == set(per_query[name])
        for qid, value in per_query[name].items():
            assert value == pytest.approx(float(ranx_per_query[qid]), abs=1e-6), (name, qid)

    # The same run given as already-ranked Ranking objects gives identical scores.
    ranked = {
        qid: Ranking.from_pairs(qid, sorted(items.items(), key=lambda kv: -kv[1]))  # stable
        for qid, items in run.items()
    }
    assert evaluate(Qrels(qrels), ranked, names) == pytest.approx(means, abs=1e-12)


# ---------------------------------------------------------------------------
# Set-based metrics, binary classification, markdown table
# ---------------------------------------------------------------------------


def test_exact_set_accuracy() -> None:
    gold = [{"a"}, {"a", "b"}, {"c"}]
    pred = [{"a"}, {"a"}, {"d"}]  # only the first is exactly right
    assert exact_set_accuracy(gold, pred) == pytest.approx(1 / 3)
    assert exact_set_accuracy([{"a", "b"}], [["b", "a", "a"]]) == 1.0  # type: ignore[list-item]
    with pytest.raises(TypeError, match="wrap it"):
        exact_set_accuracy(["a"], [{"a"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="2 examples"):
        exact_set_accuracy([{"a"}, {"b"}], [{"a"}])
    with pytest.raises(ValueError, match="no examples"):
        exact_set_accuracy([], [])


def test_set_prf_micro_and_macro() -> None:
    gold = [{"a"}, {"a", "b"}, {"c"}]
    pred = [{"a"}, {"a"}, {"c", "d"}]
    # micro: tp = 1 + 1 + 1 = 3, |pred| = 4, |gold| = 4 -> P = R = F1 = 3/4
    assert set_prf(gold, pred) == pytest.approx({"precision": 0.75, "recall": 0.75, "f1": 0.75})
    # macro: (P, R, F1) per example = (1, 1, 1), (1, 1/2, 2/3), (1/2, 1, 2/3)
    # P = (1 + 1 + 1/2)/3 = 5/6, R = 5/6, F1 = (1 + 2/3 + 2/3)/3 = 7/9
    assert set_prf(gold, pred, average="macro") == pytest.approx(
        {"precision": 5 / 6, "recall": 5 / 6, "f1": 7 / 9}
    )
    # empty prediction: zero division -> 0; both empty counts as perfect in macro
    assert set_prf([{"a"}], [set()]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert set_prf([set()], [set()], average="macro") == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    with pytest.raises(ValueError, match="micro"):
        set_prf(gold, pred, average="weighted")  # type: ignore[arg-type]


def test_evaluate_sets_split_by_size() -> None:
    gold = [{"a"}, {"b"}, {"a", "b"}, {"c", "d"}]
    pred = [{"a"}, {"x"}, {"b", "a"}, {"c"}]
    res = evaluate_sets(gold, pred)
    # total 2/4; single-term: 1 of 2; multi-term: 1 of 2
    assert res == {"total": 0.5, "n_total": 4, "single": 0.5, "n_single": 2, "multi": 0.5, "n_multi": 2}
    assert evaluate_sets(gold, pred, split_by_size=False) == {"total": 0.5, "n_total": 4}
    only_single = evaluate_sets([{"a"}], [{"a"}])
    assert only_single["single"] == 1.0 and math.isnan(only_single["multi"]) and only_single["n_multi"] == 0
    with pytest.raises(ValueError, match=r"gold\[1\] is empty"):
        evaluate_sets([{"a"}, set()], [{"a"}, set()])


def test_binary_prf() -> None:
    # tp = 2 (idx 0, 4), fp = 1 (idx 3), fn = 1 (idx 1), tn = 1 (idx 2)
    res = binary_prf([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    assert res == pytest.approx({"accuracy": 3 / 5, "precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})
    assert binary_prf([True, False], [False, False]) == {
        "accuracy": 0.5,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    with pytest.raises(ValueError, match="0/1"):
        binary_prf([0, 2], [0, 1])
    with pytest.raises(ValueError, match="2 labels"):
        binary_prf([0, 1], [0])
    with pytest.raises(ValueError, match="no labels"):
        binary_prf([], [])


def test_to_markdown_table() -> None:
    rows = {"bm25": {"ndcg@10": 0.5, "MRR": 0.123456}, "dense": {"ndcg@10": 0.75, "mrr": float("nan")}}
    table = to_markdown_table(rows, ["ndcg@10", "mrr", "map"])
    assert table == (
        "| system | ndcg@10 | mrr | map |\n"
        "| --- | ---: | ---: | ---: |\n"
        "| bm25 | 50.00 | 12.35 | - |\n"
        "| dense | 75.00 | - | - |"
    )
    assert to_markdown_table({"a|b": {"f1": 0.5}}, ["f1"], scale=1, digits=3).splitlines()[-1] == (
        "| a\\|b | 0.500 |"
    )
    with pytest.raises(ValueError, match="digits"):
        to_markdown_table(rows, ["mrr"], digits=-1)


def test_records_refuse_shapes_that_would_silently_misbehave():
    from medrank.records import Concept, Dialogue, DialogueTurn, Qrels, Ranking, require_texts

    with pytest.raises(TypeError, match="synonyms"):
        Concept("a", "b", synonyms="xyz")  # would index one synonym per character
    assert Concept("a", "b", synonyms=["c", "c"]).names == ("b", "c")
    with pytest.raises(TypeError):
        Dialogue("d", "hello")
    with pytest.raises(TypeError, match="Dialogue.id"):
        Dialogue(None, ())
    assert Dialogue("d", [DialogueTurn("doctor", "hi")]).turns == (DialogueTurn("doctor", "hi"),)
    with pytest.raises(TypeError, match="scores must be numbers"):
        Ranking("q", ("a",), ("x",))
    with pytest.raises(ValueError, match="non-negative"):
        Ranking("q", ("a", "b"), (2.0, 1.0)).top(-1)
    with pytest.raises(TypeError, match="ids must be strings"):
        Qrels({1: {"a": 1}})
    with pytest.raises(TypeError, match="list of questions"):
        require_texts("头痛怎么办", "question")
    with pytest.raises(ValueError, match="question 1 must be a non-empty string"):
        require_texts(["a", " "], "question")
