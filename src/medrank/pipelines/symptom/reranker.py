"""A cross-encoder that re-ranks a trained symptom retriever's candidates: retrieve → re-rank → decide.

The bi-encoder reads a phrase and a term apart, one vector each, so terms that differ in one
compositional detail sit close together: "increased bone density of end part of the outermost bone of
the index finger" lands among a dozen phalanx terms. A cross-encoder reads the phrase and the term
together (``[CLS] phrase [SEP] name: definition [SEP]``, Nogueira & Cho, 2019, "Passage Re-ranking with
BERT") and can compare them word by word, at a cost per pair; so it only re-scores the first stage's
top ``depth`` candidates of each query. A re-scored candidate's score is the cross-encoder's logit plus a
weight times its first-stage score (the weight chosen on the validation phrases): trained on a few
thousand phrases on a CPU, the cross-encoder alone ranks below the bi-encoder it re-ranks, but the two
err apart and their sum ranks above either.

Training (:func:`~medrank.pipelines.symptom.reranker_training.train_term_reranker`, task ``symptom-reranker``) reads the first stage's own training
phrases and validation carve-out (the run's ``config.json``: same dataset, same split). Each phrase
makes a group of the gold term and ``group - 1`` negatives, scored jointly and trained with the
listwise softmax (:class:`~medrank.losses.listwise_softmax.ListwiseSoftmaxLoss`): the negatives are the
first stage's own top candidates for the phrase (what the re-ranker must sort at inference) and, for a
share of the groups, one of the gold term's is-a siblings (the terms a fine-grained phrase is confused
with). The epoch with the best re-ranked validation Acc@1 is kept.

A trained re-ranker lives in ``RUN/reranker/`` beside the run it re-ranks: ``model/`` (a ``transformers``
sequence-classification folder), ``reranker.json`` (:data:`META_FILE`) and its own set decision
``sets-hpo.json``, fitted over the re-ranked spans the same way as the run's (a calibration fitted on
bi-encoder scores does not read re-ranker scores). :meth:`TermReranker.load` opens it, and a
:class:`~medrank.pipelines.symptom.sets.SetDetector` given it re-ranks the hits of each span of a complaint
(a phrase, what it was trained on; the whole text keeps the first stage's hits).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.records import Concept

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: ``RUN/reranker/``: a trained re-ranker of the run's candidates
RERANKER_DIR = "reranker"
META_FILE = "reranker.json"
META_FORMAT = "medrank-term-reranker"
#: the backend the service runs a re-ranker on when its encoders' backend is ``"auto"`` (bench/symptom_sets.py, part en:
#: its decided sets against torch's)
SERVED_BACKEND = "onnx-int8"
#: how a term is written for the cross-encoder (part of the saved meta: a model trained on one recipe reads it)
TERM_TEXT = "name: first definition sentence"


def term_text(concept: Concept) -> str:
    """``"Night gasping: Waking up at night gasping for breath"``: the name and, when the term has one, the first
    sentence of its definition (:func:`medrank.retrieval.concept.definition_entry`), the plain words a phrase
    is most often written in."""
    from medrank.retrieval.concept import definition_entry

    definition = definition_entry(concept)
    return concept.name if definition is None or definition == concept.name else f"{concept.name}: {definition}"


class TermReranker:
    """Re-scores each query's top ``depth`` candidates with a cross-encoder (see the module docstring).

    ``scorer.score_pairs(queries, texts)`` gives one logit per pair (:class:`medrank.models.pair_classifier.PairScorer`
    or its ONNX Runtime twin :class:`medrank.encoders.onnx.OnnxPairScorer`); ``concepts`` maps term ids to the
    concepts the candidates come from (their :func:`term_text` is built once, on first use).
    """

    def __init__(self, scorer: Any, concepts: Mapping[str, Concept], depth: int = 10, info: Mapping[str, Any] | None = None,
                 first_stage_weight: float = 0.0) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if not first_stage_weight >= 0:
            raise ValueError(f"first_stage_weight must be >= 0, got {first_stage_weight!r}")
        self.scorer = scorer
        self.concepts = concepts
        self.depth = depth
        #: a re-scored hit's score is ``logit + first_stage_weight * first-stage score``: the two stages err apart,
        #: and the sum (the weight chosen on the validation phrases) ranks better than either alone
        self.first_stage_weight = float(first_stage_weight)
        self.info = dict(info or {})
        self._texts: dict[str, str] = {}

    def text(self, cid: str) -> str:
        if cid not in self._texts:
            concept = self.concepts.get(cid)
            self._texts[cid] = term_text(concept) if concept is not None else cid
        return self._texts[cid]

    def rerank(self, queries: Sequence[str], hits: Sequence[Sequence[tuple[str, float]]]) -> list[list[tuple[str, float]]]:
        """Each query's hits with the top ``depth`` re-scored (the cross-encoder's logit plus ``first_stage_weight``
        times the hit's own score) and re-ordered; the first stage's order stands below them (scores shifted under
        the re-ranked ones)."""
        if len(queries) != len(hits):
            raise ValueError(f"{len(queries)} queries but {len(hits)} hit lists")
        pair_q, pair_t = [], []
        for q, row in zip(queries, hits, strict=True):
            for cid, _ in row[: self.depth]:
                pair_q.append(q)
                pair_t.append(self.text(cid))
        scores = self.scorer.score_pairs(pair_q, pair_t) if pair_q else np.zeros(0, dtype=np.float32)
        out, pos = [], 0
        for row in hits:
            n = min(self.depth, len(row))
            w = self.first_stage_weight
            top = sorted(((cid, float(s) + w * float(first)) for (cid, first), s in zip(row[:n], scores[pos : pos + n],
                                                                                         strict=True)),
                         key=lambda x: (-x[1], x[0]))
            pos += n
            floor = min((s for _, s in top), default=0.0)
            out.append(top + [(cid, floor - 1.0 - j) for j, (cid, _) in enumerate(row[n:])])
        return out

    # -- saving and loading --------------------------------------------------------------------------
    @staticmethod
    def folder(run_dir: PathLike) -> Path:
        return Path(run_dir) / RERANKER_DIR

    @classmethod
    def exists(cls, run_dir: PathLike) -> bool:
        return (cls.folder(run_dir) / META_FILE).is_file()

    @classmethod
    def calibration_path(cls, run_dir: PathLike, candidates: str) -> Path:
        """The set decision fitted over the re-ranked search of ``RUN/index-<candidates>``."""
        return cls.folder(run_dir) / f"sets-{candidates}.json"

    @classmethod
    def load_calibrated(cls, run_dir: PathLike, candidates: str, concepts: Mapping[str, Concept],
                        backend: str = "torch") -> TermReranker | None:
        """The run's re-ranker when it holds a set decision for ``candidates`` (:meth:`calibration_path`; a run
        re-ranked without one is not served re-ranked), else ``None``."""
        if not cls.calibration_path(run_dir, candidates).exists():
            return None
        return cls.load(run_dir, concepts, backend=backend)

    @classmethod
    def load(cls, run_dir: PathLike, concepts: Mapping[str, Concept], backend: str = "torch",
             threads: int | None = None) -> TermReranker:
        """The re-ranker trained for ``run_dir`` (``RUN/reranker/``); ``backend``: ``"torch"``, ``"onnx"`` or
        ``"onnx-int8"`` (ONNX Runtime, exported once and cached like an encoder's), ``"auto"``:
        :data:`SERVED_BACKEND`."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from medrank.encoders.onnx import check_backend
        from medrank.utils.hf import quiet_weight_loading

        folder = cls.folder(run_dir)
        meta_path = folder / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"{run_dir} has no trained re-ranker ({RERANKER_DIR}/{META_FILE}); "
                                    "train one with a task: symptom-reranker config")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != META_FORMAT:
            raise ValueError(f"{meta_path} is not a medrank term re-ranker (format {meta.get('format')!r})")
        if meta.get("term_text") != TERM_TEXT:
            raise ValueError(f"{meta_path} was trained on terms written as {meta.get('term_text')!r}; this version "
                             f"writes them as {TERM_TEXT!r}: train it again")
        backend = SERVED_BACKEND if backend == "auto" else check_backend(backend)
        tokenizer = AutoTokenizer.from_pretrained(str(folder / "model"))
        with quiet_weight_loading():
            model = AutoModelForSequenceClassification.from_pretrained(str(folder / "model"))
        model.eval()
        scorer = make_scorer(model, tokenizer, int(meta["max_length"]), backend, threads)
        return cls(scorer, concepts, int(meta["depth"]), info={**meta, "backend": backend},
                   first_stage_weight=float(meta.get("first_stage_weight", 0.0)))


def make_scorer(model: Any, tokenizer: Any, max_length: int, backend: str = "torch", threads: int | None = None) -> Any:
    """A pair scorer over a sequence-classification ``model``: torch, or ONNX Runtime (fp32 / int8)."""
    from medrank.models.pair_classifier import PairScorer

    if backend in ("torch", "torch-bf16"):
        return PairScorer(model, tokenizer, max_length)
    from medrank.encoders.onnx import OnnxPairScorer

    return OnnxPairScorer(model, tokenizer, max_length, quantized=backend == "onnx-int8", threads=threads,
                          name="symptom-term-reranker")
