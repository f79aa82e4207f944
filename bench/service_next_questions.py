"""The service's /next-questions with and without dropping rephrased questions.

The English question bank holds every distinct doctor question of MTS-Dialog (4,200), so one
question comes in many phrasings ("Have you had a fever?", "do you have any fever?", "Any fever?").
With ``distinct`` the service drops a question whose MiniLM cosine with a better-ranked one or with
a question the doctor already asked is >= 0.80 (the history question bank's clustering threshold).

For the first patient turn of each MTS-Dialog validation conversation (a real complaint), both
forms rank k = 5 questions from the service's own bank (built or loaded from the service state, as
``medrank serve`` does). Reported: the share of lists holding a rephrased pair (some two of the five
at cosine >= 0.80), the mean number of questions per list that rephrase a better-ranked one, how many
of the plain list's five stay, and the latency of one ``rank`` call (in process, no HTTP).

    python bench/service_next_questions.py [--threads 1] [--n 200]   # the validation file has 75 such turns
"""

from __future__ import annotations

import argparse
import csv
import time

import common
import numpy as np

from medrank.config import data_root, dataset_dir, seed_everything, set_threads
from medrank.service.build import build_services
from medrank.service.pipelines import DISTINCT_COSINE, NextQuestionService
from medrank.service.settings import ServiceSettings


def first_patient_turns(n: int) -> list[str]:
    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-ValidationSet.csv"
    turns = []
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            for line in (row.get("dialogue") or "").splitlines():
                speaker, _, text = line.partition(":")
                if speaker.strip().lower() == "patient" and len(text.split()) >= 4:
                    turns.append(text.strip())
                    break
    return turns[:n]


def rephrasings(rows: list[dict], bank, threshold: float) -> int:
    """Questions of the list whose cosine with a better-ranked one reaches ``threshold``."""
    vecs = bank.vectors_of([r["id"] for r in rows])
    sims = vecs @ vecs.T
    return sum(1 for i in range(1, len(rows)) if sims[i, :i].max() >= threshold - 1e-6)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    settings = ServiceSettings(api_token=None, batch_queries=False)
    service = build_services(settings, ("next-questions",), show_progress=False).next_questions
    bank = service.banks["en"]
    if bank.vectors is None:
        raise SystemExit("the English question bank has no stored vectors")
    forms = {"plain": NextQuestionService(service.banks, service.encoders),
             "distinct": NextQuestionService(service.banks, service.encoders, distinct={"en": DISTINCT_COSINE})}
    turns = first_patient_turns(args.n)
    lists: dict[str, list[list[dict]]] = {name: [] for name in forms}
    seconds: dict[str, list[float]] = {name: [] for name in forms}
    for svc in forms.values():
        svc.rank([{"speaker": "patient", "text": turns[0]}], language="en", k=args.k)  # warm-up
    for text in turns:
        dialogue = [{"speaker": "patient", "text": text}]
        for name, svc in forms.items():  # interleaved, so both forms see the same host state
            t0 = time.perf_counter()
            out = svc.rank(dialogue, language="en", k=args.k)
            seconds[name].append(time.perf_counter() - t0)
            lists[name].append(out["results"])
    rows, table = {}, []
    for name in forms:
        reph = [rephrasings(r, bank, DISTINCT_COSINE) for r in lists[name]]
        kept = [len({q["id"] for q in a} & {q["id"] for q in b}) for a, b in zip(lists["plain"], lists[name], strict=True)]
        lat = common.percentiles(seconds[name])
        rows[name] = {"lists": len(reph), "lists_with_a_rephrased_pair_pct": round(100 * np.mean([x > 0 for x in reph]), 1),
                      "rephrasings_per_list": round(float(np.mean(reph)), 2),
                      "mean_list_length": round(float(np.mean([len(r) for r in lists[name]])), 2),
                      "plain_questions_kept": round(float(np.mean(kept)), 2), **lat}
        table.append(f"| {name} | {rows[name]['lists']} | {rows[name]['lists_with_a_rephrased_pair_pct']} | "
                     f"{rows[name]['rephrasings_per_list']} | {rows[name]['mean_list_length']} | {rows[name]['plain_questions_kept']} | "
                     f"{lat['p50_ms']} | {lat['p95_ms']} |")
    examples = [{"complaint": t, "plain": [q["text"] for q in p], "distinct": [q["text"] for q in d]}
                for t, p, d in list(zip(turns, lists["plain"], lists["distinct"], strict=True))[:3]]
    md = ["# /next-questions: rephrased questions dropped or kept", "",
          f"First patient turn of {len(turns)} MTS-Dialog validation conversations; the service's English bank "
          f"({len(bank.ids):,} questions, {bank.retrieval}), k = {args.k}; a rephrased pair = MiniLM cosine >= "
          f"{DISTINCT_COSINE:.2f}; latency of one in-process `rank` call, {args.threads} thread(s), the two forms interleaved.", "",
          "| form | lists | lists with a rephrased pair (%) | rephrasings per list | questions per list | of the plain five kept | p50 ms | p95 ms |",
          "|---|---:|---:|---:|---:|---:|---:|---:|", *table, "", "Examples (the first three complaints):", ""]
    for ex in examples:
        md += [f"- *{ex['complaint']}*", f"  - plain: {' / '.join(ex['plain'])}", f"  - distinct: {' / '.join(ex['distinct'])}"]
    common.write("service_next_questions",
                 {"environment": common.environment(args.threads, args.seed, str(data_root())), "n": len(turns),
                  "k": args.k, "threshold": DISTINCT_COSINE, "results": rows, "examples": examples}, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
