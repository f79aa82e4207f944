"""The differential's outside class (medrank.pipelines.history.inquiry.outside): its likelihood, its probability and
its fit, hand-computed on a two-condition model. How well it tells patients of conditions the tables lack from the
others is measured by bench/differential_outside.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrank.pipelines.history.inquiry import Calibration, Finding, InquiryEngine
from medrank.pipelines.history.inquiry.outside import (
    LEAKS,
    SHRINKS,
    OutsideCase,
    condition_folds,
    fit_outside,
    outside_probability,
)
from medrank.pipelines.history.inquiry.posterior import NaiveBayes, Variable


def _model() -> NaiveBayes:
    """Two equally likely conditions. A: both show it (0.9 / 0.1); Z: no training case of either shows it (each
    keeps the floor 0.001); M: multi-choice, c0 shows value x."""
    return NaiveBayes(["c0", "c1"], np.log([0.5, 0.5]), {
        "A": Variable("A", "B", "A", yes=np.array([0.9, 0.1]), no=np.array([0.1, 0.9]), seen=np.array([True, True])),
        "Z": Variable("Z", "B", "Z", yes=np.array([0.001, 0.001]), no=np.array([0.999, 0.999]),
                      seen=np.array([False, False])),
        "M": Variable("M", "M", "M", values=("none", "x"), default="none", probs=np.array([[0.0, 0.6], [0.0, 0.001]]),
                      seen=np.array([[False, True], [False, False]])),
    })


def test_the_outside_likelihood_is_the_mean_and_a_leak_for_what_no_condition_shows() -> None:
    m = _model()
    assert m.log_outside({"A": "present"}, 0.1) == pytest.approx(math.log(0.5 * 0.9 + 0.5 * 0.1))
    assert m.log_outside({"Z": "present"}, 0.1) == pytest.approx(math.log(0.1))  # the leak, not the floor
    assert m.log_outside({"Z": "absent"}, 0.1) == pytest.approx(math.log(0.999))  # an absent answer keeps the mean
    assert m.log_outside({"M": ("x",)}, 0.1) == pytest.approx(math.log(0.5 * 0.6 + 0.5 * 0.001))  # c0 shows x
    assert m.log_outside({"A": "present", "Z": "present"}, 0.1) == pytest.approx(math.log(0.5) + math.log(0.1))
    assert m.states_present("M", ("x",)) and not m.states_present("M", ("none",)) and not m.states_present("A", "unsure")
    assert m.log_joint({"A": "present"}) == pytest.approx(np.log([0.45, 0.05]))


def test_with_a_shrink_the_outside_likelihood_lets_findings_go_together() -> None:
    # A and B: c0 shows both (0.9), c1 neither (0.1). The product of the means takes them as independent outside
    # (0.5 * 0.5); drawn halfway to the mean, each condition's likelihoods are (0.7, 0.3) and the mixture keeps that
    # they go together: 0.5 * 0.7^2 + 0.5 * 0.3^2; with no shrink at all it is the collection's own evidence
    yes, no, seen = np.array([0.9, 0.1]), np.array([0.1, 0.9]), np.array([True, True])
    m = NaiveBayes(["c0", "c1"], np.log([0.5, 0.5]), {n: Variable(n, "B", n, yes=yes, no=no, seen=seen) for n in "AB"})
    both = {"A": "present", "B": "present"}
    assert m.log_outside(both, 0.1) == pytest.approx(math.log(0.25))
    assert m.log_outside(both, 0.1, 1.0) == pytest.approx(math.log(0.25))
    assert m.log_outside(both, 0.1, 0.5) == pytest.approx(math.log(0.5 * 0.49 + 0.5 * 0.09))
    assert m.log_outside(both, 0.1, 0.0) == pytest.approx(float(np.logaddexp.reduce(m.log_joint(both))))
    assert m.log_outside({"A": "present"}, 0.1, 0.5) == pytest.approx(math.log(0.5))  # one finding: the mean
    # the leak is still the least likelihood of what no condition shows, here mixed as the mean is
    z = _model()
    assert z.log_outside({"A": "present", "Z": "present"}, 0.1, 0.5) == pytest.approx(
        math.log(0.5 * 0.7 * 0.0505 + 0.5 * 0.3 * 0.0505))
    with pytest.raises(ValueError, match="shrink"):
        m.log_outside(both, 0.1, 1.5)


def test_the_outside_probability_by_hand() -> None:
    # Z stated: inside evidence 0.001, outside 0.1; prior 0.2 -> 0.02 / (0.02 + 0.8 * 0.001)
    assert outside_probability(math.log(0.001), math.log(0.1), 0.2) == pytest.approx(0.02 / 0.0208)
    assert outside_probability(math.log(0.5), math.log(0.5), 0.2) == pytest.approx(0.2)  # nothing tells: the prior
    assert outside_probability(0.0, 0.0, 0.0) == 0.0  # closed world


def test_an_open_world_engine_shares_the_probability_with_the_outside_class() -> None:
    model = _model()
    labels = {n: f"Do you have {n}?" for n in model.variables}
    closed = InquiryEngine("en", model, labels, {"c0": "Zero", "c1": "One"}, Calibration(budget=3))
    found = [Finding("Z", "present", "self-report")]
    assert not closed.open_world and closed.outside_probability(found) is None
    assert sum(c.probability for c in closed.differential(found)) == pytest.approx(1.0)
    opened = InquiryEngine("en", model, labels, {"c0": "Zero", "c1": "One"},
                           Calibration(budget=3, outside_prior=0.2, outside_leak=0.1))
    p_out = opened.outside_probability(found)
    assert p_out == pytest.approx(0.02 / 0.0208)
    ranked = opened.differential(found)
    assert [c.probability for c in ranked] == pytest.approx([0.5 * (1 - p_out)] * 2, abs=1e-6)
    assert sum(c.probability for c in ranked) + p_out == pytest.approx(1.0, abs=1e-5)


class _Fixed:
    """A fold model whose outside likelihood is log(leak) (a case the leak explains) or fixed."""

    def __init__(self, follows_leak: bool) -> None:
        self.follows_leak = follows_leak

    def log_outside(self, observed, leak, shrink=1.0):
        return math.log(leak) if self.follows_leak else math.log(0.001)


def test_the_fit_keeps_the_leak_and_prior_with_the_lowest_log_loss() -> None:
    # outside cases: a finding no kept condition shows (the leak explains them); kept cases: explained inside
    cases = [OutsideCase(_Fixed(True), {}, True, 5, "x", math.log(0.001)) for _ in range(10)]
    cases += [OutsideCase(_Fixed(False), {}, False, 5, "y", math.log(0.5)) for _ in range(40)]
    prior, leak, shrink, info = fit_outside(cases)
    # the stand-in ignores the shrink: every shrink ties, and the one-standard-error rule keeps the product of the means
    assert leak == max(LEAKS) and shrink == max(SHRINKS) == 1.0
    assert info["best_per_shrink"]["1.0"]["outside_leak"] == max(LEAKS)
    constant = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))  # the outside share, said to every case
    assert info["log_loss"] < constant and info["outside_cases"] == 10 and info["cases"] == 50
    with pytest.raises(ValueError, match="left-out"):
        fit_outside(cases[10:])


def test_the_fit_draws_the_likelihoods_in_where_the_left_out_findings_go_together() -> None:
    # left-out patients state A and B together (their condition is none of the two: little inside evidence); kept
    # ones state A without B. Findings that go together are likelier outside under a shrink than as independent
    # means, and A without B less likely: the fit keeps a shrink below 1
    yes, no, seen = np.array([0.9, 0.1]), np.array([0.1, 0.9]), np.array([True, True])
    m = NaiveBayes(["c0", "c1"], np.log([0.5, 0.5]), {n: Variable(n, "B", n, yes=yes, no=no, seen=seen) for n in "AB"})
    kept = {"A": "present", "B": "absent"}
    cases = [OutsideCase(m, {"A": "present", "B": "present"}, True, 5, "x", math.log(0.01)) for _ in range(10)]
    cases += [OutsideCase(m, kept, False, 5, "y", float(np.logaddexp.reduce(m.log_joint(kept)))) for _ in range(40)]
    prior, leak, shrink, info = fit_outside(cases)
    assert shrink < 1.0 and info["log_loss"] < info["best_per_shrink"]["1.0"]["log_loss"]
    assert cases[0].log_outside(leak, shrink) == pytest.approx(m.log_outside(cases[0].observed, leak, shrink))


def test_condition_folds_deal_every_condition_once() -> None:
    conditions = [f"c{i}" for i in range(12)]
    folds = condition_folds(conditions, 5, seed=3)
    assert len(folds) == 5 and sorted(c for f in folds for c in f) == sorted(conditions)
    assert folds == condition_folds(conditions, 5, seed=3) and folds != condition_folds(conditions, 5, seed=4)


@pytest.mark.slow
def test_the_real_english_engine_weighs_a_condition_outside_its_49_and_the_chinese_one_does_not() -> None:
    from medrank.pipelines.history.inquiry import load_engine
    from medrank.pipelines.history.inquiry.outside import OUTSIDE_PRIORS

    en = load_engine("en")
    assert en.open_world and en.calibration.outside_prior in OUTSIDE_PRIORS and en.calibration.outside_leak in LEAKS
    assert en.calibration.outside_shrink in SHRINKS
    found = en.detect_findings("I have a fever and a sore throat")
    p_out = en.outside_probability(found)
    assert p_out is not None and 0.0 < p_out < 0.5
    ranked = en.differential(found, k=len(en.model.conditions), dialogue=["I have a fever and a sore throat"])
    assert sum(c.probability for c in ranked) + p_out == pytest.approx(1.0, abs=1e-3)
    zh = load_engine("zh")
    assert not zh.open_world and zh.outside_probability(zh.detect_findings("孩子发烧两天")) is None
