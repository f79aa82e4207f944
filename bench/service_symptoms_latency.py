"""/symptoms latency of one request at a time through the real app, English and Chinese, 1 thread.

The symptom pipeline is built (or loaded) from a service state the way ``medrank serve`` builds it: default
knowledge bases, embedded store, ``--backend auto``, trained runs from ``--models`` (a trained CHIP-CDN run is
served with its query encoder on the fastest ONNX form that agrees with torch and HNSW search). Requests go
through the FastAPI app in process (Starlette's TestClient: no network), one after another; each complaint is
sent ``--rounds`` times after one warm-up round.

    python bench/service_symptoms_latency.py --state ~/.cache/medrank/service --models runs --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import common

#: short patient complaints of the kind the page gets (the issues' examples and similar ones)
COMPLAINTS = {
    "en": ["I keep waking up at night short of breath", "my knee is swollen and hurts when I walk",
           "I have a runny nose and a sore throat", "headache, fever and a stiff neck", "my son has a rash with itching",
           "I feel dizzy and sick to my stomach", "I have a headache and fever since yesterday",
           "chest pain when I climb stairs", "I have been coughing for two weeks", "my ankle hurts after a fall"],
    "zh": ["头痛发烧两天", "宝宝咳嗽流鼻涕，昨晚发烧", "肚子疼拉肚子", "糖尿病反复低血糖;骨质疏松;高血压冠心病不稳定心绞痛",
           "左膝退变伴游离体", "孩子三天前开始发烧，今天有点咳嗽和鼻塞", "胸闷气短一周", "头晕恶心想吐", "皮肤起红疹很痒",
           "腰疼腿麻"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", required=True, help="a service state directory (built here when empty)")
    ap.add_argument("--models", default="runs", help="trained runs the service may use")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--name", default="service_symptoms_latency",
                    help="results file name under bench/results (e.g. one for the trained runs, one for a fresh clone)")
    args = ap.parse_args()
    from fastapi.testclient import TestClient

    from medrank.config import set_threads
    from medrank.service.app import create_app
    from medrank.service.build import build_services
    from medrank.service.settings import ServiceSettings

    set_threads(args.threads)
    settings = ServiceSettings(api_token=None, state_dir=Path(args.state).expanduser(), models_dir=Path(args.models),
                               backend="auto", store="embedded:")  # as medrank serve: the embedded store under --state
    t0 = time.perf_counter()
    services = build_services(settings, pipelines=("symptoms",), show_progress=False)
    setup_s = round(time.perf_counter() - t0, 1)
    client = TestClient(create_app(settings, services))
    rows = {}
    for language, texts in COMPLAINTS.items():
        models = set()
        for text in texts:  # warm-up round
            r = client.post("/symptoms", json={"query": text})
            r.raise_for_status()
            models.add(r.json().get("model", ""))
        load = [round(x, 2) for x in os.getloadavg()]
        samples = []
        for _ in range(args.rounds):
            for text in texts:
                start = time.perf_counter()
                client.post("/symptoms", json={"query": text}).raise_for_status()
                samples.append(time.perf_counter() - start)
        rows[language] = {**common.percentiles(samples), "complaints": len(texts), "models": sorted(models),
                          "load_average_before": load, "load_average_after": [round(x, 2) for x in os.getloadavg()]}
        print(language, rows[language], flush=True)
    env = common.environment(threads=args.threads, seed=None, data=os.environ.get("MEDRANK_DATA", "../shared/data"))
    payload = {"environment": env, "setup_s": setup_s, "rows": rows, "state": str(args.state), "models": args.models}
    table = ["| language | complaints × rounds | p50 ms | p95 ms | p99 ms | served by | load average before → after |",
             "|---|---:|---:|---:|---:|---|---|"]
    table += [f"| {lang} | {r['complaints']} × {args.rounds} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | "
              f"{'; '.join(r['models'])} | {r['load_average_before']} → {r['load_average_after']} |" for lang, r in rows.items()]
    md = (f"# /symptoms latency, one request at a time (real app, in process)\n\n`python bench/service_symptoms_latency.py "
          f"{' '.join(sys.argv[1:])}`: default knowledge bases, `--backend auto`, torch / ONNX Runtime on {args.threads} "
          f"thread(s); {args.rounds} rounds over the complaints below after a warm-up round (set decision, spans and "
          "probabilities included); 2 CPU cores, other jobs paused.\n\n" + "\n".join(table) + "\n")
    common.write(args.name, payload, md)


if __name__ == "__main__":
    main()
