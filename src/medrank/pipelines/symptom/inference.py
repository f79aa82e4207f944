"""Deployment side: a trained run → top-5 terms per query, optionally thresholded with β.

The paper's pre-consultation system shows the patient the 5 best terms; with a threshold it
only keeps terms whose similarity is at least ``β``, the score at which the validation
predictions reach precision ``α`` (calibrated at the end of training, stored in
``detector.json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrank.index.base import check_k
from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER
from medrank.records import Query, Ranking

DEFAULT_K = 5


class SymptomDetector:
    """A :class:`~medrank.retrieval.concept.ConceptRetriever` over a trained encoder plus its β."""

    def __init__(self, retriever: Any, beta: float | None = None, k: int = DEFAULT_K) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.retriever = retriever
        self.beta = beta
        self.k = k

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str], candidates: str = "gold") -> SymptomDetector:
        """Load ``RUN/index-<candidates>`` and the calibrated β of a run written by ``medrank train``."""
        from medrank.retrieval.concept import ConceptRetriever

        run = Path(run_dir)
        meta_path = run / DETECTOR_MARKER
        if not meta_path.exists():
            raise FileNotFoundError(f"{run} is not a trained symptom run (no {DETECTOR_MARKER}); train one with `medrank train`")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if candidates not in meta["candidates"]:
            raise ValueError(f"{run} has indexes for {sorted(meta['candidates'])}, not {candidates!r}")
        retriever = ConceptRetriever.load(run / meta["candidates"][candidates])
        return cls(retriever, meta.get("beta", {}).get(candidates), int(meta.get("k", DEFAULT_K)))

    def calibrate(self, dataset: Any, alpha: float) -> float | None:
        """Re-calibrate β so that the top-``k`` predictions on ``dataset`` are gold with precision ``alpha``."""
        from medrank.pipelines.symptom.evaluation import detection_threshold

        self.beta = detection_threshold(None, dataset, self.retriever, alpha, k=self.k)
        return self.beta

    @staticmethod
    def validation_set(run_dir: str | os.PathLike[str]) -> Any:
        """The validation split the run was trained against (from its ``config.json``)."""
        from medrank.pipelines.symptom.config import SymptomConfig
        from medrank.pipelines.symptom.task import load_task_data

        cfg = json.loads((Path(run_dir) / "config.json").read_text(encoding="utf-8"))
        return load_task_data(SymptomConfig.from_dict(cfg)).valid

    def detect(
        self,
        queries: Sequence[str | Query] | str | Query,
        k: int | None = None,
        threshold: bool | float = False,
    ) -> list[Ranking]:
        """Top-``k`` terms per query; ``threshold=True`` keeps only scores ``>= β`` (a float sets β)."""
        rankings = self.retriever.search(queries, k=self.k if k is None else check_k(k))
        beta = self.beta if threshold is True else (float(threshold) if threshold is not False else None)
        if threshold is True and beta is None:
            raise ValueError("this run has no calibrated beta; pass a float threshold instead")
        if beta is None:
            return rankings
        out = []
        for r in rankings:
            keep = [(i, s) for i, s in zip(r.ids, r.scores, strict=True) if s >= beta]
            out.append(Ranking.from_pairs(r.query_id, keep))
        return out

    def describe(self, ranking: Ranking) -> list[dict[str, Any]]:
        """A ranking as rows of ``{"id", "name", "score"}`` (and ``"codes"`` where the term has them)."""
        return self.retriever.describe(ranking)
