"""Naive-Bayes posterior over conditions from established findings.

Every finding is a variable with a likelihood table per condition:

* binary (``B``): ``yes[c]`` = P(answer "present" | c) and ``no[c]`` = P(answer "absent" | c). In
  DDXPlus ``no = 1 - yes`` (a binary evidence not in the record is absent); in DXY a symptom may
  not be in the record at all, so ``yes + no <= 1`` and the rest is "not sure". A "not sure" answer
  leaves the posterior unchanged (it says nothing about the patient).
* categorical (``C``): one value per patient, ``probs[c, v]``.
* multi-choice (``M``): a set of values, each non-default value an independent Bernoulli
  ``probs[c, v]`` (the default value means "none of them"). An answer names the values that hold, and so
  also that the others do not. Values read from the patient's words are weaker (:class:`AnyOf`): "a
  headache" names the head, which DDXPlus splits into forehead, top and back of the head; the text says
  that the pain is at one of those at least, and nothing of the other locations. Their likelihood is
  P(at least one of them | c) = 1 - prod_v (1 - probs[c, v]); read as three answers, it would count one
  word three times over and deny pain everywhere else.

A knowledge base may also code one complaint as two findings (:class:`Observation`): DDXPlus asks "Do you have a sore
throat?" and, apart, whether there is pain at the pharynx, and its conditions use one or the other (its URTI cases
answer the first, its viral pharyngitis cases the second). Words that read as both say that one of them holds: their
likelihood is P(at least one | c) = 1 - prod_f (1 - P(f | c)), as for the values of :class:`AnyOf`; read as two
findings, each condition that uses one coding would be charged the floor probability of the other.

The tables are estimated from training patients with additive smoothing, and only where the
knowledge base links the condition to the finding (its ``support``); elsewhere the finding keeps a
small floor probability ``floor`` (DDXPlus patients never show an evidence outside their condition's
lists, but a user may report one). Age (bands) and sex are categorical features of every condition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.kb import Evidence, InquiryInputError, Patient

PRESENT, ABSENT, UNSURE = "present", "absent", "unsure"
#: lower edges of the age bands (years)
AGE_BANDS = (0, 1, 5, 15, 30, 45, 60, 75)


class AnyOf(tuple):
    """Values of a multi-choice finding of which at least one holds, the others unknown (read from free text)."""

    __slots__ = ()


class Observation(dict):
    """Observed findings (name -> value) with ``alternatives``: groups of finding names that are codings of one
    statement read from the patient's words, at least one of which holds (see the module docstring). A plain dict
    is an observation without alternatives."""

    def __init__(self, *args: Any, alternatives: Sequence[Sequence[str]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alternatives: tuple[tuple[str, ...], ...] = tuple(tuple(g) for g in alternatives)


def alternative_groups(observed: Mapping[str, Any], present: Callable[[str, Any], bool]) -> list[tuple[str, ...]]:
    """The groups of ``observed``'s alternative codings (groups sharing a finding joined) whose members are all
    observed and stated present (``present(name, value)``), each with two members at least."""
    groups: list[set[str]] = []
    for group in getattr(observed, "alternatives", ()):
        members = {n for n in group if n in observed and present(n, observed[n])}
        if len(members) < 2:
            continue
        for other in [g for g in groups if g & members]:
            members |= other
            groups.remove(other)
        groups.append(members)
    return [tuple(sorted(g)) for g in groups]


def age_band(age: int) -> int:
    return int(np.searchsorted(AGE_BANDS, age, side="right") - 1)


@dataclass
class Variable:
    """Likelihood table of one finding."""

    name: str
    kind: str  # "B" | "C" | "M"
    group: str
    yes: np.ndarray | None = None  # B: (C,)
    no: np.ndarray | None = None  # B: (C,)
    values: tuple[str, ...] = ()  # C / M
    default: str = ""
    probs: np.ndarray | None = None  # C: (C, V) rows sum to 1; M: (C, V) Bernoulli per value
    #: whether a training case of each condition showed the finding present (B: (C,)) or each value (M: (C, V));
    #: None: not known, or a categorical finding (its values are grades, 0-10, not findings of their own)
    seen: np.ndarray | None = None

    def value_index(self, value: str) -> int:
        try:
            return self.values.index(value)
        except ValueError:
            raise InquiryInputError(f"finding {self.name}: unknown value {value!r}; "
                                    f"known values: {', '.join(self.values[:20])}") from None


#: at most this many log-likelihood rows are kept per model
MAX_CACHED_ROWS = 100_000


def _safe_log(x: np.ndarray) -> np.ndarray:
    return np.log(np.clip(x, 1e-12, 1.0))


def entropy(p: np.ndarray, axis: int = 0) -> np.ndarray:
    """Shannon entropy (nats) of distributions along ``axis`` (normalised first)."""
    from scipy.special import entr  # -x log x, 0 at 0

    p = np.asarray(p, dtype=np.float64)
    total = p.sum(axis=axis, keepdims=True)
    return entr(p / np.maximum(total, 1e-300)).sum(axis=axis)


class NaiveBayes:
    """Posterior over ``conditions`` from a mapping finding name -> observed value."""

    def __init__(self, conditions: Sequence[str], log_prior: np.ndarray, variables: Mapping[str, Variable],
                 demographics: Mapping[str, np.ndarray] | None = None) -> None:
        self.conditions = list(conditions)
        self.log_prior = np.asarray(log_prior, dtype=np.float64)
        self.variables = dict(variables)
        self.demographics = dict(demographics or {})  # "age" -> (C, bands), "sex" -> (C, 2) [M, F]
        #: (finding, value) -> its log-likelihood row, read-only: an inquiry asks for the same rows again and again
        self._rows: dict[tuple[str, Any], np.ndarray] = {}

    # ------------------------------------------------------------------ likelihoods
    def log_likelihood(self, name: str, value: Any) -> np.ndarray:
        """Log P(value | c) for every condition; zeros for "not sure" (a read-only array)."""
        key = (name, value if isinstance(value, str | int | float)
               else (type(value).__name__, *sorted(value)))
        row = self._rows.get(key)
        if row is None:
            row = self._log_likelihood(name, value)
            row.flags.writeable = False
            if len(self._rows) < MAX_CACHED_ROWS:  # bounded: a service sees choice combinations without end
                self._rows[key] = row
        return row

    def _log_likelihood(self, name: str, value: Any) -> np.ndarray:
        n = len(self.conditions)
        if value == UNSURE:
            return np.zeros(n)
        if name in self.demographics:
            table = self.demographics[name]
            if name == "age":
                return _safe_log(table[:, age_band(int(value))])
            return _safe_log(table[:, 0 if value == "M" else 1])
        var = self.variables[name]
        if var.kind == "B":
            if value == PRESENT:
                return _safe_log(var.yes)
            return _safe_log(var.no)
        assert var.probs is not None
        if var.kind == "C":
            if value == ABSENT:
                value = var.default
            if value == PRESENT:  # some non-default value, which one unknown
                return _safe_log(1.0 - var.probs[:, var.value_index(var.default)])
            return _safe_log(var.probs[:, var.value_index(value)])
        chosen = {value} if isinstance(value, str) else set(value)
        mask = np.array([v != var.default for v in var.values])
        p = var.probs[:, mask]
        if isinstance(value, AnyOf):
            named = var.probs[:, [var.value_index(v) for v in sorted(chosen)]]
            return _safe_log(1.0 - np.prod(1.0 - named, axis=1))
        if chosen == {PRESENT}:
            return _safe_log(1.0 - np.prod(1.0 - p, axis=1))
        if chosen <= {ABSENT, var.default}:
            return _safe_log(1.0 - p).sum(axis=1)
        picked = np.array([v in chosen for v in np.array(var.values)[mask]])
        for v in chosen:
            var.value_index(v)
        return (_safe_log(p[:, picked]).sum(axis=1) + _safe_log(1.0 - p[:, ~picked]).sum(axis=1))

    def shown(self, name: str, value: Any) -> np.ndarray:
        """Per condition, whether its training cases show this present finding (every value of a multi-choice
        one): a condition that never does leaves it unexplained, however the smoothed tables rank it. Absent and
        not-sure answers, grades of a categorical finding, age and sex are shown by every condition."""
        n = len(self.conditions)
        var = self.variables.get(name)
        if var is None or var.seen is None or var.kind == "C" or value in (ABSENT, UNSURE):
            return np.ones(n, dtype=bool)
        if var.kind == "B":
            return var.seen.copy() if value == PRESENT else np.ones(n, dtype=bool)
        chosen = [v for v in ((value,) if isinstance(value, str) else tuple(value)) if v != var.default]
        if PRESENT in chosen:  # some value, which one unknown: any value the condition showed
            return var.seen[:, [i for i, v in enumerate(var.values) if v != var.default]].any(axis=1)
        if isinstance(value, AnyOf):  # one of the values read holds: a condition showing any of them explains it
            return var.seen[:, [var.value_index(v) for v in chosen]].any(axis=1)
        out = np.ones(n, dtype=bool)
        for v in chosen:
            out &= var.seen[:, var.value_index(v)]
        return out

    def factors(self, observed: Mapping[str, Any]) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """The log-likelihood rows the observation multiplies: one per finding, one per group of alternative codings
        (:class:`Observation`: log P(at least one of them | c), the group's findings left out on their own)."""
        groups = alternative_groups(observed, self.states_present)
        grouped = {n for g in groups for n in g}
        out = [((name,), self.log_likelihood(name, value)) for name, value in observed.items() if name not in grouped]
        for group in groups:
            none = np.prod([1.0 - np.exp(self.log_likelihood(n, observed[n])) for n in group], axis=0)
            out.append((group, _safe_log(1.0 - none)))
        return out

    def log_joint(self, observed: Mapping[str, Any], base: np.ndarray | None = None) -> np.ndarray:
        """log P(condition, observed) for every condition (unnormalised); ``base`` replaces the log prior."""
        logp = (self.log_prior if base is None else np.asarray(base, dtype=np.float64)).copy()
        for _, row in self.factors(observed):
            logp += row
        return logp

    def log_posterior(self, observed: Mapping[str, Any], base: np.ndarray | None = None) -> np.ndarray:
        """Normalised log posterior; ``base`` replaces the log prior (e.g. a prior from the self-report)."""
        logp = self.log_joint(observed, base)
        return logp - np.logaddexp.reduce(logp)

    def log_outside(self, observed: Mapping[str, Any], leak: float, shrink: float = 1.0) -> float:
        """log P(observed | a condition outside the collection), the likelihood of an open-world class.

        A patient whose condition the collection lacks answers like the collection's patients on average (per
        finding, the prior-weighted mean m_f of the conditions' likelihoods), except for a finding stated present that
        no condition's training cases show: an unlisted condition shows it with probability ``leak``, where every
        listed condition only keeps its floor or its smoothing. The "leak" of noisy-OR diagnostic networks (Henrion,
        UAI 1988) plays the same part: findings caused by something outside the model. Absent and not-sure answers,
        age and sex keep the mean alone.

        With ``shrink`` λ < 1 the unlisted condition resembles a listed one in part: it is one of the conditions c
        (with its prior) whose every likelihood is drawn towards the mean,

            P(x | outside) = Σ_c P(c) Π_f ((1 - λ) P(x_f | c) + λ m_f),

        the mean of a Beta prior centred between the two for a new member of the collection. Findings then go together
        outside as they go together inside (a cough and sputum), where the product of the means (λ = 1) takes every
        finding as independent of the others and makes a long inquiry's answers, which always go together somewhat,
        look ever less like an unlisted condition's."""
        likelihoods, means, leakable, prior = self.outside_terms(observed)
        return outside_log_likelihood(likelihoods, np.where(leakable, np.maximum(means, leak), means), prior, shrink)

    def outside_terms(self, observed: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`log_outside` weighs, before the leak: the observed factors' likelihoods ``(F, C)``, their
        prior-weighted means ``(F,)``, which of them the leak may raise ``(F,)`` (stated present, shown by no
        condition's training cases) and the prior ``(C,)``."""
        prior = np.exp(self.log_prior - np.logaddexp.reduce(self.log_prior))
        rows, leakable = [], []
        for names, row in self.factors(observed):  # a group of alternative codings: shown where one member is
            rows.append(np.exp(row))
            leakable.append(all(self.states_present(n, observed[n]) for n in names)
                            and not np.any([self.shown(n, observed[n]) for n in names]))
        likelihoods = np.array(rows).reshape(len(rows), len(prior))
        return likelihoods, likelihoods @ prior, np.array(leakable, dtype=bool), prior

    def states_present(self, name: str, value: Any) -> bool:
        """Whether an observation says the finding is there (yes, or a value other than the default)."""
        var = self.variables.get(name)
        if var is None or value in (ABSENT, UNSURE):
            return False
        if var.kind == "B":
            return value == PRESENT
        values = (value,) if isinstance(value, str) else tuple(value)
        return any(v != var.default for v in values)

    def posterior(self, observed: Mapping[str, Any], base: np.ndarray | None = None) -> np.ndarray:
        return np.exp(self.log_posterior(observed, base))

    def to_json(self) -> dict[str, Any]:
        return {"conditions": self.conditions, "variables": len(self.variables)}


def outside_log_likelihood(likelihoods: np.ndarray, means: np.ndarray, prior: np.ndarray, shrink: float) -> float:
    """log Σ_c P(c) Π_f ((1 - λ) P(x_f | c) + λ m_f) (:meth:`NaiveBayes.log_outside`) from the observed findings'
    likelihoods ``(F, C)``, their means ``(F,)`` (the leak applied) and the prior ``(C,)``; λ = 1 is Σ_f log m_f."""
    if not 0.0 <= shrink <= 1.0:
        raise ValueError(f"shrink must be within [0, 1], got {shrink}")
    floor = 1e-300
    if shrink >= 1.0 or not len(means):
        return float(np.log(np.maximum(means, floor)).sum())
    mixed = (1.0 - shrink) * likelihoods + shrink * means[:, None]
    return float(np.logaddexp.reduce(np.log(np.maximum(prior, floor)) + np.log(np.maximum(mixed, floor)).sum(axis=0)))


def outside_probability(log_inside: float, log_outside: float, outside_prior: float) -> float:
    """P(outside | x) from log P(x | inside) (the collection's evidence, log Σ_c P(c) P(x | c)) and log P(x |
    outside); 0 when ``outside_prior`` is 0 (the closed world)."""
    if outside_prior <= 0.0:
        return 0.0
    a = np.log1p(-outside_prior) + log_inside
    b = np.log(outside_prior) + log_outside
    return float(np.exp(b - np.logaddexp(a, b)))


# ------------------------------------------------------------------ estimation


def _prior(patients: Sequence[Patient], conditions: Sequence[str]) -> np.ndarray:
    counts = np.array([sum(p.condition == c for p in patients) for c in conditions], dtype=np.float64)
    return np.log((counts + 1.0) / (counts.sum() + len(conditions)))


def fit_ddxplus(patients: Sequence[Patient], evidences: Mapping[str, Evidence], support: Mapping[str, set[str]],
                smoothing: float = 1.0, floor: float = 1e-3) -> NaiveBayes:
    """Likelihood tables from DDXPlus training patients, restricted to the KB's condition->evidence links."""
    conditions = sorted(support)
    index = {c: i for i, c in enumerate(conditions)}
    n_c = np.zeros(len(conditions))
    for p in patients:
        n_c[index[p.condition]] += 1
    by_cond: list[list[Patient]] = [[] for _ in conditions]
    for p in patients:
        by_cond[index[p.condition]].append(p)
    supported = np.array([[e in support[c] for e in evidences] for c in conditions])  # (C, E)
    names = list(evidences)
    variables: dict[str, Variable] = {}
    for j, name in enumerate(names):
        ev = evidences[name]
        sup = supported[:, j]
        if ev.kind == "B":
            counts = np.array([sum(bool(p.record.get(name)) for p in grp) for grp in by_cond], dtype=np.float64)
            yes = np.where(sup, (counts + smoothing) / (n_c + 2 * smoothing), floor)
            variables[name] = Variable(name, "B", ev.group, yes=yes, no=1.0 - yes, seen=counts > 0)
            continue
        values = ev.values
        vi = {v: i for i, v in enumerate(values)}
        counts = np.zeros((len(conditions), len(values)))
        for ci, grp in enumerate(by_cond):
            for p in grp:
                got = p.record.get(name) or (ev.default,)
                for v in (got[:1] if ev.kind == "C" else got):
                    if v in vi:
                        counts[ci, vi[v]] += 1
        if ev.kind == "C":
            alpha = smoothing / len(values)
            probs = (counts + alpha) / (n_c[:, None] + smoothing)
            off = np.full(len(values), floor / max(len(values) - 1, 1))
            off[vi[ev.default]] = 1.0 - floor
            probs = np.where(sup[:, None], probs, off[None, :])
        else:
            alpha = smoothing / len(values)
            probs = (counts + alpha) / (n_c[:, None] + smoothing + alpha)
            probs = np.where(sup[:, None], probs, floor)
            probs[:, vi[ev.default]] = 0.0  # the default is "none of them", not a value of its own
        variables[name] = Variable(name, ev.kind, ev.group, values=values, default=ev.default, probs=probs,
                                   seen=counts > 0 if ev.kind == "M" else None)
    bands = np.ones((len(conditions), len(AGE_BANDS)))
    sexes = np.ones((len(conditions), 2))
    for p in patients:
        ci = index[p.condition]
        if p.age is not None:
            bands[ci, age_band(p.age)] += 1
        if p.sex in ("M", "F"):
            sexes[ci, 0 if p.sex == "M" else 1] += 1
    demo = {"age": bands / bands.sum(axis=1, keepdims=True), "sex": sexes / sexes.sum(axis=1, keepdims=True)}
    return NaiveBayes(conditions, _prior(patients, conditions), variables, demo)


def fit_dxy(patients: Sequence[Patient], symptoms: Sequence[str], diseases: Sequence[str],
            smoothing: float = 0.5) -> NaiveBayes:
    """Per disease and symptom: P(recorded present), P(recorded absent); the rest is "not in the record".

    The support is the training statistics themselves (DXY has no separate KB): a symptom never seen
    with a disease keeps only the smoothing mass.
    """
    conditions = list(diseases)
    index = {c: i for i, c in enumerate(conditions)}
    t = np.zeros((len(conditions), len(symptoms)))
    f = np.zeros_like(t)
    n_c = np.zeros(len(conditions))
    si = {s: i for i, s in enumerate(symptoms)}
    for p in patients:
        ci = index[p.condition]
        n_c[ci] += 1
        for s, v in p.record.items():
            (t if v else f)[ci, si[s]] += 1
    denom = n_c[:, None] + 3 * smoothing
    yes, no = (t + smoothing) / denom, (f + smoothing) / denom
    variables = {s: Variable(s, "B", s, yes=yes[:, i], no=no[:, i], seen=t[:, i] > 0) for s, i in si.items()}
    return NaiveBayes(conditions, _prior(patients, conditions), variables)
