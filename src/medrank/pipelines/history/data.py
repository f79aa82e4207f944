"""The built re-ranking format (JSONL) and helpers shared by builders, models and evaluation.

One line per sample::

    {"id": "mts-train-0012-t3", "dialogue_id": "mts-train-0012", "source": "mts",
     "context": [{"speaker": "doctor", "text": "..."}, {"speaker": "patient", "text": "..."}],
     "asked": ["do you have any allergies?"],           # the doctor's questions (normalised)
     "positives": ["q00017"],                          # bank ids of the asked questions
     "candidates": ["q00017", "q00003", ...],          # first-stage order (best first)
     "first_stage_scores": [3.1, 2.7, ...]}

Labels are defined on the candidate list: a candidate is relevant (grade 1) when it is one
of ``positives``. A built folder holds ``bank.jsonl`` (``{"id", "text", "count", "members"}``),
one ``<split>.jsonl`` per split and ``meta.json`` (how it was built, sizes, first-stage recall).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medrank.records import Qrels, Ranking, Run

SPEAKERS = ("doctor", "patient", "family", "clinician", "other")


@dataclass
class Turn:
    speaker: str
    text: str


@dataclass
class Sample:
    """One re-ranking sample: dialogue so far, candidate questions, positives."""

    id: str
    dialogue_id: str
    source: str
    context: list[Turn]
    asked: list[str]
    positives: list[str]
    candidates: list[str] = field(default_factory=list)
    first_stage_scores: list[float] = field(default_factory=list)

    def labels(self) -> list[int]:
        pos = set(self.positives)
        return [int(c in pos) for c in self.candidates]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Sample:
        try:
            turns = [Turn(str(t["speaker"]), str(t["text"])) for t in obj["context"]]
            return cls(
                id=str(obj["id"]),
                dialogue_id=str(obj.get("dialogue_id", obj["id"])),
                source=str(obj.get("source", "")),
                context=turns,
                asked=[str(q) for q in obj.get("asked", [])],
                positives=[str(p) for p in obj.get("positives", [])],
                candidates=[str(c) for c in obj.get("candidates", [])],
                first_stage_scores=[float(s) for s in obj.get("first_stage_scores", [])],
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed history sample {obj.get('id', '?')!r}: {exc}") from exc


@dataclass
class BankQuestion:
    id: str
    text: str
    count: int
    members: list[str]


def render_dialogue(turns: Sequence[Turn]) -> str:
    """Dialogue text fed to the models: one ``speaker: text`` line per turn (oldest first)."""
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    from medrank.utils.io import atomic_write_text

    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return len(lines)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (build it with `medrank history build`)")
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc})") from exc
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}:{n}: expected one JSON object per line, got a {type(obj).__name__}")
                out.append(obj)
    return out


def read_samples(path: Path) -> list[Sample]:
    return [Sample.from_json(o) for o in read_jsonl(path)]


def read_bank(path: Path) -> list[BankQuestion]:
    return [BankQuestion(str(o["id"]), str(o["text"]), int(o.get("count", 1)), list(o.get("members", [])))
            for o in read_jsonl(path)]


def bank_texts(bank: Sequence[BankQuestion]) -> dict[str, str]:
    return {q.id: q.text for q in bank}


def candidate_qrels(samples: Sequence[Sample]) -> Qrels:
    """Grade-1 qrels of the positives inside each sample's candidate list (samples without one are skipped)."""
    qrels = Qrels()
    for s in samples:
        for cid, y in zip(s.candidates, s.labels(), strict=True):
            if y:
                qrels.add(s.id, cid, 1)
    return qrels


def run_from_scores(samples: Sequence[Sample], scores: dict[str, Sequence[float]]) -> Run:
    """Rank each sample's candidates by descending score (ties keep first-stage order)."""
    import numpy as np

    run: Run = {}
    for s in samples:
        sc = np.asarray(scores[s.id], dtype=np.float64)
        if sc.shape != (len(s.candidates),):
            raise ValueError(f"sample {s.id}: {sc.shape[0]} scores for {len(s.candidates)} candidates")
        order = np.argsort(-sc, kind="stable")
        run[s.id] = Ranking(s.id, tuple(s.candidates[i] for i in order), tuple(float(sc[i]) for i in order))
    return run
