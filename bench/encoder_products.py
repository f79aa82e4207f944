"""How fast sentence-transformers already runs the matrix products of ``bench/encoder_onnx.py``'s batch-32 rows.

Counts the products (multiply-adds x 2) that encoding the throughput part's sentences takes in length-sorted
batches of 32, padding included: per token and block the Q/K/V/output projections and the two feed-forward
products, per batch and block the attention's two products over the padded length. Divided by the time
sentence-transformers took in ``bench/results/encoder_onnx.json`` (1 thread, batch 32), it is the rate at which
that path already runs them, to set beside this core's fp32 peak (``bench/host_gemm.py``): no fp32 runtime can
run the same products faster than the peak.

The products without padding (each sentence at its own length) are the least any runtime must compute, however
it batches. Their count over sentence-transformers' time is the useful rate of that path, and the peak over that
rate is the largest speed-up over sentence-transformers that any fp32 runtime can reach on this core at batch 32
(``best_fp32_ratio``): below 2, the issue's fp32 bar cannot be met here by any export, fusion or batching.

The peak is the larger of torch's and ONNX Runtime's fp32 rate in the ``bench/host_gemm.py`` file named (torch
goes through MKL, which takes its AVX2 path on AMD CPUs; ONNX Runtime uses the widest vectors there are). The
ONNX fp32 rows' own rate is shown beside it.

    python bench/encoder_products.py [--gemm bench/results/host_gemm_amd_epyc_zen5.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common
from encoder_onnx import MODELS, chinese_sentences, english_sentences


def products(lengths: list[int], batch: int, blocks: int, hidden: int, intermediate: int) -> float:
    """Floating-point operations of an encoder over ``lengths`` in length-sorted batches of ``batch``."""
    lengths = sorted(lengths, reverse=True)
    per_token = blocks * 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
    total = 0.0
    for start in range(0, len(lengths), batch):
        rows = lengths[start : start + batch]
        padded = max(rows)
        total += len(rows) * padded * per_token + blocks * 2 * 2 * len(rows) * padded * padded * hidden
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemm", type=Path, default=common.RESULTS / "host_gemm_amd_epyc_zen5.json",
                    help="a bench/host_gemm.py result of the host that ran encoder_onnx")
    args = ap.parse_args()
    from medrank.encoders import load_encoder

    onnx_run = json.loads((common.RESULTS / "encoder_onnx.json").read_text(encoding="utf-8"))
    gemm = json.loads(args.gemm.read_text(encoding="utf-8"))
    peak = max(max(r["float32_gflops"], r.get("onnxruntime_float32_gflops", 0.0))
               for r in gemm["results"] if r["threads"] == 1)
    seed = onnx_run["throughput"]["args"]["seed"]
    rows = []
    for lang, (name, kind) in MODELS.items():
        row = next(r for r in onnx_run["throughput"]["rows"]
                   if r["language"] == lang and r["threads"] == 1 and r["batch_size"] == 32)
        texts = (english_sentences(seed) if lang == "en" else chinese_sentences(seed))[: row["n_texts"]]
        enc = load_encoder(name)
        config = enc.model.config
        ids = enc.tokenizer([enc._prompt(kind) + t for t in texts], truncation=True, max_length=enc.max_length)["input_ids"]
        lengths = [len(x) for x in ids]
        flops = products(lengths, 32, config.num_hidden_layers, config.hidden_size, config.intermediate_size)
        unpadded = products(lengths, 1, config.num_hidden_layers, config.hidden_size, config.intermediate_size)
        seconds = row["n_texts"] / row["sentences_per_s"]["sentence-transformers"]
        onnx_seconds = row["n_texts"] / row["sentences_per_s"]["medrank onnx"]
        rows.append({"language": lang, "encoder": name, "n_texts": len(texts), "gflop": round(flops / 1e9, 1),
                     "gflop_unpadded": round(unpadded / 1e9, 1), "padding_share": round(flops / unpadded, 3),
                     "sentence_transformers_gflops": round(flops / 1e9 / seconds, 1),
                     "sentence_transformers_useful_gflops": round(unpadded / 1e9 / seconds, 1),
                     "twice_that_gflops": round(2 * flops / 1e9 / seconds, 1), "fp32_peak_gflops": peak,
                     "best_fp32_ratio": round(peak / (unpadded / 1e9 / seconds), 2),
                     "onnx_fp32_gflops": round(flops / 1e9 / onnx_seconds, 1),
                     "onnx_fp32_ratio": round(seconds / onnx_seconds, 2)})
        print(rows[-1], flush=True)
    payload = {"environment": {**common.environment(threads=1), "encoder_onnx_date": onnx_run["throughput"]["date"],
                               "gemm": str(args.gemm.name), "gemm_cpu": gemm["environment"].get("cpu")},
               "rows": rows}
    md = [f"Throughput from `bench/results/encoder_onnx.json` ({onnx_run['throughput']['date']}); fp32 peak from "
          f"`{args.gemm.name}` ({gemm['environment'].get('cpu')}).", "",
          "| encoder | sentences | GFLOP (batches of 32, padding included) | GFLOP without padding | padding × | "
          "sentence-transformers GFLOP/s | its useful GFLOP/s (without padding) | fp32 peak GFLOP/s, 1 thread | "
          "best fp32 ratio any runtime can reach (peak / useful) | onnx fp32 GFLOP/s (padding included) | onnx fp32 ratio |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    md += [f"| {r['encoder']} ({r['language']}) | {r['n_texts']} | {r['gflop']} | {r['gflop_unpadded']} | "
           f"{r['padding_share']} | {r['sentence_transformers_gflops']} | {r['sentence_transformers_useful_gflops']} | "
           f"{r['fp32_peak_gflops']} | {r['best_fp32_ratio']}× | {r['onnx_fp32_gflops']} | **{r['onnx_fp32_ratio']}×** |"
           for r in rows]
    md += ["", "The best-ratio column counts only the products a runtime cannot avoid (no padding) and assumes it runs them at "
           "the measured GEMM peak, with nothing else (attention softmax, layer norms, tokenising) costing time: no fp32 "
           "runtime on this core can beat sentence-transformers at batch 32 by more. The last two columns are what the "
           "ONNX fp32 export reached in the same throughput run."]
    common.write("encoder_products", payload, "\n".join(md))


if __name__ == "__main__":
    main()
