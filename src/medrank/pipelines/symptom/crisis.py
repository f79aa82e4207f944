"""Thoughts of suicide or self-harm in a patient's own words: a linear probe on sentence embeddings.

The urgent signs' word patterns (:mod:`medrank.pipelines.symptom.urgent`) catch what they were written for and
little of the indirect ways people say it ("I keep thinking there's no way forward for me", "everyone would
be better off if I wasn't around"). A logistic regression on the served query encoder's normalised embeddings,

    p(crisis | x) = σ(w · e(x) + b),

reads each clause of a complaint and the whole of it; the largest probability at or above a threshold raises the
crisis notice, naming the clause. Death said as a figure of speech ("I could kill for a nap", 笑死我了, "this cough
is killing me") is blanked before reading, and a clause that denies such thoughts ("no thoughts of harming myself",
没有自杀的想法) raises nothing: embeddings read both much like the thought itself. The threshold is chosen on
out-of-fold probabilities (k-fold cross-validation of the same fit, each text read as it is served) so that at most a
given share of the texts that call for no crisis notice reach it: a false alarm puts a crisis line above a complaint
about a cough.

A probe belongs to one encoder (its name is stored with the weights): a service serving another encoder does not use
it. The shipped probes are fitted by ``bench/crisis_probe.py`` on short complaints written by people of this project
(not patients, not clinicians) and on patients' replies to doctors from public dialogue sets, and say so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "medrank-crisis-probe"
PROBES = Path(__file__).with_name("crisis_probes")
#: the clauses a complaint is read in: sentences, and the parts a comma separates
_CLAUSE_END = re.compile(r"[.!?;。！？；\n]+|,\s+|，|、")

Encode = Callable[[Sequence[str]], np.ndarray]
#: death or killing as a figure of speech: a craving, a hyperbole, a laugh
_FIGURATIVE = re.compile(
    r"\b(?:could|would|'d)\s+(?:kill|murder|die)\s+for\b|\bdying\s+(?:for|to)\b|\b(?:is|are|'s|was|were)\s+(?:literally\s+)?"
    r"killing\s+me\b|\b(?:bored|scared|worried|frightened|tickled|laughed|laughing)\s+(?:\w+\s+)?to\s+death\b"
    r"|\b(?:thought|think)\s+i'?d\s+die\b|\bi\s+(?:nearly|almost)\s+died\s+(?:laughing|of\s+embarrassment)\b"
    r"|\bdead\s+(?:tired|on\s+my\s+feet)\b|\bkill(?:s|ing)?\s+time\b"
    r"|(?:笑|累|热|冷|困|饿|烦|气|忙|吓|急|疼|痛|痒|撑|渴|无聊|尴尬|丑|好吃|难吃|麻烦)死(?:我|人|了|啦|掉)+|想死(?:你|您|他|她)|要了我的(?:老)?命", re.I)
#: a clause that denies thoughts of suicide or self-harm
_DENIED = re.compile(
    r"^\W*(?:(?:and|but|with|i\s+have|i've|i\s+had|there\s+are|there's|i'm|i\s+am)\s+)?(?:no|not|never|denies|deny|without)\b"
    r"[^.!?]{0,25}\b(?:thoughts?|ideas?|ideation|plans?|intent\w*|suicid\w*|self[\s-]?harm\w*|harm\w*|hurt\w*|kill\w*)"
    r"|^\W*(?:也|都|并)?(?:没有|没|无|否认|不)(?:任何|过)?(?:想过)?(?:自杀|轻生|自伤|自残|伤害自己)", re.I)


def blank_figurative(text: str) -> str:
    """``text`` with death said as a figure of speech blanked (spaces: the offsets stay)."""
    return _FIGURATIVE.sub(lambda m: " " * len(m.group()), text)


def denies(clause: str) -> bool:
    """Whether ``clause`` denies thoughts of suicide or self-harm ("no thoughts of harming myself")."""
    return _DENIED.search(clause) is not None


def clauses(text: str, shortest: int = 3) -> list[tuple[int, int]]:
    """``[start, end)`` of each clause of ``text`` of at least ``shortest`` characters (stripped), then the whole
    text's when it has more than one."""
    out, start = [], 0
    for m in [*_CLAUSE_END.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b - a >= shortest:
            out.append((a, b))
        if m is not None:
            start = m.end()
    a, b = len(text) - len(text.lstrip()), len(text.rstrip())
    if len(out) > 1 or (not out and b > a):
        out.append((a, b))
    return out


def _normalised(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class CrisisProbe:
    """A fitted probe: ``weights`` and ``bias`` over the normalised embeddings of ``encoder``, and the probability
    ``threshold`` at which a clause raises the crisis notice."""

    encoder: str
    language: str
    weights: np.ndarray
    bias: float
    threshold: float
    #: how it was fitted: data, counts, C, folds, the out-of-fold figures at the threshold
    fitted: dict[str, Any] = field(default_factory=dict)

    def probabilities(self, embeddings: np.ndarray) -> np.ndarray:
        """p(crisis) of each row of ``embeddings`` (normalised here)."""
        z = _normalised(embeddings) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    def read(self, text: str, encode: Encode) -> tuple[float, tuple[int, int] | None]:
        """The largest p(crisis) over the clauses of ``text`` (and the whole of it) and, when it reaches the
        threshold, that clause's span; ``encode`` maps texts to embeddings (the probe's encoder, query side)."""
        text = blank_figurative(text)
        spans = _read_spans(text)
        if not spans:
            return 0.0, None
        p = self.probabilities(np.asarray(encode([text[a:b] for a, b in spans])))
        best = int(np.argmax(p))
        return float(p[best]), (spans[best] if p[best] >= self.threshold else None)

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "encoder": self.encoder, "language": self.language,
                "weights": [round(float(w), 7) for w in self.weights], "bias": float(self.bias),
                "threshold": float(self.threshold), "fitted": self.fitted}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the probe as JSON (atomically)."""
        from medrank.utils.io import atomic_write_text

        atomic_write_text(path, json.dumps(self.as_dict(), ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CrisisProbe:
        """Read and check a probe file; ``ValueError`` names the first problem."""
        from medrank.utils.io import read_json_file

        raw = read_json_file(path, "crisis probe")
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"{path}: expected an object with \"format\": \"{FORMAT}\"")
        weights = raw.get("weights")
        if not isinstance(weights, list) or not weights or not all(isinstance(w, (int, float)) for w in weights):
            raise ValueError(f"{path}: \"weights\" must be a non-empty list of numbers")
        for key in ("bias", "threshold"):
            if not isinstance(raw.get(key), (int, float)):
                raise ValueError(f"{path}: \"{key}\" must be a number")
        if not 0.0 < raw["threshold"] < 1.0:
            raise ValueError(f"{path}: \"threshold\" must lie between 0 and 1")
        if not isinstance(raw.get("encoder"), str) or not isinstance(raw.get("language"), str):
            raise ValueError(f"{path}: \"encoder\" and \"language\" must be names")
        return cls(raw["encoder"], raw["language"], np.asarray(weights, dtype=np.float64), float(raw["bias"]),
                   float(raw["threshold"]), dict(raw.get("fitted") or {}))


def _read_spans(blanked: str) -> list[tuple[int, int]]:
    """The clauses of a text (figures of speech blanked) that are read: those that deny nothing."""
    return [(a, b) for a, b in clauses(blanked) if not denies(blanked[a:b])]


def _pieces(text: str) -> list[str]:
    blanked = blank_figurative(text)
    return [blanked[a:b] for a, b in _read_spans(blanked)]


def fit(texts: Sequence[str], crisis: Sequence[bool], encode: Encode, *, encoder: str, language: str,
        c: float = 4.0, false_alarms: float = 0.01, folds: int = 5, seed: int = 0,
        calibrate_on: Sequence[bool] | None = None) -> CrisisProbe:
    """Fit a probe on ``texts`` labelled ``crisis`` (whole texts), its threshold the lowest at which at most
    ``false_alarms`` of the out-of-fold non-crisis texts (each read clause by clause, as served) reach it; with
    ``calibrate_on``, of those non-crisis texts it marks (others, such as dialogue replies, only shape the fit)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(crisis, dtype=bool)
    if len(texts) != len(y) or y.all() or not y.any():
        raise ValueError("fit needs one label per text and texts of both kinds")
    marked = np.ones(len(y), dtype=bool) if calibrate_on is None else np.asarray(calibrate_on, dtype=bool)
    if len(marked) != len(y) or not (marked & ~y).any():
        raise ValueError("calibrate_on must mark, one flag per text, some texts without a crisis")
    if y.sum() < folds or (~y).sum() < folds:
        raise ValueError(f"fit needs at least {folds} texts of each kind for {folds}-fold thresholds")
    x = _normalised(np.asarray(encode(list(texts))))
    pieces = [_pieces(t) or [t] for t in texts]  # as :meth:`CrisisProbe.read` reads them
    flat = [p for ps in pieces for p in ps]
    e = _normalised(np.asarray(encode(flat)))
    at = np.cumsum([0, *map(len, pieces)])

    def model() -> Any:
        return LogisticRegression(C=c, class_weight="balanced", max_iter=5000)

    oof = np.zeros(len(y))
    for train, held in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        m = model().fit(x[train], y[train])
        for i in held:
            oof[i] = m.predict_proba(e[at[i]:at[i + 1]])[:, 1].max()
    calm = np.sort(oof[~y & marked])
    allowed = int(np.floor(false_alarms * len(calm)))
    threshold = float(min(calm[len(calm) - 1 - allowed] + 1e-6, 1 - 1e-6))
    m = model().fit(x, y)
    fitted = {"texts": len(y), "crisis": int(y.sum()), "c": c, "folds": folds, "seed": seed,
              "false_alarms_target": false_alarms,
              "out_of_fold": {"crisis_raised": int((oof[y] >= threshold).sum()),
                              "false_alarms": int((oof[~y & marked] >= threshold).sum()),
                              "calibrated_on": int((~y & marked).sum()),
                              "others_reaching_it": int((oof[~y & ~marked] >= threshold).sum()),
                              "others": int((~y & ~marked).sum())}}
    return CrisisProbe(encoder, language, m.coef_[0].astype(np.float64), float(m.intercept_[0]), threshold, fitted)


def shipped(language: str) -> CrisisProbe | None:
    """The probe shipped for ``language`` (``crisis_probes/<language>.json``), or None."""
    path = PROBES / f"{language}.json"
    return CrisisProbe.load(path) if path.is_file() else None
