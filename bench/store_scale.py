"""Store scale: ingest N synthetic 384-d embedding-like vectors into the embedded store (faiss HNSW) and into
PostgreSQL + pgvector (binary COPY, HNSW built after the bulk load); query latency at recall@10 >= 0.95
against exact search.

Vectors: ``clusters`` Gaussian centres on the unit sphere; each point = its centre + Gaussian noise in
``noise_rank`` random directions of its cluster (norm ``noise``) + a little isotropic noise (norm
``iso_noise``), L2-normalised. Neighbours are then structured as in real sentence embeddings, whose
intrinsic dimension is low (on i.i.d. random vectors no graph index reaches useful recall — and purely
isotropic noise around the centres makes the neighbourhoods inside a cluster just that: the 1M run with
``--noise-rank 0 --iso-noise 0.75``, kept as ``store_scale_1m_isotropic``, needs ef_search > 400 in faiss
for recall@10 0.95). Queries are fresh points from the same distribution (not in the collection).
Ground truth: exact inner-product top-10 (faiss flat).

For each backend: ingest rate (items/s through ``Store.add``, durable per batch), index build time
(pgvector: ``CREATE INDEX … USING hnsw`` after the load; embedded: the graph is built during ``add``, so
its cost is inside the ingest rate), snapshot save / reopen time (embedded), on-disk size, then for each
``ef_search`` the recall@10 and single-query latency of ``Store.search(mode="dense")`` (the full call:
index search + id/text/metadata lookup). The reported operating point is the smallest ef with recall@10
>= 0.95.

    nice -n 10 python bench/store_scale.py --n 100000            # -> bench/results/store_scale_100k.*
    nice -n 10 python bench/store_scale.py --n 1000000           # the 1M run (-> store_scale_1m.*)
    nice -n 10 python bench/store_scale.py --n 250000 --backends pgvector
    nice -n 10 python bench/store_scale.py --n 1000000 --noise-rank 0 --iso-noise 0.75 --backends embedded \
        --name store_scale_1m_isotropic                          # the hard, isotropic variant
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import common
import numpy as np

from medrank.store import EmbeddedStore, PgVectorStore
from medrank.store.pgtest import start_local_postgres

EF_LIST = [10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 400, 600, 1000]
TARGET_RECALL = 0.95


def make_centres(seed: int, clusters: int, dim: int) -> np.ndarray:
    c = np.random.default_rng([seed, 0]).normal(size=(clusters, dim)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def make_bases(seed: int, clusters: int, rank: int, dim: int) -> np.ndarray | None:
    """Per-cluster random directions ``(clusters, rank, dim)`` spanning each cluster's low-rank spread."""
    if rank == 0:
        return None
    return (np.random.default_rng([seed, 1]).normal(size=(clusters, rank, dim)) / np.sqrt(dim)).astype(np.float32)


def make_points(
    centres: np.ndarray, bases: np.ndarray | None, n: int, seed: int, stream: int, noise: float, iso_noise: float
) -> np.ndarray:
    """Centre + low-rank noise (norm ~``noise``, in the cluster's ``rank`` directions) + isotropic noise
    (norm ~``iso_noise``), normalised: the intrinsic dimension stays low, as in real sentence embeddings."""
    rng = np.random.default_rng([seed, stream])
    dim = centres.shape[1]
    assign = rng.integers(0, len(centres), size=n)
    x = centres[assign].copy()
    if bases is not None:
        rank = bases.shape[1]
        z = rng.normal(scale=noise / np.sqrt(rank), size=(n, rank)).astype(np.float32)
        for s in range(0, n, 8192):  # blocks: bases[assign] is (n, rank, dim), too big in one piece
            x[s : s + 8192] += np.einsum("nr,nrd->nd", z[s : s + 8192], bases[assign[s : s + 8192]])
    x += rng.normal(scale=iso_noise / np.sqrt(dim), size=(n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def dataset(args: argparse.Namespace, chunk: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """``(collection vectors, query vectors)``; queries are fresh draws from the same clusters."""
    centres = make_centres(args.seed, args.clusters, args.dim)
    bases = make_bases(args.seed, args.clusters, args.noise_rank, args.dim)
    out = np.empty((args.n, args.dim), dtype=np.float32)
    for i, s in enumerate(range(0, args.n, chunk)):
        m = min(chunk, args.n - s)
        out[s : s + m] = make_points(centres, bases, m, args.seed, 1 + i, args.noise, args.iso_noise)
    queries = make_points(centres, bases, args.queries, args.seed, 10_000, args.noise, args.iso_noise)
    return out, queries


def ground_truth(data: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, dict[str, float]]:
    import faiss

    index = faiss.IndexFlatIP(data.shape[1])
    index.add(data)
    _, gt = index.search(queries, k)
    faiss.omp_set_num_threads(1)
    samples = []
    for q in queries[:50]:
        t = time.perf_counter()
        index.search(q[None], k)
        samples.append(time.perf_counter() - t)
    return gt, common.percentiles(samples)


def sweep(store: Any, queries: np.ndarray, gt: np.ndarray, k: int, set_ef) -> list[dict[str, Any]]:
    rows = []
    for _ in range(20):  # warm caches (PostgreSQL buffers, page cache)
        store.search(queries[0], None, k=k, mode="dense")
    for ef in EF_LIST:
        set_ef(ef)
        samples, hits = [], 0
        for qi, q in enumerate(queries):
            t = time.perf_counter()
            found = store.search(q, None, k=k, mode="dense")
            samples.append(time.perf_counter() - t)
            hits += len({int(h.id) for h in found} & set(gt[qi].tolist()))
        recall = hits / (len(queries) * k)
        rows.append({"ef_search": ef, f"recall@{k}": round(recall, 4), **common.percentiles(samples)})
        print(f"  ef={ef}: recall@{k}={recall:.4f} p50={rows[-1]['p50_ms']}ms p95={rows[-1]['p95_ms']}ms", flush=True)
        if recall >= 0.995:
            break
    return rows


def operating_point(rows: list[dict[str, Any]], k: int) -> dict[str, Any] | None:
    ok = [r for r in rows if r[f"recall@{k}"] >= TARGET_RECALL]
    return ok[0] if ok else None


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def ingest(store: Any, data: np.ndarray, batch: int, name: str) -> float:
    """``Store.add`` in batches (each durable when it returns); returns the wall seconds."""
    t0 = time.perf_counter()
    for s in range(0, len(data), batch):
        e = min(s + batch, len(data))
        store.add([str(i) for i in range(s, e)], [f"synthetic item {i}" for i in range(s, e)], data[s:e])
        if (s // batch) % 10 == 0:
            print(f"  {name}: {e}/{len(data)} in {time.perf_counter() - t0:.0f}s", flush=True)
    return time.perf_counter() - t0


def run_embedded(args, data, queries, gt, workdir: Path) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(args.threads)
    path = workdir / "embedded"
    shutil.rmtree(path, ignore_errors=True)
    store = EmbeddedStore(path, dim=args.dim, language="en", index="hnsw", hnsw_m=args.m, ef_construction=args.efc)
    ingest_s = ingest(store, data, args.batch, "embedded")
    t = time.perf_counter()
    store.save()
    save_s = time.perf_counter() - t
    store.close()
    t = time.perf_counter()
    store = EmbeddedStore(path, ef_search=EF_LIST[0])
    reopen_s = time.perf_counter() - t
    faiss.omp_set_num_threads(1)  # latency of one query on one core (a service runs queries side by side)

    def set_ef(ef: int) -> None:
        store.ef_search = ef

    rows = sweep(store, queries, gt, args.k, set_ef)
    size = dir_size(path)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return {
        "backend": "embedded (faiss IndexIDMap2(IndexHNSWFlat) + SQLite WAL)",
        "hnsw": {"M": args.m, "ef_construction": args.efc},
        "ingest_seconds": round(ingest_s, 1),
        "ingest_items_per_s": round(len(data) / ingest_s, 1),
        "index_build_seconds": "included in ingest (the HNSW graph grows at each add)",
        "snapshot_save_seconds": round(save_s, 1),
        "reopen_seconds": round(reopen_s, 1),
        "disk_bytes": size,
        "sweep": rows,
        "operating_point": operating_point(rows, args.k),
    }


def run_pgvector(args, data, queries, gt, workdir: Path) -> dict[str, Any]:
    settings = {
        "shared_buffers": args.pg_shared_buffers,
        "max_wal_size": "8GB",
        "checkpoint_timeout": "1800",
        "max_parallel_maintenance_workers": str(args.threads),
        "max_worker_processes": "8",
    }
    server = start_local_postgres(workdir / "pg", settings=settings)
    try:
        store = PgVectorStore(
            server.dsn + "?collection=scale", dim=args.dim, language="en", hnsw_m=args.m, ef_construction=args.efc
        )
        store.drop_index()  # bulk load: build the graph once, after the rows are in
        ingest_s = ingest(store, data, args.batch, "pgvector")
        print("  pgvector: building the HNSW index", flush=True)
        build_s = store.build_index(maintenance_work_mem=args.pg_maintenance_work_mem, parallel_workers=args.threads)
        with store._pool.connection() as conn:
            conn.execute("VACUUM ANALYZE " + store.table)
            table_bytes = conn.execute("SELECT pg_table_size(%s)", (store.table,)).fetchone()[0]
            index_bytes = conn.execute("SELECT pg_relation_size(%s)", (store.table + "_hnsw",)).fetchone()[0]
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            server_version = conn.execute("SHOW server_version").fetchone()[0]

        def set_ef(ef: int) -> None:
            store.ef_search = ef

        rows = sweep(store, queries, gt, args.k, set_ef)
        store.close()
    finally:
        server.stop()
        shutil.rmtree(workdir / "pg", ignore_errors=True)
    return {
        "backend": f"PostgreSQL {server_version} + pgvector {version} (binary COPY + upsert, HNSW vector_ip_ops)",
        "hnsw": {"m": args.m, "ef_construction": args.efc},
        "server_settings": settings,
        "maintenance_work_mem": args.pg_maintenance_work_mem,
        "ingest_seconds": round(ingest_s, 1),
        "ingest_items_per_s": round(len(data) / ingest_s, 1),
        "index_build_seconds": round(build_s, 1),
        "table_bytes": table_bytes,
        "index_bytes": index_bytes,
        "sweep": rows,
        "operating_point": operating_point(rows, args.k),
    }


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k"


def markdown(payload: dict[str, Any]) -> str:
    cfg = payload["config"]
    k = cfg["k"]
    lines = [
        f"## Store scale: {cfg['n']:,} synthetic {cfg['dim']}-d vectors ({cfg['clusters']} clusters; noise: "
        f"rank-{cfg.get('noise_rank', 0)} {cfg['noise']} + isotropic {cfg.get('iso_noise', cfg['noise'])}), "
        f"{cfg['queries']} held-out queries, recall@{k} vs exact search",
        "",
        f"Load average when started: {payload['load_average_start']}; when finished: {payload['load_average_end']} "
        "(2 CPU cores shared with other engineers' jobs: latencies are inflated and noisy). "
        f"Ingest batches of {cfg['batch']:,}; build threads {cfg['threads']}; queries one at a time on 1 thread.",
        "",
        f"Exact search (faiss flat, 1 thread) p50 {payload['exact_latency']['p50_ms']} ms, "
        f"p95 {payload['exact_latency']['p95_ms']} ms.",
        "",
        f"| backend | ingest items/s | index build s | ef_search @ recall@{k} ≥ {TARGET_RECALL} | recall@{k} | "
        "p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, res in payload["results"].items():
        op = res["operating_point"]
        build = res["index_build_seconds"] if isinstance(res["index_build_seconds"], (int, float)) else "(in ingest)"
        if op:
            lines.append(
                f"| {name} | {res['ingest_items_per_s']:,.0f} | {build} | {op['ef_search']} | {op[f'recall@{k}']} | "
                f"{op['p50_ms']} | {op['p95_ms']} |"
            )
        else:
            lines.append(f"| {name} | {res['ingest_items_per_s']:,.0f} | {build} | not reached | | | |")
    for name, res in payload["results"].items():
        lines += ["", f"### {name}: {res['backend']}", ""]
        extra = {k2: v for k2, v in res.items() if k2 not in ("sweep", "operating_point", "backend")}
        lines.append("`" + json.dumps(extra) + "`")
        lines += ["", f"| ef_search | recall@{k} | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|"]
        for r in res["sweep"]:
            lines.append(f"| {r['ef_search']} | {r[f'recall@{k}']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=2000)
    ap.add_argument("--noise", type=float, default=0.75, help="low-rank noise norm relative to the (unit) centre")
    ap.add_argument("--noise-rank", type=int, default=16, help="directions of each cluster's spread (0: none)")
    ap.add_argument("--iso-noise", type=float, default=0.25, help="isotropic noise norm relative to the centre")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--efc", type=int, default=64)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backends", default="embedded,pgvector")
    ap.add_argument("--pg-shared-buffers", default="2GB")
    ap.add_argument("--pg-maintenance-work-mem", default="4GB")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir, removed)")
    ap.add_argument("--name", default=None, help="results name (default store_scale_<n>)")
    args = ap.parse_args()

    import faiss

    faiss.omp_set_num_threads(args.threads)
    load_start = os.getloadavg()
    t = time.perf_counter()
    data, queries = dataset(args)
    gt, exact = ground_truth(data, queries, args.k)
    print(f"data + ground truth in {time.perf_counter() - t:.0f}s; exact p50 {exact['p50_ms']} ms", flush=True)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="medrank-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the PostgreSQL server runs as the postgres user and must reach its data dir
        subprocess.run(["chmod", "755", str(workdir)], check=True)
    results: dict[str, Any] = {}
    try:
        for backend in args.backends.split(","):
            print(f"== {backend}", flush=True)
            runner = {"embedded": run_embedded, "pgvector": run_pgvector}[backend]
            results[backend] = runner(args, data, queries, gt, workdir)
            # written after each backend, so a long run that is stopped keeps what it measured
            payload = {
                "environment": common.environment(threads=args.threads, seed=args.seed, data="synthetic (seeded)"),
                "config": vars(args),
                "load_average_start": [round(x, 2) for x in load_start],
                "load_average_end": [round(x, 2) for x in os.getloadavg()],
                "exact_latency": exact,
                "results": results,
            }
            common.write(args.name or f"store_scale_{label(args.n)}", payload, markdown(payload))
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
