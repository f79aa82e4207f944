"""How likely the patient's condition is one the collection lacks: an open-world class beside the conditions.

The naive Bayes normalises over the collection's conditions, so a complaint that none of them explains still gets a
confident top condition (DDXPlus has no knee or stomach condition, yet a swollen knee or vomiting get one). An
*outside* class with prior ``outside_prior`` and likelihood
:meth:`~medrank.pipelines.history.inquiry.posterior.NaiveBayes.log_outside` (the collection's mean likelihood per
finding, a stated finding at least ``leak``) takes its share:

    P(outside | x) = π P(x | outside) / (π P(x | outside) + (1 - π) Σ_c P(c) P(x | c))

and each condition's probability is its (tempered) posterior times 1 - P(outside | x).

π and the leak are fitted by leaving conditions out (:func:`leave_conditions_out`): the conditions are dealt into
folds; for each fold the tables are fitted without its conditions, and patients of every condition are read at the
inquiry states the engine reaches. A patient of a left-out condition is the outside class. The pair with the lowest
log loss of P(outside) over those cases is kept (:func:`fit_outside`). One fold in ``folds`` is left out each time,
so the outside share of the cases, and with it π, follows from the number of folds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.kb import Patient
from medrank.pipelines.history.inquiry.posterior import outside_probability

__all__ = ["FOLDS", "LEAKS", "OUTSIDE_PRIORS", "STATE_BUDGETS", "OutsideCase", "condition_folds", "fit_outside",
           "leave_conditions_out", "outside_probability"]

#: the priors and leaks :func:`fit_outside` tries
OUTSIDE_PRIORS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
LEAKS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
#: inquiry states read per patient: after the opening, and after this many questions
STATE_BUDGETS = (0, 5, 30)
FOLDS = 5


@dataclass
class OutsideCase:
    """One patient at one inquiry state, read by tables fitted without some conditions."""

    model: Any  # the fold's NaiveBayes
    observed: dict[str, Any]
    outside: bool  # the patient's condition was left out of the fold's tables
    budget: int
    condition: str
    log_inside: float  # log Σ_c P(c) P(x | c) under the fold's tables

    def log_outside(self, leak: float) -> float:
        return float(self.model.log_outside(self.observed, leak))


def condition_folds(conditions: Sequence[str], folds: int = FOLDS, seed: int = 0) -> list[list[str]]:
    """The conditions dealt into ``folds`` folds in a seeded order."""
    order = np.random.default_rng(seed).permutation(len(conditions))
    return [[conditions[i] for i in order[f::folds]] for f in range(folds)]


def leave_conditions_out(conditions: Sequence[str], train: Sequence[Patient], read: Sequence[Patient],
                         make_engine: Callable[[Sequence[Patient], Sequence[str]], Any],
                         budgets: Sequence[int] = STATE_BUDGETS, folds: int = FOLDS, seed: int = 0) -> list[OutsideCase]:
    """Cases for fitting or measuring the outside class: for each fold of conditions, an engine fitted by
    ``make_engine(patients, kept conditions)`` on ``train`` without that fold reads every patient of ``read`` at the
    states its inquiries of each of ``budgets`` questions reach."""
    from medrank.pipelines.history.inquiry.simulate import inquiry_states_at

    cases = []
    for held in condition_folds(list(conditions), folds, seed):
        kept = [c for c in conditions if c not in set(held)]
        engine = make_engine([p for p in train if p.condition in set(kept)], kept)
        for budget, states in inquiry_states_at(engine, read, budgets).items():
            for patient, observed in zip(read, states, strict=True):
                joint = engine.model.log_joint(observed)
                cases.append(OutsideCase(engine.model, observed, patient.condition in set(held), budget,
                                         patient.condition, float(np.logaddexp.reduce(joint))))
    return cases


def fit_outside(cases: Sequence[OutsideCase], priors: Sequence[float] = OUTSIDE_PRIORS,
                leaks: Sequence[float] = LEAKS) -> tuple[float, float, dict[str, Any]]:
    """(outside prior, leak) with the lowest log loss over ``cases``, and what was tried."""
    if not cases or not any(c.outside for c in cases) or all(c.outside for c in cases):
        raise ValueError("fitting the outside class needs cases of left-out and of kept conditions")
    # log P(x | outside) per leak, once per case
    by_leak = {leak: np.array([c.log_outside(leak) for c in cases]) for leak in leaks}
    inside = np.array([c.log_inside for c in cases])
    target = np.array([c.outside for c in cases])
    grid = {}
    for leak, outside in by_leak.items():
        for prior in priors:
            a = np.log1p(-prior) + inside
            b = np.log(prior) + outside
            log_p_out = b - np.logaddexp(a, b)
            log_p_in = a - np.logaddexp(a, b)
            grid[(prior, leak)] = float(-np.where(target, log_p_out, log_p_in).mean())
    (prior, leak), loss = min(grid.items(), key=lambda kv: (kv[1], kv[0]))
    return prior, leak, {"log_loss": round(loss, 4), "cases": len(cases), "outside_cases": int(target.sum()),
                         "priors": list(priors), "leaks": list(leaks)}
