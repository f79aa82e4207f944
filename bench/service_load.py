"""Load test of `medrank serve` on loopback: N concurrent clients for D seconds against /symptoms and
/similar-questions, per backend (medrank index, embedded store, PostgreSQL + pgvector).

For each backend the script starts the server on 127.0.0.1 (a subprocess of this script, stopped at the end;
the pgvector backend gets a throwaway PostgreSQL from ``medrank.store.pgtest``), waits for /health, warms up,
then runs the clients (httpx async, one connection each) until the deadline and reports errors, requests/s and
p50/p95/p99 latency per endpoint. Queries are real patient-style texts: the patient turns of MTS-Dialog
(English /symptoms and /similar-questions) and CHIP-STS questions (Chinese /similar-questions).

    nice -n 10 .venv/bin/python bench/service_load.py --backend embedded --backend pgvector

Bounded: every phase has a deadline (server start ``--start-timeout``, run ``--duration``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def patient_queries(limit: int = 400) -> list[str]:
    from medrank.config import dataset_dir

    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-TrainingSet.csv"
    out: list[str] = []
    csv.field_size_limit(10_000_000)
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for line in row["dialogue"].splitlines():
                if line.lower().startswith("patient:"):
                    text = line.split(":", 1)[1].strip()
                    if len(text.split()) >= 4:
                        out.append(text[:500])
    random.Random(13).shuffle(out)
    return out[:limit]


def chinese_questions(limit: int = 200) -> list[str]:
    from medrank.data.questions import load_question_pairs, unique_questions

    qs = unique_questions(load_question_pairs("chip-sts"))
    random.Random(13).shuffle(qs)
    return qs[:limit]


def passage_queries(limit: int = 200) -> list[tuple[str, str]]:
    """(entity, aspect) pairs of MedQuAD: document titles with the aspects their passages answer."""
    from medrank.data.medquad import load_passage_corpus

    pairs = sorted({(d.title, p.label) for d in load_passage_corpus(None, "all").documents for p in d.passages if p.label})
    random.Random(13).shuffle(pairs)
    return pairs[:limit]


def start_server(args: argparse.Namespace, store: str | None, state: Path, port: int, log_path: Path) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "medrank"
    pipelines = "symptoms,similar-questions" + (",passages" if args.passages else "")
    cmd = ["nice", "-n", str(args.server_nice), str(exe), "--threads", str(args.server_threads), "serve", "--host", "127.0.0.1",
           "--port", str(port), "--state", str(state), "--kb", args.kb, "--pipelines", pipelines,
           "--max-concurrency", str(args.max_concurrency), "--timeout", str(args.request_timeout)]
    if store:
        cmd += ["--store", store]
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed when the process is reaped
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


async def wait_ready(base: str, proc: subprocess.Popen, deadline: float) -> float:
    import httpx

    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=5) as client:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with code {proc.returncode} before it was ready")
            with contextlib.suppress(httpx.HTTPError):
                r = await client.get(base + "/health")
                # the server answers at once and builds in the background: wait until every build step is done
                if r.status_code == 200 and r.json().get("ready"):
                    return time.perf_counter() - t0
            await asyncio.sleep(1.0)
    raise TimeoutError("server not ready before the start deadline")


async def run_clients(base: str, clients: int, duration: float, en: list[str], zh: list[str], seed: int) -> dict:
    import httpx

    samples: dict[str, list[float]] = {"/symptoms": [], "/similar-questions": []}
    errors: dict[str, int] = {}
    stop_at = time.perf_counter() + duration

    async def worker(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(seed + i)
        while time.perf_counter() < stop_at:
            if rng.random() < 0.5:
                path, body = "/symptoms", {"query": rng.choice(en), "k": 5}
            else:
                q = rng.choice(zh) if rng.random() < 0.3 else rng.choice(en)
                path, body = "/similar-questions", {"question": q, "k": 5}
            t0 = time.perf_counter()
            try:
                r = await client.post(base + path, json=body)
                ok = r.status_code == 200
                key = f"{path} HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                ok, key = False, f"{path} {type(exc).__name__}"
            if ok:
                samples[path].append(time.perf_counter() - t0)
            else:
                errors[key] = errors.get(key, 0) + 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(i, client) for i in range(clients)))
    wall = time.perf_counter() - t0
    total_ok = sum(len(v) for v in samples.values())
    out = {"wall_s": round(wall, 1), "requests_ok": total_ok, "errors": sum(errors.values()), "error_kinds": errors,
           "requests_per_s": round(total_ok / wall, 1),
           "all": common.percentiles([s for v in samples.values() for s in v]) if total_ok else {}}
    for path, v in samples.items():
        out[path] = {**(common.percentiles(v) if v else {}), "requests_per_s": round(len(v) / wall, 1)}
    return out


async def run_passages(base: str, clients: int, requests_each: int, k: int, pairs: list[tuple[str, str]], seed: int,
                       deadline_s: float) -> dict:
    """``clients`` concurrent clients, each sending ``requests_each`` /passages requests of depth ``k`` (bounded by
    ``deadline_s``): latency percentiles, errors by kind."""
    import httpx

    samples: list[float] = []
    errors: dict[str, int] = {}
    stop_at = time.perf_counter() + deadline_s

    async def worker(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(seed + i)
        for _ in range(requests_each):
            if time.perf_counter() >= stop_at:
                return
            entity, aspect = rng.choice(pairs)
            t0 = time.perf_counter()
            try:
                r = await client.post(base + "/passages", json={"entity": entity[:200], "aspect": aspect[:200], "k": k})
                key = f"HTTP {r.status_code}"
                ok = r.status_code == 200
            except httpx.HTTPError as exc:
                ok, key = False, type(exc).__name__
            if ok:
                samples.append(time.perf_counter() - t0)
            else:
                errors[key] = errors.get(key, 0) + 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(worker(i, client) for i in range(clients)))
    return {"clients": clients, "k": k, "requests_ok": len(samples), "errors": sum(errors.values()), "error_kinds": errors,
            "wall_s": round(time.perf_counter() - t0, 1), **(common.percentiles(samples) if samples else {})}


def passage_phases(base: str, args: argparse.Namespace, pairs: list[tuple[str, str]]) -> list[dict]:
    out = []
    for clients in (1, args.passage_clients):
        for k in (5, 50):
            load = [round(x, 2) for x in os.getloadavg()]
            r = asyncio.run(run_passages(base, clients, args.passage_requests, k, pairs, args.seed, args.duration))
            r["load_average_before"] = load
            print(f"/passages k={k} x {clients} clients: {r}", flush=True)
            out.append(r)
    return out


def run_backend(name: str, args: argparse.Namespace, en: list[str], zh: list[str]) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"medrank-load-{name}-"))
    state = Path(args.state) / name if args.state else work / "state"
    port = free_port()
    pg = None
    try:
        store = None
        if name == "embedded":
            store = f"embedded:{state / 'store'}"
        elif name == "pgvector":
            from medrank.store.pgtest import start_local_postgres

            pg = start_local_postgres()
            pg.__enter__()
            store = pg.dsn + "?collection=medrank_load"
        proc = start_server(args, store, state, port, work / "server.log")
        base = f"http://127.0.0.1:{port}"
        try:
            t_ready = asyncio.run(wait_ready(base, proc, time.time() + args.start_timeout))
            print(f"[{name}] server ready after {t_ready:.1f}s; warming up", flush=True)
            asyncio.run(run_clients(base, min(8, args.clients), args.warmup, en, zh, 999))
            load_before = [round(x, 2) for x in os.getloadavg()]
            print(f"[{name}] {args.clients} clients for {args.duration:.0f}s (load average {load_before})", flush=True)
            result = asyncio.run(run_clients(base, args.clients, args.duration, en, zh, args.seed))
            result["load_average_before"] = load_before
            result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            result["server_ready_s"] = round(t_ready, 1)
            if args.passages:
                result["passages"] = passage_phases(base, args, passage_queries())
        finally:
            stop_server(proc)
        tail = (work / "server.log").read_text(encoding="utf-8", errors="replace").splitlines()
        result["server_log_tail"] = [line for line in tail if "Traceback" in line or "ERROR" in line][-5:]
        result["store"] = store.split("?")[0] if store and not store.startswith("postgresql") else ("postgresql (throwaway, 127.0.0.1)" if store else "medrank index (no store)")
        return result
    finally:
        if pg is not None:
            pg.__exit__(None, None, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", action="append", choices=["index", "embedded", "pgvector"], help="repeatable; default embedded")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--kb", default="hpo", help="knowledge bases the server loads (English /symptoms uses the first)")
    ap.add_argument("--state", default=None, help="reuse built state here (STATE/<backend>); default: a fresh temp dir")
    ap.add_argument("--start-timeout", type=float, default=3600.0)
    ap.add_argument("--server-threads", type=int, default=2)
    ap.add_argument("--server-nice", type=int, default=10)
    ap.add_argument("--max-concurrency", type=int, default=32)
    ap.add_argument("--request-timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--passages", action="store_true", help="serve /passages too and measure it (k = 5 and 50; 1 "
                    "client, then --passage-clients concurrent clients, --passage-requests each)")
    ap.add_argument("--passage-clients", type=int, default=10)
    ap.add_argument("--passage-requests", type=int, default=10)
    ap.add_argument("--name", default="service_load")
    args = ap.parse_args()
    backends = args.backend or ["embedded"]
    en, zh = patient_queries(), chinese_questions()
    results = {}
    for b in backends:
        try:
            results[b] = run_backend(b, args, en, zh)
        except Exception as exc:  # report and continue with the next backend
            results[b] = {"failed": f"{type(exc).__name__}: {exc}"}
        print(json.dumps({b: {k: v for k, v in results[b].items() if k != "server_log_tail"}}, indent=1), flush=True)
    env = common.environment(threads=f"server {args.server_threads}", seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    payload = {"environment": env, "config": vars(args), "queries": {"en": len(en), "zh": len(zh)}, "results": results}
    rows = ["| backend | store | clients × s | requests ok | errors | req/s | p50 ms | p95 ms | p99 ms | /symptoms p50 / p99 | /similar p50 / p99 | load avg before → after |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for b, r in results.items():
        if "failed" in r:
            rows.append(f"| {b} | — | — | — | — | — | — | — | — | — | — | failed: {r['failed']} |")
            continue
        s, q = r["/symptoms"], r["/similar-questions"]
        rows.append(f"| {b} | {r['store']} | {args.clients} × {args.duration:.0f} | {r['requests_ok']:,} | {r['errors']} | {r['requests_per_s']} | "
                    f"{r['all'].get('p50_ms')} | {r['all'].get('p95_ms')} | {r['all'].get('p99_ms')} | {s.get('p50_ms')} / {s.get('p99_ms')} | "
                    f"{q.get('p50_ms')} / {q.get('p99_ms')} | {r['load_average_before']} → {r['load_average_after']} |")
    md = ("# Service load test (loopback)\n\n"
          f"`{' '.join(['python', 'bench/service_load.py', *sys.argv[1:]])}`: {args.clients} concurrent httpx clients for "
          f"{args.duration:.0f} s, half /symptoms (English MTS-Dialog patient turns; knowledge base `{args.kb}`), half "
          "/similar-questions (70 % English patient turns, 30 % CHIP-STS Chinese questions; BM25 recall + trained STMT "
          "matcher when present). Server and clients on the same 2 shared CPU cores, under contention from other jobs "
          "(see the load averages); latencies include client-side queueing.\n\n" + "\n".join(rows))
    passages = [(b, p) for b, r in results.items() for p in r.get("passages", [])]
    if passages:
        md += ("\n\n## /passages\n\nEach client sends its requests one after another ((entity, aspect) pairs of MedQuAD); "
               f"server `--threads {args.server_threads}`.\n\n| backend | k | clients | requests ok | errors | p50 ms | p95 ms | "
               "p99 ms | load avg before |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
        md += "\n".join(f"| {b} | {p['k']} | {p['clients']} | {p['requests_ok']} | {p['errors']} {p['error_kinds'] or ''} | "
                        f"{p.get('p50_ms')} | {p.get('p95_ms')} | {p.get('p99_ms')} | {p['load_average_before']} |"
                        for b, p in passages)
    common.write(args.name, payload, md)


if __name__ == "__main__":
    main()
