"""What the training texts say about terms: how often each is annotated, and which terms a clause's exact
words were annotated with.

CHIP-CDN's answers are strongly skewed (癌, 化学治疗 and 高血压 are annotated hundreds of times; most of the
40,474 names never), and the same clause recurs across texts with the same answers. A retriever scores a
(text, term) pair alone and sees neither, so the set decision (:class:`~medrank.pipelines.symptom.sets.SetDetector`)
reads them as three features of each candidate:

* ``train_prior`` — log(1 + the number of training texts annotated with the term);
* ``span_memory`` — among training texts holding the candidate's clause word for word, the share annotated with
  the term (``UNSEEN`` when no training text holds it);
* ``text_memory`` — the same, best over every clause of the complaint and the whole complaint.

It is built from the training side only (the texts the retriever learned from); the set decision is fitted on
the validation side, so neither feature has seen the texts it is calibrated on. Plain counts in JSON.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrank.utils.io import atomic_write_json

PathLike = str | os.PathLike[str]
MEMORY_FORMAT = "medrank-symptom-training-memory"
UNSEEN = -0.1  # a clause no training text holds (below every share, which are >= 0)


@dataclass(frozen=True)
class TrainingMemory:
    n_texts: int
    term_counts: Mapping[str, int]  # term id -> training texts annotated with it
    clause_counts: Mapping[str, int]  # clause -> training texts holding it
    clause_terms: Mapping[str, Mapping[str, int]]  # clause -> term id -> those of its texts annotated with the term

    @classmethod
    def build(cls, texts: Sequence[str], gold: Sequence[Iterable[str]], clauses: Callable[[str], Iterable[str]]
              ) -> TrainingMemory:
        """Count over labelled training ``texts``; ``clauses(text)`` cuts a text as the detector does (its spans)."""
        if len(texts) != len(gold) or not texts:
            raise ValueError(f"{len(texts)} texts and {len(gold)} gold sets: give the same, non-zero number")
        terms: Counter[str] = Counter()
        n_clause: Counter[str] = Counter()
        with_term: dict[str, Counter[str]] = {}
        for text, answer in zip(texts, gold, strict=True):
            answer = set(answer)
            terms.update(answer)
            for clause in set(clauses(text)) | {text}:
                n_clause[clause] += 1
                with_term.setdefault(clause, Counter()).update(answer)
        return cls(len(texts), dict(terms), dict(n_clause), {c: dict(t) for c, t in with_term.items()})

    def prior(self, term: str) -> float:
        return math.log1p(self.term_counts.get(term, 0))

    def share(self, clause: str, term: str) -> float:
        """Share of the training texts holding ``clause`` that are annotated with ``term`` (``UNSEEN`` if none)."""
        n = self.clause_counts.get(clause, 0)
        return self.clause_terms[clause].get(term, 0) / n if n else UNSEEN

    def to_json(self) -> dict[str, Any]:
        return {"format": MEMORY_FORMAT, "version": 1, "n_texts": self.n_texts, "term_counts": dict(self.term_counts),
                "clause_counts": dict(self.clause_counts), "clause_terms": {c: dict(t) for c, t in self.clause_terms.items()}}

    def save(self, path: PathLike) -> None:
        atomic_write_json(path, self.to_json())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TrainingMemory:
        if d.get("format") != MEMORY_FORMAT:
            raise ValueError("not a symptom training memory (format field missing or different)")
        clause_counts = {str(c): int(n) for c, n in d["clause_counts"].items()}
        clause_terms = {str(c): {str(t): int(n) for t, n in terms.items()} for c, terms in d["clause_terms"].items()}
        if set(clause_counts) != set(clause_terms):
            raise ValueError("a training memory's clause counts and clause terms name different clauses")
        return cls(int(d["n_texts"]), {str(t): int(n) for t, n in d["term_counts"].items()}, clause_counts, clause_terms)

    @classmethod
    def load(cls, path: PathLike) -> TrainingMemory:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
