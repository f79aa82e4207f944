"""How likely the patient's condition is one the collection lacks: an open-world class beside the conditions.

The naive Bayes normalises over the collection's conditions, so a complaint that none of them explains still gets a
confident top condition (DDXPlus has no knee or stomach condition, yet a swollen knee or vomiting get one). An
*outside* class with prior ``outside_prior`` and likelihood
:meth:`~medrank.pipelines.history.inquiry.posterior.NaiveBayes.log_outside` (a listed condition's likelihoods drawn
by ``shrink`` towards the collection's mean likelihood per finding, a stated finding at least ``leak``, mixed over the
conditions) takes its share:

    P(outside | x) = π P(x | outside) / (π P(x | outside) + (1 - π) Σ_c P(c) P(x | c))

and each condition's probability is its (tempered) posterior times 1 - P(outside | x).

π, the leak and the shrink are fitted by leaving conditions out (:func:`leave_conditions_out`): the conditions are dealt into
folds; for each fold the tables are fitted without its conditions, and patients of every condition are read at the
inquiry states the engine reaches. A patient of a left-out condition is the outside class. The setting with the lowest
log loss of P(outside) over those cases is kept, or, within one standard error of it, the one nearest the product of
the means (:func:`fit_outside`). One fold in ``folds`` is left out each time,
so the outside share of the cases, and with it π, follows from the number of folds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.kb import Patient
from medrank.pipelines.history.inquiry.posterior import outside_log_likelihood, outside_probability

__all__ = ["FOLDS", "LEAKS", "OUTSIDE_PRIORS", "SHRINKS", "STATE_BUDGETS", "OutsideCase", "condition_folds",
           "fit_outside", "leave_conditions_out", "outside_probability"]

#: the priors, leaks and shrinks :func:`fit_outside` tries (shrink 1: the product of the means, as first served)
OUTSIDE_PRIORS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
LEAKS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
SHRINKS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
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

    def log_outside(self, leak: float, shrink: float = 1.0) -> float:
        return float(self.model.log_outside(self.observed, leak, shrink))


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
                leaks: Sequence[float] = LEAKS,
                shrinks: Sequence[float] = SHRINKS) -> tuple[float, float, float, dict[str, Any]]:
    """(outside prior, leak, shrink) by log loss over ``cases`` under the one-standard-error rule (see below), and
    what was tried."""
    if not cases or not any(c.outside for c in cases) or all(c.outside for c in cases):
        raise ValueError("fitting the outside class needs cases of left-out and of kept conditions")
    # what the outside likelihood weighs, read once per case for the whole grid (None: a stand-in model without tables)
    parts = [c.model.outside_terms(c.observed) if hasattr(c.model, "outside_terms") else None for c in cases]

    def log_outside(i: int, leak: float, shrink: float) -> float:
        if parts[i] is None:
            return cases[i].log_outside(leak, shrink)
        likelihoods, means, leakable, prior = parts[i]  # type: ignore[misc]
        return outside_log_likelihood(likelihoods, np.where(leakable, np.maximum(means, leak), means), prior, shrink)

    # log P(x | outside) per (leak, shrink), once per case
    by_setting = {(leak, shrink): np.array([log_outside(i, leak, shrink) for i in range(len(cases))])
                  for leak in leaks for shrink in shrinks}
    inside = np.array([c.log_inside for c in cases])
    target = np.array([c.outside for c in cases])
    def losses(prior: float, leak: float, shrink: float) -> np.ndarray:
        a = np.log1p(-prior) + inside
        b = np.log(prior) + by_setting[(leak, shrink)]
        return -np.where(target, b - np.logaddexp(a, b), a - np.logaddexp(a, b))

    grid = {(prior, leak, shrink): float(losses(prior, leak, shrink).mean())
            for (leak, shrink) in by_setting for prior in priors}
    best = min(grid, key=lambda k: (grid[k], k))
    # the one-standard-error rule (Breiman et al., 1984): of the settings whose loss is within one standard error of
    # the least, the one nearest the product of the means (the largest shrink, then the largest leak); a setting
    # further from it must be better by more than the fit's noise
    bound = grid[best] + float(losses(*best).std(ddof=1) / np.sqrt(len(cases)))
    prior, leak, shrink = max((k for k in grid if grid[k] <= bound), key=lambda k: (k[2], k[1], -grid[k]))
    loss = grid[(prior, leak, shrink)]
    # per shrink, its best prior and leak: what a fixed shrink (1, the product of the means) would have served
    per_shrink = {}
    for s in shrinks:
        (p, lk, _), lo = min(((k, v) for k, v in grid.items() if k[2] == s), key=lambda kv: (kv[1], kv[0]))
        per_shrink[str(s)] = {"outside_prior": p, "outside_leak": lk, "log_loss": round(lo, 4)}
    return prior, leak, shrink, {"log_loss": round(loss, 4), "least_log_loss": round(grid[best], 4),
                                 "one_standard_error": round(bound - grid[best], 4), "cases": len(cases),
                                 "outside_cases": int(target.sum()), "priors": list(priors), "leaks": list(leaks),
                                 "shrinks": list(shrinks), "best_per_shrink": per_shrink}
