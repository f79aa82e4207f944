"""schemathesis against a running `medrank serve` (real knowledge bases and models): 0 server errors (5xx).

Starts the server on 127.0.0.1 (state from ``--state``, built on first use), loads its OpenAPI schema and, for every
operation, sends ``--examples`` generated valid requests and as many invalid ones (POST routes), counting the
status codes. Bounded by ``--examples`` and the per-request timeout; the server is stopped at the end.

    nice -n 10 .venv/bin/python bench/service_schemathesis.py --examples 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import common
from service_load import free_port, stop_server, wait_ready


def make_check(op, mode, key, base, counts, failures, args):  # noqa: ANN001, ANN201 - hypothesis test factory
    from hypothesis import HealthCheck, given, seed, settings

    @seed(args.seed)
    @given(op.as_strategy(generation_mode=mode))
    @settings(max_examples=args.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case) -> None:  # noqa: ANN001
        response = case.call(base_url=base, timeout=90)
        code = str(response.status_code)
        counts[code] = counts.get(code, 0) + 1
        if response.status_code >= 500:
            failures.append(f"{key} → {code}: {response.text[:200]}")

    return check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=50, help="generated requests per operation and mode")
    ap.add_argument("--state", default=None, help="service state dir (default: $MEDRANK_CACHE/service)")
    ap.add_argument("--kb", default="hpo,icd10cm,chip-cdn,procedures")
    ap.add_argument("--pipelines", default="symptoms,normalize,passages,next-questions,similar-questions")
    ap.add_argument("--start-timeout", type=float, default=3600.0)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()

    import schemathesis

    from medrank.config import cache_dir

    state = Path(args.state) if args.state else cache_dir() / "service"
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="medrank-schemathesis-"))
    import subprocess

    exe = Path(sys.executable).parent / "medrank"

    cmd = ["nice", "-n", "10", str(exe), "--threads", "2", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--state", str(state), "--kb", args.kb, "--pipelines", args.pipelines, "--timeout", "60"]
    log = open(work / "server.log", "w", encoding="utf-8")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    counts: dict[str, dict[str, int]] = {}
    failures: list[str] = []
    t0 = time.perf_counter()
    try:
        ready = asyncio.run(wait_ready(base, proc, time.time() + args.start_timeout))
        print(f"server ready after {ready:.1f}s", flush=True)
        schema = schemathesis.openapi.from_url(base + "/openapi.json")
        for result in schema.get_all_operations():
            op = result.ok()
            modes = [schemathesis.GenerationMode.POSITIVE]
            if op.method.upper() == "POST":
                modes.append(schemathesis.GenerationMode.NEGATIVE)
            for mode in modes:
                key = f"{op.method.upper()} {op.path} ({mode.value})"
                counts[key] = {}
                check = make_check(op, mode, key, base, counts[key], failures, args)
                check()
                print(key, counts[key], flush=True)
    finally:
        stop_server(proc)
    total = sum(sum(c.values()) for c in counts.values())
    server_errors = sum(n for c in counts.values() for code, n in c.items() if code.startswith("5"))
    env = common.environment(threads="server 2", seed=args.seed, data=os.environ.get("MEDRANK_DATA", "../shared/data"))
    payload = {"environment": env, "config": vars(args), "requests": total, "server_errors": server_errors,
               "failures": failures[:20], "status_counts": counts, "seconds": round(time.perf_counter() - t0, 1)}
    rows = ["| operation (mode) | requests | status codes |", "|---|---:|---|"]
    for key, c in counts.items():
        rows.append(f"| {key} | {sum(c.values())} | {', '.join(f'{k}: {v}' for k, v in sorted(c.items()))} |")
    md = (f"# schemathesis against `medrank serve` (real knowledge bases and models)\n\n"
          f"`python bench/service_schemathesis.py --examples {args.examples}`: up to {args.examples} generated requests per "
          f"operation and mode (valid / invalid, hypothesis seed {args.seed}); **{total:,} requests, {server_errors} server "
          f"errors (5xx)**. Server on 127.0.0.1, 2 shared CPU cores under contention.\n\n" + "\n".join(rows))
    common.write("service_schemathesis", payload, md)
    if server_errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
