"""How fast sentence-transformers already runs the matrix products of ``bench/encoder_onnx.py``'s batch-32 rows.

Counts the products (multiply-adds x 2) that encoding the throughput part's sentences takes in length-sorted
batches of 32, padding included: per token and block the Q/K/V/output projections and the two feed-forward
products, per batch and block the attention's two products over the padded length. Divided by the time
sentence-transformers took in ``bench/results/encoder_onnx.json`` (1 thread, batch 32), it is the rate at which
that path already runs them, to set beside this core's fp32 peak (``bench/host_gemm.py``): no fp32 runtime can
run the same products faster than the peak.

    python bench/encoder_products.py [--gemm bench/results/host_gemm_amd_epyc.json]
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
    ap.add_argument("--gemm", type=Path, default=common.RESULTS / "host_gemm_amd_epyc.json",
                    help="a bench/host_gemm.py result of the host that ran encoder_onnx")
    args = ap.parse_args()
    from medrank.encoders import load_encoder

    onnx_run = json.loads((common.RESULTS / "encoder_onnx.json").read_text(encoding="utf-8"))
    gemm = json.loads(args.gemm.read_text(encoding="utf-8"))
    peak = max(r["float32_gflops"] for r in gemm["results"] if r["threads"] == 1)
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
        rows.append({"language": lang, "encoder": name, "n_texts": len(texts), "gflop": round(flops / 1e9, 1),
                     "padding_share": round(flops / unpadded, 3),
                     "sentence_transformers_gflops": round(flops / 1e9 / seconds, 1),
                     "twice_that_gflops": round(2 * flops / 1e9 / seconds, 1), "fp32_peak_gflops": peak})
        print(rows[-1], flush=True)
    payload = {"environment": {**common.environment(threads=1), "encoder_onnx_date": onnx_run["throughput"]["date"],
                               "gemm": str(args.gemm.name), "gemm_cpu": gemm["environment"].get("cpu")},
               "rows": rows}
    md = [f"Throughput from `bench/results/encoder_onnx.json` ({onnx_run['throughput']['date']}); fp32 peak from "
          f"`{args.gemm.name}` ({gemm['environment'].get('cpu')}).", "",
          "| encoder | sentences | GFLOP (batches of 32, padding included) | padding × | sentence-transformers GFLOP/s | 2× that | fp32 peak GFLOP/s, 1 thread |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    md += [f"| {r['encoder']} ({r['language']}) | {r['n_texts']} | {r['gflop']} | {r['padding_share']} | "
           f"{r['sentence_transformers_gflops']} | {r['twice_that_gflops']} | {r['fp32_peak_gflops']} |" for r in rows]
    common.write("encoder_products", payload, "\n".join(md))


if __name__ == "__main__":
    main()
