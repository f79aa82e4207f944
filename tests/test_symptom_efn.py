"""E-FN inside the mining step: with a given β, no mined negative scores ≥ β, and the excluded pairs are counted."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.pipelines.symptom.task import SymptomTask
from tests.test_symptom_training import config, tiny_root  # noqa: F401  (tiny_root is a fixture)


@pytest.mark.parametrize("loss, side", [("nce-forward", "terms"), ("nce-backward", "queries")])
def test_efn_beta_removes_high_scoring_negatives(tiny_root, loss, side):  # noqa: F811
    cfg = config(tiny_root, loss=loss, miner="topk", n_hard_terms=2, n_hard_queries=2, pool=6, batch_size=4,
                 max_steps_per_epoch=3)
    task = SymptomTask(cfg, tiny_root / "run")
    q_emb = task.model.encode(task.pairs.query_texts, "query", show_progress=False)
    t_emb = task.model.encode(task.pairs.term_texts, "passage", show_progress=False)
    sims = q_emb @ t_emb.T  # (queries, terms)
    if side == "terms":
        gold = {q: set(task.pairs.gold[q].tolist()) for q in range(len(task.pairs.query_texts))}
        scores = sims
    else:
        gold = {t: set(task.queries_of_term[t].tolist()) for t in range(len(task.pairs.term_texts))}
        scores = sims.T

    # β in the widest gap between neighbouring non-gold scores in the top quarter to half (no score near β)
    def non_gold(a):
        return np.array([s for c, s in enumerate(scores[a]) if c not in gold[a]])

    every = np.sort(np.concatenate([non_gold(a) for a in gold]))[::-1].astype(np.float64)
    lo, hi = len(every) // 4, len(every) // 2
    cut = lo + int(np.argmax(every[lo - 1 : hi - 1] - every[lo:hi]))
    beta = float(every[cut - 1] + every[cut]) / 2
    assert every[cut - 1] - every[cut] > 1e-5

    task.calibrate_efn = lambda epoch, q, t: beta
    task.prepare_epoch(1)
    stats = task.epoch_stats[1]
    assert stats["efn_beta"] == beta

    key = "neg_terms" if side == "terms" else "neg_queries"
    col = 0 if side == "terms" else 1  # the anchor of each pair: its query, or its term
    anchors = set()
    checked = 0
    for batch in task.epoch_batches:
        for pair, negs, ok in zip(batch["pairs"], batch[key], batch[key + "_valid"], strict=True):
            a = int(pair[col])
            anchors.add(a)
            allowed = [c for c, s in enumerate(scores[a]) if c not in gold[a] and s < beta]
            best_two = sorted(allowed, key=lambda c: -scores[a][c])[:2]
            # top-k miner with k = n: exactly the two best non-gold candidates under β
            assert sorted(negs[ok].tolist()) == sorted(best_two)
            assert all(scores[a][c] < beta for c in negs[ok])
            checked += 1
    assert checked == stats["pairs"] > 0
    # every (anchor, non-gold candidate) at or above β is counted once
    expected = sum(int((non_gold(a) >= beta).sum()) for a in anchors)
    assert expected > 0 and stats["efn_excluded"] == expected
