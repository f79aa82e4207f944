"""Chinese self-reports → the normalised symptoms they state, trained on the DXY dialogues.

The mined surface lexicon (:mod:`~medrank.pipelines.symptom.lexicon`) finds most symptom words,
but a word is not always a stated symptom (过敏 in 过敏性鼻炎, 发烧 in a question about what to
do if it comes), and a symptom is not always one of the lexicon's words (不肯吃 for 厌食). The
:class:`SelfReportModel` decides per (report, symptom) from trained parts, stacked:

1. **lexicon words in context** — each lexicon word found in the report, with its left and right
   characters, a negation cue before it, whether its clause is a question; a logistic model over
   those (one-hot) features says how often such a word is an annotated symptom;
2. **position** — where the symptom's first word sits (the annotations favour the symptoms a
   parent names first), how many symptom words the report holds;
3. **character n-grams** (optional, off by default: no better out of fold on the DXY training
   reports) — TF-IDF over character 1–3-grams of the whole report, one logistic regression per
   symptom (words the lexicon never saw).

A logistic stacker over those features gives the probability; the threshold maximises set F1.
The stacker is fitted on out-of-fold outputs of the parts (each record scored by parts fitted
without it), so it learns how far to trust each part on unseen reports. The model is plain
numbers (JSON), never a pickle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medrank.pipelines.symptom.lexicon import DxyRecord, SurfaceLexicon, mine_surface_lexicon
from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet, SymptomTextError, check_text, set_prf
from medrank.pipelines.symptom.spans import clauses, find_spans
from medrank.utils.io import atomic_write_json

PathLike = str | os.PathLike[str]

MODEL_FORMAT = "medrank-self-report-model"
QUESTION_CUES = ("吗", "？", "?", "会不会", "是否", "是不是", "怎么", "能不能", "要不要", "需不需要")
NEGATION_CUES = ("不", "没", "无", "未", "否认", "非", "别")
STACK_FEATURES = (
    "word_found", "words", "negated_words", "form_precision", "ngram_probability", "ngram_logit", "log_prior",
    "context_probability", "context_log", "first_position", "first_position_share", "word_order", "distinct_words",
    "report_length", "report_distinct_words",
)
#: the parts the stacker can draw on ("lexicon" always; the others can be left out for ablations)
PARTS = ("lexicon", "context", "ngrams", "position", "symptom")
#: the default parts: the ones with the best out-of-fold F1 on the training reports (bench/symptom_sets.py, part dxy);
#: the character n-grams add nothing there and cost most of the fitting time
DEFAULT_PARTS = ("lexicon", "context", "position")
#: the mining settings the model uses: forms aligned with half a record of evidence and one-character
#: words seen in two records count (吐 → 呕吐, 痰 → 咳痰); the stacker weighs each form's reliability
LEXICON_SETTINGS: dict[str, Any] = {"min_evidence": 0.5, "min_single_char_count": 2}


@dataclass(frozen=True)
class Mention:
    """One lexicon word of a report: ``text[start:end]`` names ``name``; ``context`` holds its one-hot features."""

    start: int
    end: int
    form: str
    name: str
    negated: bool
    context: dict[str, float]


def mentions(text: str, lexicon: Any) -> list[Mention]:
    """The lexicon words of ``text`` with their context features (see the module docstring)."""
    ranges = clauses(text, "zh")
    out = []
    for s in find_spans(text, lexicon, "zh"):
        if s.normalised is None:
            continue
        a, b = next(((a, b) for a, b in ranges if a <= s.start and s.end <= b), (0, len(text)))
        clause = text[a:b]
        question = any(q in clause for q in QUESTION_CUES) or text[b:b + 1] in ("？", "?")
        left = text[max(a, s.start - 4):s.start]
        right = text[s.end:min(b, s.end + 3)]
        f = {f"form={s.text}": 1.0, f"name={s.normalised}": 1.0, f"left1={left[-1:]}": 1.0, f"left2={left[-2:]}": 1.0,
             f"right1={right[:1]}": 1.0, f"right2={right[:2]}": 1.0, f"form_right1={s.text}|{right[:1]}": 1.0,
             "question": float(question), "negated": float(s.negated), "clause_start": float(not left),
             "form_chars": len(s.text) / 4.0}
        for cue in NEGATION_CUES:
            if cue in left:
                f[f"negation={cue}"] = 1.0
        out.append(Mention(s.start, s.end, s.text, s.normalised, s.negated, f))
    return out


# -- parts ---------------------------------------------------------------------------------------------
def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))


@dataclass
class NgramModel:
    """Character 1–3-gram TF-IDF (sublinear tf, l2 norm) and one logistic regression per symptom."""

    vocabulary: dict[str, int]
    idf: list[float]
    coef: np.ndarray  # (symptoms, n-grams)
    intercept: np.ndarray  # (symptoms,)
    ngram: tuple[int, int] = (1, 3)

    def _vectorizer(self) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(analyzer="char", ngram_range=self.ngram, sublinear_tf=True, vocabulary=self.vocabulary)
        vec.idf_ = np.asarray(self.idf, dtype=np.float64)
        return vec

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        if not self.vocabulary:  # the n-gram part is not used: every report gets the prior
            return np.tile(_sigmoid(self.intercept), (len(texts), 1))
        x = self._vectorizer().transform(list(texts))
        return _sigmoid(np.asarray(x @ self.coef.T) + self.intercept)

    @classmethod
    def constant(cls, prior: np.ndarray) -> NgramModel:
        """No n-grams: the probability of each symptom is its prior."""
        p = np.clip(np.asarray(prior, dtype=np.float64), 1e-4, 1 - 1e-4)
        return cls({}, [], np.zeros((len(p), 0)), np.log(p / (1 - p)))

    @classmethod
    def fit(cls, texts: Sequence[str], y: np.ndarray, c: float = 10.0, min_df: int = 2,
            ngram: tuple[int, int] = (1, 3)) -> NgramModel:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        vec = TfidfVectorizer(analyzer="char", ngram_range=ngram, min_df=min_df, sublinear_tf=True)
        x = vec.fit_transform(list(texts))
        coef = np.zeros((y.shape[1], x.shape[1]))
        intercept = np.zeros(y.shape[1])
        for j in range(y.shape[1]):
            positives = int(y[:, j].sum())
            if positives in (0, len(y)):  # a symptom never (or always) annotated: a constant
                intercept[j] = -20.0 if positives == 0 else 20.0
                continue
            m = LogisticRegression(C=c, max_iter=2000, class_weight="balanced").fit(x, y[:, j])
            coef[j], intercept[j] = m.coef_[0], m.intercept_[0]
        vocab = {k: int(v) for k, v in vec.vocabulary_.items()}
        return cls(vocab, vec.idf_.tolist(), coef, intercept, ngram)


@dataclass
class ContextModel:
    """Logistic model over the one-hot context features of a lexicon word (:func:`mentions`)."""

    weights: dict[str, float]
    intercept: float

    def probability(self, features: Mapping[str, float]) -> float:
        return float(_sigmoid(np.asarray(self.intercept + sum(self.weights.get(k, 0.0) * v for k, v in features.items()))))

    @classmethod
    def fit(cls, rows: Sequence[Mapping[str, float]], y: Sequence[int], c: float = 1.0) -> ContextModel:
        from sklearn.feature_extraction import DictVectorizer
        from sklearn.linear_model import LogisticRegression

        if len(set(y)) < 2:  # every word right (or wrong): the share itself
            share = min(max(float(np.mean(y)) if len(y) else 0.5, 1e-3), 1 - 1e-3)
            return cls({}, math.log(share / (1 - share)))
        vec = DictVectorizer()
        x = vec.fit_transform(list(rows))
        m = LogisticRegression(C=c, max_iter=3000).fit(x, list(y))
        return cls({k: float(w) for k, w in zip(vec.feature_names_, m.coef_[0], strict=True) if w != 0.0},
                   float(m.intercept_[0]))


@dataclass
class _Parts:
    lexicon: SurfaceLexicon
    ngrams: NgramModel
    context: ContextModel


def _targets(records: Sequence[DxyRecord], names: Sequence[str]) -> np.ndarray:
    return np.array([[n in r.explicit for n in names] for r in records], dtype=int).reshape(len(records), len(names))


def _fit_parts(records: Sequence[DxyRecord], names: Sequence[str], lexicon_settings: Mapping[str, Any],
               ngrams_used: bool = True, lexicon: SurfaceLexicon | None = None) -> _Parts:
    lexicon = mine_surface_lexicon(records, **lexicon_settings) if lexicon is None else lexicon
    y = _targets(records, names)
    ngrams = NgramModel.fit([r.report for r in records], y) if ngrams_used else NgramModel.constant(y.mean(axis=0))
    rows, y = [], []
    for r in records:
        for m in mentions(r.report, lexicon):
            rows.append(m.context)
            y.append(int(m.name in r.explicit))
    return _Parts(lexicon, ngrams, ContextModel.fit(rows, y))


def stack_rows(text: str, parts: _Parts, names: Sequence[str], prior: np.ndarray,
               ngram_p: np.ndarray | None = None) -> np.ndarray:
    """The :data:`STACK_FEATURES` of ``text`` for every symptom (one row per name)."""
    found = mentions(text, parts.lexicon)
    p_ngram = parts.ngrams.probabilities([text])[0] if ngram_p is None else ngram_p
    positive: Counter[str] = Counter()
    negative: Counter[str] = Counter()
    precision: dict[str, float] = {}
    context: dict[str, float] = {}
    first: dict[str, int] = {}
    for m in found:
        if m.negated:
            negative[m.name] += 1
        else:
            positive[m.name] += 1
            precision[m.name] = max(precision.get(m.name, 0.0), parts.lexicon.precision.get(m.form, 0.5))
            first.setdefault(m.name, m.start)
        context[m.name] = max(context.get(m.name, 0.0), parts.context.probability(m.context))
    order = {n: k for k, n in enumerate(sorted(first, key=first.__getitem__))}
    length, distinct = len(text), len(first)
    rows = []
    for j, n in enumerate(names):
        hit = float(n in first)
        p = float(p_ngram[j])
        c = context.get(n, 0.0)
        pos = first.get(n, length)
        rows.append([
            hit, math.log1p(positive[n]), math.log1p(negative[n]), precision.get(n, 0.0), p,
            math.log(p + 1e-4) - math.log(1 - p + 1e-4), math.log(float(prior[j]) + 1e-3), c, math.log(c + 1e-3),
            hit * math.log1p(pos), hit * pos / max(1, length), hit * math.log1p(order.get(n, 0)),
            hit * math.log1p(distinct), math.log1p(length), math.log1p(distinct),
        ])
    return np.asarray(rows, dtype=np.float64)


def folds(n: int, k: int, seed: int) -> list[list[int]]:
    """``k`` disjoint, fixed-seed folds of ``range(n)`` (each sorted)."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return [sorted(idx[i::k]) for i in range(k)]


def best_threshold(probabilities: np.ndarray, gold: Sequence[set[str]], names: Sequence[str],
                   grid: Sequence[float] | None = None) -> tuple[float, float]:
    """The threshold on ``probabilities`` (reports × names) with the highest micro set F1, and that F1
    (the lowest such threshold on ties)."""
    grid = np.round(np.arange(0.05, 0.951, 0.025), 3) if grid is None else grid
    best = (-1.0, 0.5)
    for t in grid:
        preds = [{names[j] for j in np.nonzero(row >= t)[0]} for row in probabilities]
        f1 = set_prf(preds, gold)["f1"]
        if f1 > best[0] + 1e-12:
            best = (f1, float(t))
    return best[1], best[0]


# -- the model -----------------------------------------------------------------------------------------
@dataclass
class SelfReportModel:
    """Report → probability per normalised symptom, and the decided set (see the module docstring)."""

    names: list[str]
    lexicon: SurfaceLexicon
    ngrams: NgramModel
    context: ContextModel
    prior: np.ndarray
    stack_mean: np.ndarray
    stack_scale: np.ndarray
    stack_coef: np.ndarray
    stack_intercept: np.ndarray  # one per symptom (the same unless the "symptom" part is used)
    threshold: float = 0.5
    parts_used: tuple[str, ...] = DEFAULT_PARTS
    max_alternatives: int = 5
    info: dict[str, Any] = field(default_factory=dict)

    # -- fitting -----------------------------------------------------------------------------------
    @classmethod
    def fit(cls, records: Sequence[DxyRecord], names: Sequence[str], inner_folds: int = 5, seed: int = 11,
            lexicon_settings: Mapping[str, Any] | None = None,
            parts_used: Sequence[str] = DEFAULT_PARTS, c: float = 1.0,
            lexicon: SurfaceLexicon | None = None) -> SelfReportModel:
        """Fit on labelled self-reports: the parts out of fold (``inner_folds``, fixed ``seed``) for the stacker
        and its threshold, then the parts on all ``records``. ``parts_used`` leaves parts out (ablations);
        ``lexicon`` is a fixed surface lexicon used instead of one mined from ``records`` (and from each inner
        fold: a lexicon mined from more reports than the model is fitted on, or a curated one)."""
        from sklearn.linear_model import LogisticRegression

        records, names = list(records), list(names)
        if len(records) < inner_folds or inner_folds < 2:
            raise ValueError(f"{len(records)} records for {inner_folds} folds: give at least as many records as folds (>= 2)")
        if not names or len(set(names)) != len(names):
            raise ValueError("names must be a non-empty list of distinct symptom names")
        unknown = set(parts_used) - set(PARTS)
        if unknown or "lexicon" not in parts_used:
            raise ValueError(f"parts_used must hold 'lexicon' and any of {list(PARTS[1:])}, got {list(parts_used)}")
        settings = dict(LEXICON_SETTINGS if lexicon_settings is None else lexicon_settings)
        y = _targets(records, names)
        prior = y.mean(axis=0)
        rows = np.zeros((len(records), len(names), len(STACK_FEATURES)))
        for fold in folds(len(records), inner_folds, seed):
            held = set(fold)
            parts = _fit_parts([r for i, r in enumerate(records) if i not in held], names, settings, "ngrams" in parts_used,
                               lexicon)
            p = parts.ngrams.probabilities([records[i].report for i in fold])
            for k, i in enumerate(fold):
                rows[i] = stack_rows(records[i].report, parts, names, prior, p[k])
        mask = _feature_mask(parts_used)
        x = rows.reshape(-1, len(STACK_FEATURES))
        mean, scale = x.mean(axis=0), x.std(axis=0)
        scale[scale < 1e-9] = 1.0
        z = (x - mean) / scale * mask
        if "symptom" in parts_used:  # one bias per symptom: how readily its annotators marked it
            z = np.hstack([z, np.tile(np.eye(len(names)), (len(records), 1))])
        stacker = LogisticRegression(C=c, max_iter=5000).fit(z, y.reshape(-1))
        oof = stacker.predict_proba(z)[:, 1].reshape(len(records), len(names))
        coef = stacker.coef_[0]
        bias = coef[len(STACK_FEATURES):] if "symptom" in parts_used else np.zeros(len(names))
        gold = [set(r.explicit) & set(names) for r in records]
        threshold, oof_f1 = best_threshold(oof, gold, names)
        parts = _fit_parts(records, names, settings, "ngrams" in parts_used, lexicon)
        return cls(names, parts.lexicon, parts.ngrams, parts.context, prior, mean, scale,
                   coef[:len(STACK_FEATURES)] * mask, float(stacker.intercept_[0]) + bias, threshold, tuple(parts_used),
                   info={"records": len(records), "inner_folds": inner_folds, "seed": seed, "lexicon_forms": len(parts.lexicon),
                         "lexicon_settings": settings if lexicon is None else "given", "out_of_fold_f1": round(oof_f1, 4), "threshold": threshold})

    # -- inference ---------------------------------------------------------------------------------
    def _parts(self) -> _Parts:
        return _Parts(self.lexicon, self.ngrams, self.context)

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """(reports × :attr:`names`) probabilities that each symptom is stated."""
        if isinstance(texts, str):
            raise SymptomTextError("probabilities takes a list of self-reports")
        texts = [check_text(t, "self-report") for t in texts]
        if not texts:
            return np.zeros((0, len(self.names)))
        p_ngram = self.ngrams.probabilities(texts)
        parts = self._parts()
        x = np.stack([stack_rows(t, parts, self.names, self.prior, p) for t, p in zip(texts, p_ngram, strict=True)])
        z = (x - self.stack_mean) / self.stack_scale
        return _sigmoid(z @ self.stack_coef + self.stack_intercept)

    def predict(self, texts: Sequence[str]) -> list[set[str]]:
        """The decided symptom names of each report."""
        return [{self.names[j] for j in np.nonzero(row >= self.threshold)[0]} for row in self.probabilities(texts)]

    def detect(self, text: str) -> SymptomSet:
        """The decided set (each name with the span of its first stated word, or ``None`` when only the
        wording as a whole points to it, and its probability) and the ranked alternatives."""
        return self.detect_many([text])[0]

    @property
    def k(self) -> int:
        """How many names a detected set's ``ranking`` holds: all of them (a caller showing the top-k reads it)."""
        return len(self.names)

    def _ranked(self, row: np.ndarray) -> list[int]:
        return sorted(range(len(self.names)), key=lambda j: (-row[j], self.names[j]))

    def _ranking(self, row: np.ndarray, order: Sequence[int]) -> list[tuple[str, float]]:
        return [(self.names[j], round(float(row[j]), 6)) for j in order]

    def rankings(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """Every name of each text, most probable first, with its probability."""
        return [self._ranking(row, self._ranked(row)) for row in self.probabilities(texts)]

    def detect_many(self, texts: Sequence[str]) -> list[SymptomSet]:
        out = []
        for text, row in zip(texts, self.probabilities(texts), strict=True):
            spans: dict[str, tuple[int, int]] = {}
            for m in mentions(text, self.lexicon):
                if not m.negated:
                    spans.setdefault(m.name, (m.start, m.end))
            order = self._ranked(row)
            terms = [DetectedTerm(self.names[j], self.names[j], round(float(row[j]), 4), spans.get(self.names[j]))
                     for j in order]
            chosen = [t for t in terms if t.probability >= self.threshold]
            ranking = tuple(self._ranking(row, order))
            out.append(SymptomSet(chosen, terms[len(chosen):len(chosen) + self.max_alternatives], ranking))
        return out

    # -- storage -----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        ng = self.ngrams
        return {
            "format": MODEL_FORMAT, "version": 1, "names": self.names, "lexicon": self.lexicon.to_json(),
            "ngrams": {"vocabulary": ng.vocabulary, "idf": ng.idf, "ngram": list(ng.ngram),
                       "coef": np.round(ng.coef, 6).tolist(), "intercept": ng.intercept.tolist()},
            "context": {"weights": self.context.weights, "intercept": self.context.intercept},
            "prior": self.prior.tolist(), "stack": {"features": list(STACK_FEATURES), "mean": self.stack_mean.tolist(),
                                                    "scale": self.stack_scale.tolist(), "coef": self.stack_coef.tolist(),
                                                    "intercept": self.stack_intercept.tolist()},
            "threshold": self.threshold, "parts_used": list(self.parts_used), "info": self.info,
        }

    def save(self, path: PathLike) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SelfReportModel:
        if d.get("format") != MODEL_FORMAT:
            raise ValueError("not a self-report model written by SelfReportModel.save (format field missing or different)")
        if tuple(d["stack"]["features"]) != STACK_FEATURES:
            raise ValueError(f"model features {d['stack']['features']} differ from this version's {list(STACK_FEATURES)}")
        lex = d["lexicon"]
        lexicon = SurfaceLexicon(dict(lex["forms"]), {k: int(v) for k, v in lex.get("counts", {}).items()},
                                 {k: float(v) for k, v in lex.get("precision", {}).items()})
        ng = d["ngrams"]
        ngrams = NgramModel({k: int(v) for k, v in ng["vocabulary"].items()}, [float(v) for v in ng["idf"]],
                            np.asarray(ng["coef"], dtype=np.float64).reshape(len(d["names"]), len(ng["vocabulary"])),
                            np.asarray(ng["intercept"], dtype=np.float64), (int(ng["ngram"][0]), int(ng["ngram"][1])))
        st = d["stack"]
        return cls(list(d["names"]), lexicon, ngrams, ContextModel(dict(d["context"]["weights"]), float(d["context"]["intercept"])),
                   np.asarray(d["prior"], dtype=np.float64), np.asarray(st["mean"]), np.asarray(st["scale"]),
                   np.asarray(st["coef"]), np.asarray(st["intercept"], dtype=np.float64).reshape(len(d["names"])),
                   float(d["threshold"]), tuple(d.get("parts_used", ())),
                   info=dict(d.get("info", {})))

    @classmethod
    def load(cls, path: PathLike) -> SelfReportModel:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def _feature_mask(parts_used: Sequence[str]) -> np.ndarray:
    """1 for the stack features of the parts in use, 0 for the others (an ablation zeroes a part's inputs)."""
    by_part = {"context": {"context_probability", "context_log"}, "ngrams": {"ngram_probability", "ngram_logit"},
               "position": {"first_position", "first_position_share", "word_order", "distinct_words", "report_length",
                            "report_distinct_words"}}
    off = set().union(*(v for k, v in by_part.items() if k not in parts_used))
    return np.array([0.0 if f in off else 1.0 for f in STACK_FEATURES])


def dxy_self_report_model(root: PathLike | None = None, cache: bool = True) -> SelfReportModel:
    """The model fitted on every visible DXY self-report (cached as JSON under the medrank cache, keyed by the
    data files' sizes and modification times, so a changed data folder is refitted)."""
    from medrank.config import cache_dir, dataset_dir
    from medrank.pipelines.symptom.lexicon import read_dxy_folder

    folder = dataset_dir("dxy-dialog", root)
    names = [line.strip() for line in (folder / "symptoms_dxy.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    stamp = "-".join(f"{p.stat().st_size}.{int(p.stat().st_mtime)}" for p in sorted(folder.glob("*.txt")))
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    path = cache_dir() / "symptom" / f"dxy-self-report-v2-{key}.json"
    if cache and path.exists():
        return SelfReportModel.load(path)
    model = SelfReportModel.fit(read_dxy_folder(folder), names)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        model.save(path)
    return model
