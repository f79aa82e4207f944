"""Matrix-product speed of this host in float32 and bfloat16, on 1 and 2 threads.

The shared CPU hosts differ from day to day (AMD EPYC without bf16 units; Intel Xeon with AMX),
and whether a training config's ``autocast: bf16`` pays off depends on it: this records both
dtypes on two shapes — a large square product (the peak) and an encoder-sized one
((512 x 384) @ (384 x 1536), a batch of tokens through e5-small's feed-forward layer).

torch's float32 products go through MKL, which takes its AVX2 path on AMD CPUs; ONNX Runtime's (MLAS) use the
widest vectors the CPU has. The ``onnxruntime_float32_gflops`` column (one ``MatMul`` node, graph optimisations on,
the thread count set on the session) is the fp32 rate an ONNX export can run its products at on this host.

    python bench/host_gemm.py [--name host_gemm_amd_epyc]

``--name`` writes another result file, so one host's record does not replace another's.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import common
import numpy as np
import torch

SHAPES = {"square 2048": (2048, 2048, 2048), "encoder 512x384x1536": (512, 384, 1536)}


def rate(run: Callable[[], object], m: int, k: int, n: int, seconds: float = 1.0) -> float:
    """GFLOP/s of ``run``, one (m x k) @ (k x n) product a call, over ``seconds`` after a warm-up (oneDNN and
    ONNX Runtime pick their kernels on the first calls)."""
    for _ in range(5):
        run()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run()
        count += 1
    return round(2 * m * k * n * count / (time.perf_counter() - start) / 1e9, 1)


def gflops(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 1.0) -> float:
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    return rate(lambda: a @ b, m, k, n, seconds)


def onnxruntime_gflops(m: int, k: int, n: int, threads: int, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of ONNX Runtime's CPU MatMul: an (m x k) input times a (k x n) weight held in the graph."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((k, n), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [weight])
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(),
                                   options, providers=["CPUExecutionProvider"])
    feed = {"x": rng.standard_normal((m, k), dtype=np.float32)}
    return rate(lambda: session.run(None, feed), m, k, n, seconds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="host_gemm", help="result file stem under bench/results/")
    args = ap.parse_args()
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for shape, (m, k, n) in SHAPES.items():
            f32, bf16 = gflops(m, k, n, torch.float32), gflops(m, k, n, torch.bfloat16)
            rows.append({"threads": threads, "shape": shape, "float32_gflops": f32, "bfloat16_gflops": bf16,
                         "bf16_speedup": round(bf16 / f32, 2),
                         "onnxruntime_float32_gflops": onnxruntime_gflops(m, k, n, threads)})
    bf16_units = bool(getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)())
    payload = {"environment": common.environment(threads="1 and 2"), "bf16_supported_by_onednn": bf16_units,
               "results": rows}
    md = ["| threads | shape | torch float32 GFLOP/s | torch bfloat16 GFLOP/s | bf16 / fp32 | onnxruntime float32 GFLOP/s |",
          "|---:|---|---:|---:|---:|---:|"]
    md += [f"| {r['threads']} | {r['shape']} | {r['float32_gflops']} | {r['bfloat16_gflops']} | {r['bf16_speedup']} | "
           f"{r['onnxruntime_float32_gflops']} |" for r in rows]
    md += ["", f"oneDNN reports bf16 support: {bf16_units}. A training config's `autocast: bf16` runs the forward "
               "passes in bfloat16; it pays off where bf16 / fp32 is well above 1. The fp32 peak of this host is the larger of "
               "the two float32 columns."]
    common.write(args.name, payload, "\n".join(md))


if __name__ == "__main__":
    main()
