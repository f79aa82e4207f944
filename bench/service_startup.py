"""How soon `medrank serve` answers on a first start, and when each knowledge base / index is ready.

Starts ``medrank serve`` on 127.0.0.1 (a free port) with a fresh state directory (nothing built) and, with
``--fresh-embeddings``, an empty cache too: no encoded vectors and no tuned inquiry engines (the converted encoder
weights and the ONNX exports are linked from the real cache: the machine's one-off set-up, not a start). Then, until every build step is done or
``--timeout`` passes:

* every second: ``POST /symptoms`` with an English complaint → the time of the first 200;
* every two seconds: ``GET /health`` → when each build step (``symptoms:icd10cm`` … ``passages``) became ready;
* every five seconds, until it answers: ``POST /passages`` → when the answer passages first answer (from BM25,
  before their sentence vectors are encoded: ``passages:sentence-vectors`` is the last step, after
  ``similar-questions:vectors``; both upgrade an endpoint that answers already);
* every ten seconds: the load average (other jobs share the machine).

    nice -n 10 .venv/bin/python bench/service_startup.py --fresh-embeddings --timeout 1800
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parents[1]
#: the last build steps, which upgrade an endpoint that answers already: the passages' sentences scored by their
#: vectors instead of BM25, the English similar questions searched densely instead of MiniLM re-ranking BM25's top 20
UPGRADES = ("similar-questions:vectors", "passages:sentence-vectors")
COMPLAINT = "I have a bad headache and feel sick"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(url: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback only
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, {}


#: what a first start computes into the cache (left out of a fresh one): encoded vectors, the service state, the
#: inquiry engines' tuned stopping rule and fitted differential model
FIRST_START_CACHE = ("embeddings", "service", "inquiry")


def fresh_cache(real: Path, into: Path) -> list[str]:
    """``into``: links to everything in the real cache but :data:`FIRST_START_CACHE` (the converted e5 weights and
    the ONNX exports: one-off set-up of the machine); returns the names linked."""
    into.mkdir(parents=True, exist_ok=True)
    linked = []
    for entry in sorted(real.iterdir()) if real.exists() else []:
        if entry.name not in FIRST_START_CACHE:
            (into / entry.name).symlink_to(entry)
            linked.append(entry.name)
    return linked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before the run stops, built or not")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fresh-embeddings", action="store_true", help="start with an empty cache too (no vectors, no tuned inquiry engines)")
    ap.add_argument("--keep-state", default=None, help="move the built state directory here at the end (for service_load)")
    ap.add_argument("--models", default=None, help="trained runs the server may use (default: an empty folder, as on a "
                    "fresh clone; `runs` serves whatever this checkout has trained)")
    ap.add_argument("--name", default="service_startup")
    args = ap.parse_args()
    from medrank.config import cache_dir

    work = Path(tempfile.mkdtemp(prefix="medrank-startup-"))
    env = dict(os.environ)
    linked: list[str] = []
    if args.fresh_embeddings:
        linked = fresh_cache(cache_dir(), work / "cache")
        env["MEDRANK_CACHE"] = str(work / "cache")
    port = free_port()
    exe = Path(sys.executable).parent / "medrank"
    cmd = [str(exe), "--threads", str(args.threads), "serve", "--host", "127.0.0.1", "--port", str(port),
           "--state", str(work / "state"), "--models", str(Path(args.models).resolve() if args.models else work / "runs")]
    (work / "runs").mkdir()
    base = f"http://127.0.0.1:{port}"
    log_path = work / "server.log"
    t0 = time.time()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
    first_answer = first_health = first_passages = None
    next_passages = 0.0
    ready_at: dict[str, float] = {}
    loads: list[list[float]] = []
    health: dict = {}
    next_health = next_load = 0.0
    try:
        while time.time() - t0 < args.timeout:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with code {proc.returncode}:\n{log_path.read_text()[-2000:]}")
            now = time.time() - t0
            if now >= next_load:
                loads.append([round(x, 2) for x in os.getloadavg()])
                next_load = now + 10
            if first_answer is None:
                status, _ = request(base + "/symptoms", {"query": COMPLAINT, "k": 5})
                if status == 200:
                    first_answer = round(time.time() - t0, 1)
                    print(f"first /symptoms answer after {first_answer} s", flush=True)
            if first_passages is None and now >= next_passages:
                status, _ = request(base + "/passages", {"entity": "asthma", "aspect": "treatment", "k": 5}, timeout=30)
                next_passages = now + 5
                if status == 200:
                    first_passages = round(time.time() - t0, 1)
                    print(f"first /passages answer after {first_passages} s", flush=True)
            if now >= next_health:
                status, health = request(base + "/health")
                next_health = now + 2
                if status == 200:
                    first_health = first_health or round(time.time() - t0, 1)
                    for name, b in health.get("builds", {}).items():
                        if b["state"] in ("ready", "failed") and name not in ready_at:
                            ready_at[name] = round(time.time() - t0, 1)
                            print(f"{name}: {b['detail']} at {ready_at[name]} s (built in {b['seconds']} s)", flush=True)
                    if health.get("ready") and first_answer is not None and first_passages is not None:
                        break
            time.sleep(1.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    builds = health.get("builds", {})
    # every step but the upgrades that follow: each endpoint answers from its complete index
    serving = [n for n in builds if n not in UPGRADES]
    answering = max((ready_at[n] for n in serving), default=None) if all(n in ready_at for n in serving) else None
    payload = {"environment": common.environment(threads=args.threads, seed=None,
                                                 data=os.environ.get("MEDRANK_DATA", "../shared/data")),
               "command": cmd, "fresh_embeddings": args.fresh_embeddings, "cache_linked": linked, "timeout_s": args.timeout,
               "first_health_s": first_health, "first_symptoms_answer_s": first_answer,
               "first_passages_answer_s": first_passages, "every_pipeline_answering_s": answering,
               "ready_at_s": ready_at,
               "builds_at_end": builds, "load_average_samples": loads,
               "log_tail": [line for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines()
                            if line.startswith("building ")][-40:]}
    load_1m = [x[0] for x in loads]
    rows = ["| build step | ready at s (since process start) | built in s | state at the end |", "|---|---:|---:|---|"]
    for name, b in builds.items():
        rows.append(f"| {name} | {ready_at.get(name, '—')} | {b.get('seconds')} | {b.get('detail')} |")
    md = (f"# `medrank serve` first start\n\n`python bench/service_startup.py{' --fresh-embeddings' if args.fresh_embeddings else ''}"
          f"{' --models ' + args.models if args.models else ''} --timeout {args.timeout:.0f}`: "
          f"{'trained runs from ' + args.models if args.models else 'no trained run (an empty --models folder, as on a fresh clone)'}; fresh state directory{', empty cache but for ' + ', '.join(linked) + ' (linked)' if args.fresh_embeddings else ' (cache as found)'}"
          f"; `medrank --threads {args.threads} serve` (default pipelines and knowledge bases, embedded store, `--backend auto`); "
          f"2 CPU cores (the server's own two build threads count in the load): load average (1 min) min {min(load_1m, default=0)}, max {max(load_1m, default=0)} "
          f"over the run.\n\n* first `/health` 200: {first_health} s\n* first `/symptoms` 200 (\"{COMPLAINT}\"): "
          f"**{first_answer} s**\n* first `/passages` 200 (asthma / treatment, k = 5): {first_passages} s\n"
          f"* every pipeline answering from its complete index (every step but {' and '.join(f'`{u}`' for u in UPGRADES)}): "
          f"**{answering} s**\n* every step done (the upgrades included): {f'yes, at {max(ready_at.values())} s' if health.get('ready') and ready_at else f'no, stopped at {args.timeout:.0f} s'}\n\n"
          + "\n".join(rows) + "\n")
    common.write(args.name, payload, md)
    if args.keep_state:
        shutil.move(str(work / "state"), args.keep_state)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
