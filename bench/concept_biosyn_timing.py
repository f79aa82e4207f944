"""Wall time of the BioSyn recipe's parts on this CPU, to extrapolate an epoch of full fine-tuning.

An epoch is: encode the 76,237 MEDIC entries with the current encoder (candidate mining and
evaluation share this pass), then ``ceil(mentions / batch)`` training steps, each encoding a batch of
mentions and their 20 candidates with gradients. This script times ``--steps`` real training steps
(candidates: the sparse top 20, same shapes as the recipe's) and the encoding of ``--entries`` MEDIC
entries, for full fine-tuning and for the top-block recipe, and writes the extrapolated epoch.

    python bench/concept_biosyn_timing.py --threads 2
"""

from __future__ import annotations

import argparse
import math
import time

import common


def measure(train_layers: int | None, steps: int, entries: int, threads: int) -> dict[str, float]:
    import numpy as np
    import torch

    from medrank.pipelines.symptom.biosyn import BioSynConfig, BioSynTask

    torch.set_num_threads(threads)
    cfg = BioSynConfig(train_layers=train_layers, topk=20, sparse_ratio=1.0, lr=2e-5 if train_layers is None else 2e-4)
    task = BioSynTask(cfg)
    task.candidates = task.sparse_candidates  # the recipe's shapes: 20 candidates per mention
    rng = np.random.default_rng(13)
    sample = [task.entry_texts[i] for i in rng.choice(len(task.entry_texts), entries, replace=False)]
    if task.bi.use_cache:  # the top-block recipe reads the frozen bottom from the cache: time what it runs
        task.bi.fill_cache(sample, "passage")
    t0 = time.perf_counter()
    task.bi.encode(sample, "passage", batch_size=256)
    per_entry = (time.perf_counter() - t0) / entries
    params = [p for p in task.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr)
    batches = task.batches(1)
    task.model.train()
    times = []
    for batch in batches[: steps + 1]:
        t0 = time.perf_counter()
        loss = task.loss_fn(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    step = float(np.median(times[1:]))  # the first step pays one-off allocations
    n_steps = math.ceil(len(task.texts) / cfg.batch_size)
    return {"seconds_per_step": round(step, 2), "steps_per_epoch": n_steps,
            "entries_per_second": round(1 / per_entry, 1), "medic_entries": len(task.entry_texts),
            "epoch_seconds_estimate": round(n_steps * step + len(task.entry_texts) * per_entry, 0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--entries", type=int, default=1024)
    args = ap.parse_args()
    import os

    env = common.environment(args.threads, 13, "../shared/data")
    res = {name: measure(layers, args.steps, args.entries, args.threads) for name, layers in (("full fine-tuning", None), ("top block", 1))}
    env_after = [round(x, 2) for x in os.getloadavg()]
    md = ["# BioSyn recipe: time per part on this CPU", "",
          f"Median of {args.steps} training steps (batch 16 mentions × 20 candidates, encoder and sparse weight trained) and the "
          f"encoding of {args.entries} random MEDIC entries; epoch = steps × step time + all MEDIC entries × entry time. "
          f"Load average {env['load_average_1_5_15']} before, {env_after} after (other sessions share the 2 cores). "
          "`python bench/concept_biosyn_timing.py`.", "",
          "| recipe | s / step | steps / epoch | entries / s | epoch estimate |", "|---|---:|---:|---:|---:|"]
    for name, r in res.items():
        md.append(f"| {name} | {r['seconds_per_step']} | {r['steps_per_epoch']} | {r['entries_per_second']} | "
                  f"{r['epoch_seconds_estimate'] / 60:.1f} min |")
    common.write("concept_biosyn_timing", {"environment": env, "load_average_after": env_after, "results": res}, "\n".join(md))


if __name__ == "__main__":
    main()
