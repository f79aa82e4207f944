"""Simulated patients: episodes of the inquiry protocol, their metrics, and tuning of the stopping rule.

Each episode starts from what the patient states up front (DDXPlus: the initial evidence plus age and
sex; DXY: the explicit symptoms of the self-report). The engine asks one question per turn, always
its best one; the patient answers from the record:

* DDXPlus: a binary evidence in the record is present, one not in the record absent; a categorical
  or multi-choice evidence is answered with the record's values, or the evidence's default value
  (e.g. "nowhere", 0) when the record does not have it;
* DXY: an implicit (or explicit) symptom of the goal is answered True / False; one the goal does
  not have is "not sure".

An episode is run to the largest turn budget and its posterior kept after every turn, so the
stopping rule (top probability >= threshold, or the budget) is applied afterwards for any threshold
and budget: the questions do not depend on when the engine would stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrank.pipelines.history.inquiry.engine import Finding, InquiryEngine
from medrank.pipelines.history.inquiry.kb import Patient
from medrank.pipelines.history.inquiry.posterior import ABSENT, PRESENT, UNSURE

EN_ANSWERS = {PRESENT: "yes", ABSENT: "no", UNSURE: "not sure"}


@dataclass
class Episode:
    patient: Patient
    asked: list[str]  # finding names, in the order asked
    log_posteriors: np.ndarray  # (turns + 1, conditions): after the opening, then after each answer
    memberships: np.ndarray | None = None  # same shape: P(in the differential), with a differential model


def opening(engine: InquiryEngine, patient: Patient) -> list[Finding]:
    """What the patient states before any question."""
    out = [Finding(name, *_answer_values(engine, patient, name)[:1], source="self-report") for name in patient.initial]
    if engine.demographics:
        if patient.age is not None:
            out.append(Finding("age", str(patient.age), "self-report"))
        if patient.sex is not None:
            out.append(Finding("sex", patient.sex, "self-report"))
    return out


def _answer_values(engine: InquiryEngine, patient: Patient, name: str) -> list[str]:
    var = engine.model.variables[name]
    got = patient.record.get(name)
    if engine.language == "zh":
        return [UNSURE if got is None else (PRESENT if got else ABSENT)]
    if var.kind == "B":
        return [PRESENT if got else ABSENT]
    if not got:
        return [var.default]
    return list(got[:1]) if var.kind == "C" else list(got)


def answer(engine: InquiryEngine, patient: Patient, name: str) -> list[Finding]:
    return [Finding(name, v, f"question:{name}") for v in _answer_values(engine, patient, name)]


def answer_text(engine: InquiryEngine, name: str, values: Sequence[str]) -> str:
    """The patient's answer as dialogue text (for the re-ranker's dialogue context)."""
    if engine.language == "zh":
        return {PRESENT: "是的，有", ABSENT: "没有", UNSURE: "不确定"}[values[0]]
    meanings = engine.value_meanings.get(name, {})
    return ", ".join(EN_ANSWERS.get(v) or meanings.get(v) or v for v in values)


def opening_text(engine: InquiryEngine, patient: Patient, findings: Sequence[Finding]) -> str:
    """The patient's first turn: the self-report (DXY), else the opening findings in words (DDXPlus)."""
    if patient.text:
        return patient.text
    words = []
    if patient.age is not None and patient.sex is not None:
        words.append(f"{patient.age}-year-old {'man' if patient.sex == 'M' else 'woman'}")
    words += [f"{engine.finding_label(f.name)} {answer_text(engine, f.name, [f.value])}"
              for f in findings if f.name in engine.labels]
    return "; ".join(words)


def run_episode(engine: InquiryEngine, patient: Patient, budget: int, *, rerank: bool = True) -> Episode:
    findings = opening(engine, patient)
    dialogue = [opening_text(engine, patient, findings)]
    observed = engine.observed(findings)
    posts = [engine.log_posterior_observed(observed, findings, dialogue)]
    members = [engine.membership(observed)]
    asked: list[str] = []
    for _ in range(budget):
        proposed = engine.next_questions(dialogue, findings, k=1, rerank=rerank)
        if not proposed:
            break
        name = proposed[0].finding
        reply = answer(engine, patient, name)
        findings.extend(reply)
        asked.append(name)
        dialogue.append(proposed[0].text)
        dialogue.append(answer_text(engine, name, [f.value for f in reply]))
        observed = engine.observed(findings)
        posts.append(engine.log_posterior_observed(observed, findings, dialogue))
        members.append(engine.membership(observed))
    return Episode(patient, asked, np.stack(posts), None if members[0] is None else np.stack(members))


def run_episodes(engine: InquiryEngine, patients: Sequence[Patient], budget: int, *, rerank: bool = True,
                 progress: bool = False) -> list[Episode]:
    it: Any = patients
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(patients, desc="episodes", unit="patient")
    return [run_episode(engine, p, budget, rerank=rerank) for p in it]


def inquiry_states(engine: InquiryEngine, patients: Sequence[Patient], budget: int) -> list[dict[str, Any]]:
    """What the engine's first stage has established about each patient when an inquiry of ``budget``
    questions ends (the observation maps a differential model is fitted on).

    Every patient's inquiry advances one turn at a time together, so each turn scores the questions of
    all of them in one batch (:meth:`.InformationGain.best` picks what :meth:`.InquiryEngine.first_stage`
    would)."""
    return inquiry_states_at(engine, patients, (budget,))[budget]


def inquiry_states_at(engine: InquiryEngine, patients: Sequence[Patient],
                      budgets: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """:func:`inquiry_states` after each of ``budgets`` questions, from one run of the inquiries (the states after
    5 questions are where the inquiry of 30 stood after its fifth)."""
    if not budgets or min(budgets) < 0:
        raise ValueError(f"budgets must be non-negative question counts, got {list(budgets)}")
    model, gain = engine.model, engine.gain
    observed = [engine.observed(opening(engine, p)) for p in patients]
    # unnormalised log posteriors, grown by one answer per turn instead of summed again
    logp = np.stack([model.log_prior + sum((model.log_likelihood(n, v) for n, v in o.items()), np.zeros(len(model.log_prior)))
                     for o in observed]) if patients else np.zeros((0, len(model.log_prior)))
    active = list(range(len(patients)))
    # the maps are replaced, never changed in place, when an answer joins them: a snapshot is a shallow list copy
    states = {0: list(observed)} if 0 in budgets else {}
    for turn in range(1, max(budgets) + 1):
        if not active:
            break
        rows = logp[active]
        posteriors = np.exp(rows - np.logaddexp.reduce(rows, axis=1, keepdims=True))
        picks = gain.best(posteriors, np.stack([gain.open_mask(observed[i]) for i in active]))
        still = []
        for i, pick in zip(active, picks, strict=True):
            if pick < 0:
                continue
            name = gain.names[pick]
            # one finding per question, never asked before: the answer's observation joins the map as it is
            reply = engine.observed(answer(engine, patients[i], name))
            observed[i] = {**observed[i], **reply}
            logp[i] += model.log_likelihood(name, reply[name])
            still.append(i)
        active = still
        if turn in budgets:
            states[turn] = list(observed)
    # an inquiry with nothing left to ask stands where it stopped
    return {b: states.get(b, observed) for b in budgets}


# ------------------------------------------------------------------ metrics


def stop_turn(engine: InquiryEngine, episode: Episode, threshold: float, budget: int) -> int:
    """Questions asked when the engine stops: the first turn whose top probability reaches the
    threshold, else the budget (or the end of the episode when nothing was left to ask)."""
    last = min(budget, len(episode.asked))
    for t in range(last + 1):
        if float(engine.probabilities(episode.log_posteriors[t]).max()) >= threshold:
            return t
    return last


def positive_evidences(engine: InquiryEngine, patient: Patient) -> set[str]:
    """DDXPlus findings the patient has: binary present, or a categorical / multi-choice value other
    than the evidence's default; the initial evidence is excluded (it is given, not found)."""
    out = set()
    for name, got in patient.record.items():
        var = engine.model.variables[name]
        if var.kind == "B" and got or var.kind != "B" and any(v != var.default for v in got):
            out.add(name)
    return out - set(patient.initial)


def set_scores(predicted: set[str], reference: set[str]) -> tuple[float, float, float]:
    """Recall, precision and F1 of a predicted differential set against the reference set, as the
    DDXPlus paper's code computes them: an empty set counts as one in the denominators (so an empty
    prediction scores 0) and F1 is 0 when precision and recall are."""
    hit = len(predicted & reference)
    r = hit / max(1, len(reference))
    p = hit / max(1, len(predicted))
    return r, p, (2 * p * r / (p + r) if p + r else 0.0)


def episode_metrics(engine: InquiryEngine, episodes: Sequence[Episode], threshold: float,
                    budget: int) -> dict[str, float]:
    """DXY: accuracy, symptom_recall (micro), turns. DDXPlus: GTPA@1, PER, DDR, DDP, DDF1, IL (percent for
    the first five, as the DDXPlus paper reports them)."""
    if not episodes:
        raise ValueError("no episodes to score")
    conditions = engine.model.conditions
    correct, turns = 0, []
    asked_hits, implicit_total = 0, 0
    per, ddr, ddp, ddf1 = [], [], [], []
    for ep in episodes:
        t = stop_turn(engine, ep, threshold, budget)
        turns.append(t)
        logp = ep.log_posteriors[t]
        correct += conditions[int(np.argmax(logp))] == ep.patient.condition
        asked = set(ep.asked[:t])
        if engine.language == "zh":
            implicit = set(ep.patient.record) - set(ep.patient.initial)
            asked_hits += len(asked & implicit)
            implicit_total += len(implicit)
            continue
        positives = positive_evidences(engine, ep.patient)
        per.append(len(asked & positives) / len(positives) if positives else 1.0)
        if ep.memberships is not None:
            scores = ep.memberships[t]
        else:
            scores = engine.probabilities(logp)
        predicted = {c for c, s in zip(conditions, scores, strict=True) if s >= engine.calibration.cutoff}
        reference = set(ep.patient.differential)
        r, p, f1 = set_scores(predicted, reference)
        ddr.append(r)
        ddp.append(p)
        ddf1.append(f1)
    n = len(episodes)
    if engine.language == "zh":
        return {"accuracy": round(correct / n, 4),
                "symptom_recall": round(asked_hits / implicit_total, 4) if implicit_total else 0.0,
                "turns": round(float(np.mean(turns)), 3), "episodes": n}
    return {"GTPA@1": round(100 * correct / n, 2), "PER": round(100 * float(np.mean(per)), 2),
            "DDR": round(100 * float(np.mean(ddr)), 2), "DDP": round(100 * float(np.mean(ddp)), 2),
            "DDF1": round(100 * float(np.mean(ddf1)), 2), "IL": round(float(np.mean(turns)), 3), "episodes": n}


# ------------------------------------------------------------------ tuning

TEMPERATURES = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
CUTOFFS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15)
MEMBERSHIP_CUTOFFS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, 0.995, 0.999, 1.01)


def _objective(engine: InquiryEngine, m: dict[str, float]) -> float:
    if engine.language == "zh":
        return m["accuracy"] + m["symptom_recall"]
    return (m["GTPA@1"] + m["PER"] + m["DDF1"]) / 100.0


def tune(engine: InquiryEngine, episodes: Sequence[Episode], budget: int) -> dict[str, Any]:
    """Temperature and cut-off of the differential (best DDF1 at the budget; DDXPlus only), then the
    stopping threshold (best mean of the target metrics at ``budget``; fewer turns break ties).
    Sets ``engine.calibration`` and returns what was chosen and the scores it was chosen on."""
    cal = engine.calibration
    cal.budget = budget
    if engine.language == "en":
        best = (-1.0, cal.temperature, cal.cutoff)
        with_model = bool(episodes) and episodes[0].memberships is not None
        for temp in (1.0,) if with_model else TEMPERATURES:
            for cut in MEMBERSHIP_CUTOFFS if with_model else CUTOFFS:
                cal.temperature, cal.cutoff = temp, cut
                m = episode_metrics(engine, episodes, 2.0, budget)
                if m["DDF1"] > best[0]:
                    best = (m["DDF1"], temp, cut)
        cal.temperature, cal.cutoff = best[1], best[2]
    scored = []
    for th in THRESHOLDS:
        m = episode_metrics(engine, episodes, th, budget)
        turns = m.get("turns", m.get("IL", 0.0))
        scored.append((round(_objective(engine, m), 6), -turns, th, m))
    obj, _, cal.threshold, chosen = max(scored, key=lambda x: (x[0], x[1]))
    cal.tuned_on = {"episodes": len(episodes), "budget": budget, "objective": obj, "metrics": chosen}
    return {"threshold": cal.threshold, "temperature": cal.temperature, "cutoff": cal.cutoff, **cal.tuned_on}
