"""A matcher with no training: the cosine of a pretrained sentence encoder's vectors.

STMT re-ranks BM25's top 20 with a matcher trained on labelled question pairs. Before one is trained (a fresh
checkout), a sentence encoder that was trained on question pairs elsewhere stands in for it: all-MiniLM-L6-v2's
training data holds duplicate-question pairs (Reimers & Gurevych, 2019; the sentence-transformers training sets), and
multilingual-e5 is trained on question-answer and paraphrase pairs (Wang et al., 2022). Each of the two questions is
encoded on its own (a bi-encoder) and the pair scores ``cos(v_1, v_2)``; e5 reads both with its ``"query: "`` prompt,
as it does for symmetric tasks. ``bench/similar_zero_shot.py`` measures it against BM25's own order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medrank.utils.io import atomic_write_json

PathLike = str | os.PathLike[str]
COSINE_CALIBRATION_FORMAT = "medrank-similar-cosine-calibration"
#: where the calibrations fitted by ``bench/similar_calibration.py`` ship: ``<language>-<encoder>.json``
CALIBRATIONS = Path(__file__).with_name("calibrations")


class EncoderCosineMatcher:
    """``score(pairs)``: the cosine of ``encoder``'s vectors of the two questions of each pair, shape ``(n,)``; the
    matcher interface :class:`~medrank.pipelines.similar.retrieval.SimilarQuestionSearcher` reads (no training, nothing
    to save)."""

    def __init__(self, encoder: Any) -> None:
        if not callable(getattr(encoder, "encode", None)):
            raise TypeError(f"encoder must have encode(texts, kind=...), got {type(encoder).__name__}")
        self.encoder = encoder
        self.name = f"{getattr(encoder, 'name', 'encoder')} cosine"

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        # a question shared by several pairs (the new one, against each candidate) is encoded once
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        row = {t: i for i, t in enumerate(texts)}
        vectors = self.encoder.encode(texts, kind="query", batch_size=batch_size, show_progress=False)
        first = vectors[[row[a] for a, _ in pairs]]
        second = vectors[[row[b] for _, b in pairs]]
        return np.einsum("ij,ij->i", first, second).astype(np.float32)


@dataclass(frozen=True)
class CosineCalibration:
    """An encoder's cosine of two questions → the probability that they ask the same thing (Platt scaling,
    Platt 1999: a logistic curve over the one score)::

        P(same | cos) = 1 / (1 + exp(-(slope · cos + intercept)))

    fitted on labelled question pairs of the language (:meth:`fit`; ``bench/similar_calibration.py``). A cosine is no
    probability: e5-small puts most Chinese question pairs between 0.9 and 0.97, MiniLM spreads English ones over
    0.2-1; the curve says what a cosine means on the pairs it was fitted on (their share of same-question pairs
    included: ``info["positive_share"]``)."""

    encoder: str
    language: str
    slope: float
    intercept: float
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.slope) and np.isfinite(self.intercept)):
            raise ValueError(f"slope and intercept must be finite, got {self.slope!r}, {self.intercept!r}")

    def probability(self, cosines: np.ndarray | Sequence[float]) -> np.ndarray:
        z = self.slope * np.asarray(cosines, dtype=np.float64) + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))

    @classmethod
    def fit(cls, cosines: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray, encoder: str, language: str,
            **info: Any) -> CosineCalibration:
        """The curve with the lowest log loss over ``(cosine, label)`` pairs (label 1: the same question); an almost
        unpenalised logistic regression, so the fit follows the pairs and not a prior."""
        from sklearn.linear_model import LogisticRegression

        x = np.asarray(cosines, dtype=np.float64).reshape(-1, 1)
        y = np.asarray(labels, dtype=int).reshape(-1)
        if len(x) != len(y) or len(set(y.tolist())) != 2 or not set(y.tolist()) <= {0, 1}:
            raise ValueError("fitting needs as many cosines as labels, and labels of both kinds (0 and 1)")
        model = LogisticRegression(C=1e6, max_iter=1000).fit(x, y)
        return cls(encoder, language, float(model.coef_[0, 0]), float(model.intercept_[0]),
                   {"pairs": int(len(y)), "positive_share": round(float(y.mean()), 4), **info})

    def to_json(self) -> dict[str, Any]:
        return {"format": COSINE_CALIBRATION_FORMAT, "version": 1, "encoder": self.encoder, "language": self.language,
                "slope": self.slope, "intercept": self.intercept, "info": self.info}

    def save(self, path: PathLike) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def from_json(cls, d: Any) -> CosineCalibration:
        if not isinstance(d, dict) or d.get("format") != COSINE_CALIBRATION_FORMAT:
            raise ValueError(f"not a cosine calibration (format {COSINE_CALIBRATION_FORMAT!r})")
        try:
            return cls(str(d["encoder"]), str(d["language"]), float(d["slope"]), float(d["intercept"]),
                       dict(d.get("info") or {}))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"a malformed cosine calibration: {e}") from None

    @classmethod
    def load(cls, path: PathLike) -> CosineCalibration:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def shipped_cosine_calibration(language: str, encoder: str) -> CosineCalibration | None:
    """The calibration shipped for ``encoder``'s cosine in ``language`` (``calibrations/<language>-<encoder>.json``),
    or None where none was fitted (another encoder: its cosines mean something else)."""
    path = CALIBRATIONS / f"{language}-{encoder}.json"
    if not path.is_file():
        return None
    calibration = CosineCalibration.load(path)
    return calibration if (calibration.language, calibration.encoder) == (language, encoder) else None
