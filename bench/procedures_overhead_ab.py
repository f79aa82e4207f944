"""A/B of the per-mention overhead changes of 2026-11-24 on the end-to-end normalisation path (1 thread).

"before" re-creates the earlier code inside the same process: every encoder block called whole
(transformers 5's checkpointing wrapper and ``apply_chunking_to_forward``'s ``inspect.signature``),
``eval_mode`` walking ``nn.Module.modules()``, and KAR's name keyword flags computed lazily inside
requests. "after" is the current code (:func:`medrank.encoders.blocks.block_forward`,
:func:`~medrank.encoders.blocks.submodules`, ``KeywordAttentiveRanker.warm_name_flags``). The two
alternate mention by mention (order flipped every mention), so both see the same machine; the
script also checks that both give identical outputs.

    nice -n 10 python bench/procedures_overhead_ab.py [--run runs/procedures/fusion] [--n 300]
"""

from __future__ import annotations

import argparse
import statistics
import time

import common

import medrank.encoders.blocks as blocks
import medrank.models.bi_encoder as bi_encoder_module
import medrank.pipelines.procedures.mtcg as mtcg_module
from medrank.config import data_root, seed_everything, set_threads
from medrank.pipelines.procedures.data import load_mentions
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer


def whole_block(block, hidden, mask):  # noqa: ANN001, ANN201 - the earlier call
    return block(hidden, mask)


def modules_enter(self):  # noqa: ANN001, ANN201 - the earlier eval_mode.__enter__
    self.flags = [m for m in self.module.modules() if m.training]
    for m in self.flags:
        m.training = False
    return self.module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/procedures/fusion")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    set_threads(1)
    seed_everything(args.seed)
    norm = ProcedureNormalizer.load(args.run)
    norm.show_progress = False
    norm.warm_up()
    warm_flags, lazy_flags = dict(norm.kar._name_flags), {}
    after_block, after_enter = blocks.block_forward, blocks.eval_mode.__enter__

    def use(before: bool) -> None:
        forward = whole_block if before else after_block
        blocks.block_forward = mtcg_module.block_forward = bi_encoder_module.block_forward = forward
        blocks.eval_mode.__enter__ = modules_enter if before else after_enter
        norm.kar._name_flags = lazy_flags if before else warm_flags

    mentions = [m.text for m in load_mentions("val")[: args.n]]
    for text in mentions[:10]:
        for before in (True, False):
            use(before)
            norm.normalize_one(text)
    lazy_flags.clear()  # "before" starts with no name flags, as a fresh process did
    times: dict[bool, list[float]] = {True: [], False: []}
    identical = True
    gflops_before = common.host_gemm_gflops()
    for i, text in enumerate(mentions):
        outputs = {}
        for before in (True, False) if i % 2 == 0 else (False, True):
            use(before)
            t = time.perf_counter()
            outputs[before] = norm.normalize_one(text)
            times[before].append(time.perf_counter() - t)
        identical &= outputs[True].terms == outputs[False].terms and outputs[True].final == outputs[False].final
    use(False)
    gflops_after = common.host_gemm_gflops()
    p50 = {name: round(1000 * statistics.median(times[flag]), 3) for name, flag in (("before", True), ("after", False))}
    payload = {
        "environment": common.environment(threads=1, seed=args.seed, data=str(data_root())),
        "run": args.run,
        "mentions": len(mentions),
        "p50_ms": p50,
        "identical_outputs": identical,
        "host_gemm_gflops": [gflops_before, gflops_after],
    }
    md = "\n".join([
        f"End-to-end normalisation of {len(mentions)} val mentions on 1 thread (`{args.run}`), the earlier "
        "per-mention overhead re-created in-process (\"before\") against the current code (\"after\"), "
        "alternating mention by mention.",
        "",
        "| code | p50 ms |",
        "|---|---:|",
        f"| before (whole-block calls, `modules()` walk, lazy name flags) | {p50['before']} |",
        f"| after | {p50['after']} |",
        "",
        f"Identical outputs (terms and fused scores, every mention): {identical}. Host 1-thread GEMM "
        f"{gflops_before} GFLOP/s before the timings, {gflops_after} after (the absolute times vary with the "
        "shared host's hour; the difference between the two rows is what this measures).",
    ])
    common.write("procedures_overhead_ab", payload, md)


if __name__ == "__main__":
    main()
