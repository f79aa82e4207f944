"""The question bank: training-dialogue doctor questions merged into canonical questions.

Clustering (documented choice, reported in ``meta.json``):

1. questions are normalised (:func:`~medrank.pipelines.history.builders.mts_aci.normalize_question`)
   and exact duplicates merged (their count is the frequency used by the first stage's prior);
2. the distinct questions are embedded with MiniLM (unit vectors) and clustered by **leader
   clustering** in decreasing frequency (ties: alphabetical): the most frequent unassigned
   question opens a cluster and absorbs every unassigned question whose cosine similarity to
   it is ``>= threshold`` (default :data:`DEFAULT_THRESHOLD` = 0.80);
3. the leader — the most frequent phrasing — is the canonical text; the cluster's count is
   the sum of its members' counts.

Measured MiniLM cosines behind the 0.80 choice: "do you have any allergies?" / "any allergies?"
0.94, / "are you allergic to anything?" 0.82, "do you have children?" / "do you have kids?" 0.96,
"how old are you?" / "how old are you now?" 0.86 (merged); "do you smoke?" / "do you drink?" 0.63,
"any chest pain?" / "any abdominal pain?" 0.59, "are you married?" / "are you single?" 0.72,
"do you work?" / "are you working?" 0.78 (kept apart). A question of a new dialogue maps to the
nearest canonical question when its similarity reaches the same threshold; otherwise it is out of the bank (it counts against
first-stage recall, and cannot be a positive).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from medrank.pipelines.history.data import BankQuestion

if TYPE_CHECKING:
    from medrank.encoders.base import Encoder

DEFAULT_THRESHOLD = 0.80


def leader_clusters(texts: Sequence[str], counts: Sequence[int], vectors: np.ndarray, threshold: float) -> list[int]:
    """Leader id (index into ``texts``) of every text; leaders visited by decreasing count."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    n = len(texts)
    if vectors.shape[0] != n or len(counts) != n:
        raise ValueError("texts, counts and vectors must have the same length")
    order = sorted(range(n), key=lambda i: (-counts[i], texts[i]))
    leader = [-1] * n
    vec = np.asarray(vectors, dtype=np.float32)
    for i in order:
        if leader[i] >= 0:
            continue
        leader[i] = i
        sims = vec @ vec[i]
        for j in np.flatnonzero(sims >= threshold - 1e-6):
            if leader[j] < 0:
                leader[j] = i
    return leader


def build_bank(
    questions: Sequence[str], encoder: Encoder, threshold: float = DEFAULT_THRESHOLD, batch_size: int = 64,
    show_progress: bool = False,
) -> tuple[list[BankQuestion], dict[str, str]]:
    """Cluster all asked questions (with repeats) into a bank; returns the bank and ``text -> bank id``."""
    counts = Counter(questions)
    if not counts:
        raise ValueError("no questions to build a bank from")
    texts = sorted(counts)
    vecs = encoder.encode(texts, kind="query", batch_size=batch_size, show_progress=show_progress)
    leaders = leader_clusters(texts, [counts[t] for t in texts], vecs, threshold)
    groups: dict[int, list[int]] = {}
    for i, lead in enumerate(leaders):
        groups.setdefault(lead, []).append(i)
    # canonical ids ordered by cluster frequency so q00000 is the most asked question
    ordered = sorted(groups, key=lambda lead: (-sum(counts[texts[i]] for i in groups[lead]), texts[lead]))
    bank: list[BankQuestion] = []
    mapping: dict[str, str] = {}
    for n, lead in enumerate(ordered):
        qid = f"q{n:05d}"
        members = sorted((texts[i] for i in groups[lead]), key=lambda t: (-counts[t], t))
        bank.append(BankQuestion(qid, texts[lead], sum(counts[t] for t in members), members))
        for t in members:
            mapping[t] = qid
    return bank, mapping


def map_to_bank(
    questions: Sequence[str], bank: Sequence[BankQuestion], bank_vectors: np.ndarray, encoder: Encoder,
    known: dict[str, str], threshold: float = DEFAULT_THRESHOLD,
) -> list[str | None]:
    """Bank id of each question: exact member match, else nearest canonical at ``>= threshold``, else None."""
    out: list[str | None] = [known.get(q) for q in questions]
    todo = [i for i, m in enumerate(out) if m is None]
    if todo:
        vecs = encoder.encode([questions[i] for i in todo], kind="query")
        sims = vecs @ bank_vectors.T
        best = sims.argmax(axis=1)
        for row, i in enumerate(todo):
            if sims[row, best[row]] >= threshold - 1e-6:
                out[i] = bank[int(best[row])].id
    return out
