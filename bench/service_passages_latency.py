"""/passages latency through the real app on loopback: k = 5 and k = 50, one client, then 10 concurrent clients.

The zero-shot passage service over every MedQuAD passage (BM25 recall, MiniLM query encoder, the sentences'
vectors computed at index time) runs in ``uvicorn`` on 127.0.0.1 in this process, with torch on ``--threads``
threads; httpx clients send (entity, aspect) pairs of MedQuAD.

The sentence vectors come from a built service state (``--state STATE``: ``STATE/passages-bm25``, what
``medrank serve`` builds). Without one, ``--stand-in-vectors`` uses random unit vectors of the same shape
and dtype: a request does exactly the same work (encode the query, BM25 over every passage, one dot product
per sentence of the returned passages and the best document), so the *timings* hold, but the sentence
scores are meaningless — use it only when the one-time encode of the corpus has not been run.

    nice -n 10 .venv/bin/python bench/service_passages_latency.py --state ~/.cache/medrank/service --threads 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path

import common

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_load import passage_queries, run_passages  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_service(args: argparse.Namespace):  # noqa: ANN201
    import numpy as np

    from medrank.data.medquad import load_passage_corpus
    from medrank.encoders import load_encoder
    from medrank.index import BM25Index, load_index
    from medrank.pipelines.passages.text import split_sentences
    from medrank.service.adapters import BM25PassageService

    encoder = load_encoder("minilm")
    version = "MedQuAD (all visible documents)"
    if args.state:
        out = Path(args.state).expanduser() / "passages-bm25"
        with open(out / "passages.jsonl", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        sentences = [row.pop("sentences") for row in rows]
        return BM25PassageService(rows, load_index(out / "index"), encoder, version, sentences,
                                  np.load(out / "sentence_vectors.npy")), "built state"
    if not args.stand_in_vectors:
        raise SystemExit("give --state (a built service state) or --stand-in-vectors")
    corpus = load_passage_corpus(None, "all")
    rows = [{"id": p.id, "doc_id": d.id, "title": d.title, "label": p.label, "text": p.text}
            for d in corpus.documents for p in d.passages]
    sentences = [[t for t, _ in split_sentences(r["text"])] for r in rows]
    n = sum(len(s) for s in sentences)
    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((n, encoder.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = BM25Index(language="en").build([r["id"] for r in rows], [r["text"] for r in rows])
    return BM25PassageService(rows, index, encoder, version, sentences, vectors.astype(np.float16)), \
        "stand-in random vectors (timings only)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", default=None)
    ap.add_argument("--stand-in-vectors", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--requests", type=int, default=30, help="sequential requests per k")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--concurrent-requests", type=int, default=5, help="requests per concurrent client")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds per phase at most")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    import uvicorn

    from medrank.config import set_threads
    from medrank.service.adapters import Services
    from medrank.service.app import create_app
    from medrank.service.settings import ServiceSettings

    set_threads(args.threads)
    t0 = time.perf_counter()
    svc, vectors = build_service(args)
    setup_s = round(time.perf_counter() - t0, 1)
    port = free_port()
    settings = ServiceSettings(api_token=None, request_timeout_s=30.0)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, Services(passages=svc)), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    pairs = passage_queries()
    random.Random(args.seed).shuffle(pairs)
    asyncio.run(run_passages(base, 1, 3, 5, pairs, args.seed + 1, args.deadline))  # warm-up
    phases = []
    for clients, each in ((1, args.requests), (args.clients, args.concurrent_requests)):
        for k in (5, 50):
            load = [round(x, 2) for x in os.getloadavg()]
            r = asyncio.run(run_passages(base, clients, each, k, pairs, args.seed, args.deadline))
            r["load_average_before"] = load
            print(r, flush=True)
            phases.append(r)
    server.should_exit = True
    thread.join(timeout=10)
    env = common.environment(threads=args.threads, seed=args.seed, data=os.environ.get("MEDRANK_DATA", "../shared/data"))
    payload = {"environment": env, "vectors": vectors, "passages": len(svc.passages), "sentences": len(svc.flat),
               "setup_s": setup_s, "phases": phases}
    rows = ["| k | clients | requests ok | errors | p50 ms | p95 ms | p99 ms | load avg before |",
            "|---:|---:|---:|---:|---:|---:|---:|---|"]
    rows += [f"| {p['k']} | {p['clients']} | {p['requests_ok']} | {p['errors']} {p['error_kinds'] or ''} | {p.get('p50_ms')} | "
             f"{p.get('p95_ms')} | {p.get('p99_ms')} | {p['load_average_before']} |" for p in phases]
    md = (f"# /passages latency (loopback, real app)\n\n`python bench/service_passages_latency.py "
          f"{' '.join(sys.argv[1:])}`: {len(svc.passages):,} MedQuAD passages, {len(svc.flat):,} sentences; sentence "
          f"vectors: **{vectors}**; torch on {args.threads} thread(s); each client sends its requests one after another "
          "((entity, aspect) pairs of MedQuAD); 2 CPU cores shared with other jobs (load averages in the table).\n\n"
          + "\n".join(rows) + "\n")
    common.write("service_passages_latency", payload, md)


if __name__ == "__main__":
    main()
