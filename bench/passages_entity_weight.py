"""CDV's entity weight w (score = w·cos(entity) + (1 − w)·cos(aspect)) on MedQuAD validation, both settings.

w = 0.5 is the paper's concatenated query and the default everywhere else;
this sweep (on the validation queries themselves) shows how much each half of
the query carries in the 64-candidate protocol and in full-corpus retrieval.

    python bench/passages_entity_weight.py --cdv runs/passages/cdv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import common

from medrank.config import data_root, seed_everything, set_threads
from medrank.data.medquad import load_medquad
from medrank.metrics import to_markdown_table
from medrank.pipelines.passages.baselines import CDVRanker
from medrank.pipelines.passages.cdv import TrainedCDV
from medrank.pipelines.passages.protocol import build_candidates, evaluate_full, evaluate_reranker

WEIGHTS = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cdv", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    corpus = load_medquad("valid", seed=args.seed)
    candidates = build_candidates(corpus, seed=args.seed)
    index = TrainedCDV(args.cdv).build_index(list(corpus.documents), show_progress=False)
    rerank_rows, full_rows = {}, {}
    for w in WEIGHTS:
        ranker = CDVRanker(index, entity_weight=w)
        rerank_rows[f"w={w}"] = evaluate_reranker(ranker, corpus, candidates)["metrics"]
        full_rows[f"w={w}"] = evaluate_full(ranker.rank_all, corpus)["metrics"]
        print(w, rerank_rows[f"w={w}"], full_rows[f"w={w}"])
    metrics = ["R@1", "R@10", "MAP"]
    md = (
        "### CDV entity weight w, 64-candidate protocol (MedQuAD validation)\n\n"
        + to_markdown_table(rerank_rows, metrics)
        + "\n\n### CDV entity weight w, full-corpus retrieval (all validation passages)\n\n"
        + to_markdown_table(full_rows, metrics)
    )
    common.write(
        "passages_entity_weight",
        {"environment": common.environment(args.threads, args.seed, str(data_root())), "rerank": rerank_rows,
         "full_corpus": full_rows},
        md,
    )


if __name__ == "__main__":
    main()
