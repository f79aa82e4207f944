"""Run the benchmarks that need no training run, one after another (``make bench``).

Each script writes ``bench/results/NAME.json`` + ``.md``. The training tables
(Bi-HardNCE, CDV, STMT, ...) are separate commands because each trains models for
up to an hour on CPU; they are listed in the README and in each script's docstring.
Timing benchmarks are only meaningful on an otherwise idle machine: every result
records the load average it was measured under.

    python bench/run_all.py [--only NAME[,NAME...]] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (name, arguments): cheap to expensive
BENCHES: list[tuple[str, list[str]]] = [
    ("host_gemm", []),
    ("metrics_crosscheck", []),
    ("verify_e5_conversion", []),
    ("query_latency", ["--queries", "300"]),
    ("encoder_throughput", ["--n", "1000", "--repeats", "3"]),
    ("concept_zero_shot", []),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated subset of: " + ", ".join(n for n, _ in BENCHES))
    ap.add_argument("--list", action="store_true", help="print the benchmark names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(n for n, _ in BENCHES))
        return 0
    wanted = set(args.only.split(",")) if args.only else {n for n, _ in BENCHES}
    unknown = wanted - {n for n, _ in BENCHES}
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    failed = []
    for name, extra in BENCHES:
        if name not in wanted:
            continue
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *extra])
        print(f"   {name}: exit {rc} in {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
