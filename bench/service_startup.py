"""How long `medrank serve` takes to be ready on a later start (everything already built in the state dir).

Runs ``medrank serve --build-only`` (builds or loads every pipeline, then exits) ``--repeats`` times and
reports the wall time of each run and the per-component times the server prints.

    nice -n 10 .venv/bin/python bench/service_startup.py --repeats 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import common

_STEP = re.compile(r"^\s+(.+?) (?:loaded|read|indexed.*?|built) in ([0-9.]+)s$")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--state", default=None)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    exe = Path(sys.executable).parent / "medrank"
    cmd = [str(exe), "--threads", str(args.threads), "serve", "--build-only"] + (["--state", args.state] if args.state else [])
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=Path(__file__).resolve().parents[1])
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            raise SystemExit(f"serve --build-only failed:\n{out.stderr[-2000:]}")
        lines = " ".join(out.stderr.replace("\r", "\n").split("\n")).replace("  ", "\n  ").splitlines()
        steps = {m.group(1): float(m.group(2)) for line in lines if (m := _STEP.match(line))}
        ready = re.search(r"services ready in ([0-9.]+)s", out.stderr)
        runs.append({"wall_s": round(wall, 1), "services_ready_s": float(ready.group(1)) if ready else None, "steps_s": steps})
        print(runs[-1], flush=True)
    env = common.environment(threads=args.threads, seed=None, data=os.environ.get("MEDRANK_DATA", "../shared/data"))
    rows = ["| run | process wall s | services ready s |", "|---|---:|---:|"]
    rows += [f"| {i + 1} | {r['wall_s']} | {r['services_ready_s']} |" for i, r in enumerate(runs)]
    steps = ["| component | s (last run) |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in runs[-1]["steps_s"].items()]
    md = ("# `medrank serve` start-up with a built state directory\n\n"
          "`python bench/service_startup.py`: `medrank serve --build-only` (all five pipelines, default knowledge bases "
          "hpo, icd10cm:bm25, chip-cdn, procedures; trained runs under ./runs when present). Process wall time includes "
          "Python/torch import. 2 shared CPU cores under contention.\n\n" + "\n".join(rows) + "\n\n" + "\n".join(steps))
    common.write("service_startup", {"environment": env, "command": cmd, "runs": runs}, md)


if __name__ == "__main__":
    main()
