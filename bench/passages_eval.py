"""Answer passage retrieval on MedQuAD validation documents: CDV and every baseline (the paper's Table 3).

Protocol (Arnold et al., WWW 2020): per (entity, aspect) query BM25 retrieves
64 candidates from all validation passages; missing true answers overwrite
the lowest false candidates; the list is shuffled (seed 13); each model
re-ranks the 64. R@1, R@10, MAP (+ MRR, nDCG@10) in %. A second table ranks
all validation passages (full corpus, no candidate list).

Validation = 20 % of the visible documents with ≥ 2 answered passages
(seed 13, by document); the trained models saw only the other 80 %.

    python bench/passages_eval.py --cdv runs/passages/cdv --cross-encoder runs/passages/cross-encoder \
        --dssm runs/passages/dssm --knrm runs/passages/knrm [--threads 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common
import numpy as np

from medrank.config import data_root, seed_everything, set_threads
from medrank.data.medquad import load_medquad
from medrank.metrics import to_markdown_table
from medrank.pipelines.passages.evaluation import METRIC_NAMES, evaluate_systems
from medrank.pipelines.passages.protocol import FixedScores, evaluate_reranker, fuse

PAPER = {  # reported in the paper's Table 3 (MedQuAD), for reference only
    "paper: BM25": {"R@1": 0.2948, "R@10": 0.8611, "MAP": 0.4889},
    "paper: CDV + fastText": {"R@1": 0.4526, "R@10": 0.9229, "MAP": 0.6256},
    "paper: best baseline (HAR)": {"R@1": 0.5565, "R@10": 0.9317, "MAP": 0.6910},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cdv", type=Path)
    ap.add_argument("--cross-encoder", type=Path)
    ap.add_argument("--dssm", type=Path)
    ap.add_argument("--knrm", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--hybrid-weight", type=float, default=0.5)
    ap.add_argument("--cascade-depth", type=int, default=0,
                    help="> 0: the cross-encoder re-scores only the CDV + BM25 hybrid's top passages (CPU budget)")
    ap.add_argument("--name", default="passages_eval")
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    corpus = load_medquad("valid", seed=args.seed)
    systems = ["bm25", "tfidf", "dense", "dssm", "knrm", "cdv", "cross-encoder", "hybrid", "hybrid-bm25"]
    out = evaluate_systems(
        corpus, systems, cdv_run=args.cdv, cross_encoder_run=args.cross_encoder, dssm_run=args.dssm,
        knrm_run=args.knrm, seed=args.seed, full=True, hybrid_weight=args.hybrid_weight,
        cascade_depth=args.cascade_depth,
    )
    scores, candidates = out.pop("_scores"), out.pop("_candidates")
    # Hybrid weight sweep on the same validation queries (reported, not used for the headline row).
    sweep: dict[str, dict[str, dict[str, float]]] = {}
    for partner in ("Cross-encoder (MiniLM)", "BM25"):
        if "CDV" in scores and partner in scores:
            sweep[partner] = {}
            for w in np.round(np.linspace(0.0, 1.0, 11), 2):
                fused = fuse([(scores["CDV"], float(w)), (scores[partner], 1.0 - float(w))])
                sweep[partner][str(w)] = evaluate_reranker(FixedScores("h", fused), corpus, candidates)["metrics"]
    cdv_train = {}
    if args.cdv is not None and (args.cdv / "summary.json").exists():
        cdv_train = json.loads((args.cdv / "summary.json").read_text())
    payload = {
        "environment": common.environment(args.threads, args.seed, str(data_root())),
        **out,
        "hybrid_weight_sweep": sweep,
        "cdv_training": cdv_train,
        "paper_table3_medquad": PAPER,
    }
    stats = out["corpus_stats"]
    md = [
        f"### MedQuAD validation ({stats['documents']} documents, {stats['passages']:,} passages, "
        f"{stats['queries']:,} (entity, aspect) queries), 64-candidate re-ranking, metrics in %\n",
        to_markdown_table(out["systems"], METRIC_NAMES),
        "\nPaper (Table 3, MedQuAD, their test split — a different, held-out set):\n",
        to_markdown_table(PAPER, ["R@1", "R@10", "MAP"]),
        "\n### Full-corpus retrieval (every validation passage is a candidate)\n",
        to_markdown_table(out["full_corpus"], METRIC_NAMES),
    ]
    for partner, rows in sweep.items():
        md += [f"\n### Hybrid CDV + {partner}: weight w of CDV (z-scores), swept on the same validation queries "
               "(the headline rows use w = 0.5, fixed in advance)\n",
               to_markdown_table({f"w={w}": m for w, m in rows.items()}, ["R@1", "R@10", "MAP"])]
    common.write(args.name, payload, "\n".join(md))


if __name__ == "__main__":
    main()
