"""The English question bank of ``/next-questions``: ranked by the query alone vs by the history first stage.

Where no finding of the inquiry engine is read, the question bank proposes the next questions. It used to rank
MTS-Dialog doctor questions by their similarity to the patient's words (hybrid BM25 + MiniLM, RRF); it now ranks the
history pipeline's canonical questions with the pipeline's own first stage (what doctors asked next after the most
similar training turns, the question's similarity, BM25, how often it is asked: ``medrank.pipelines.history.
first_stage``), built from the MTS-Dialog + ACI-Bench training dialogues. Both are built by the service's own
builder, as served, and called through ``NextQuestionRanker.rank`` (k = 5, rephrasings dropped at MiniLM cosine 0.80).

Protocol: every questioning doctor turn of the history validation split (the official validation files plus the
20 % of training dialogues carved out with seed 13, none of which the first stage's memory holds); the dialogue up to
that turn is sent, and a proposed question is right when it is the question the doctor asked there. One judge for
both: a question (asked or proposed) is mapped to the first stage's canonical questions at MiniLM cosine >= 0.80
(the bank's own merge threshold); turns whose asked questions map to none are left out. The plain bank holds the
validation dialogues' own questions verbatim (it is built from the training and validation files), which can only
favour it. Reported: hit@5 (share of turns where a proposed question is one asked), recall@5, MRR@5, latency per call;
and the first three questions each bank proposes after a dozen openings that name no symptom.

    python bench/question_bank_first_stage.py [--threads 1] [--backend auto]
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

import common

from medrank.config import seed_everything, set_threads
from medrank.pipelines.history.builders.mts_aci import carve, default_files, question_samples, read_dialogues
from medrank.pipelines.history.builders.question_bank import DEFAULT_THRESHOLD, map_to_bank
from medrank.pipelines.history.inference import mts_doctor_questions
from medrank.pipelines.history.question_bank import DISTINCT_COSINE, NextQuestionRanker, is_tagged_statement
from medrank.service.build import Builder
from medrank.service.settings import ServiceSettings

K = 5
#: openings that name no symptom (the same as bench/inquiry_from_words.py)
OPENINGS = ("Hello doctor", "Hi", "Good morning", "ok", "Thank you", "I'm fine, thanks", "My name is John",
            "I need a sick note for work", "I'm here for my yearly check-up", "Can I get a repeat prescription?",
            "I'd like to talk about my test results", "My GP sent me")


def validation_turns() -> list[Any]:
    """Every questioning doctor turn of the validation split, as ``medrank history build`` carves it."""
    files = default_files()
    _, carved = carve(read_dialogues(files["train"], "train"), 0.2, 13)
    return question_samples(read_dialogues(files["valid"], "valid") + carved)


def dialogue_of(sample: Any) -> list[dict[str, str]]:
    turns = [{"speaker": "doctor" if t.speaker == "doctor" else "patient", "text": t.text} for t in sample.context]
    return turns or [{"speaker": "patient", "text": "Hello"}]  # a dialogue the doctor opens: the patient greets


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    set_threads(args.threads)
    seed_everything(args.seed)
    settings = ServiceSettings(api_token=None, batch_queries=False, backend=args.backend)
    builder = Builder(settings, show_progress=False)
    encoder = builder.encoder("en")
    staged = builder._first_stage_bank()
    if staged is None:
        raise SystemExit("no history first stage could be built (MTS-Dialog / ACI-Bench missing, or not MiniLM)")
    plain = builder._question_bank("en", "MTS-Dialog doctor questions", mts_doctor_questions)
    with_statements = copy.copy(staged)  # the same first stage, its statements with a confirmation tag proposed too
    with_statements.never_asked = frozenset()
    banks = {"query alone (hybrid BM25 + MiniLM over MTS-Dialog questions; before)": plain,
             "history first stage, statements with a tag proposed too (before)": with_statements,
             "history first stage, statements with a tag left out (served)": staged}
    stage = staged.first_stage
    known = {m: q.id for q in stage.bank for m in q.members}

    def judge(texts: list[str]) -> dict[str, str | None]:
        texts = sorted(set(texts))
        return dict(zip(texts, map_to_bank([t.lower() for t in texts], stage.bank, stage.vectors, stage.encoder, known,
                                           DEFAULT_THRESHOLD), strict=True))

    samples = validation_turns()
    gold_of = judge([q for s in samples for q in s.asked])
    samples = [s for s in samples if any(gold_of[q] for q in s.asked)]
    rows: dict[str, dict[str, float]] = {}
    openings: dict[str, list[list[str]]] = {}
    for name, bank in banks.items():
        ranker = NextQuestionRanker({"en": bank}, {"en": encoder}, distinct={"en": DISTINCT_COSINE})
        proposed, seconds = [], []
        for s in samples:
            t0 = time.perf_counter()
            out = ranker.rank(dialogue_of(s), [], None, "en", K)
            seconds.append(time.perf_counter() - t0)
            proposed.append([r["text"] for r in out["results"]])
        mapped = judge([t for p in proposed for t in p])
        statements = sum(is_tagged_statement(t.lower()) for p in proposed for t in p)
        hit = recall = mrr = 0.0
        for s, texts in zip(samples, proposed, strict=True):
            gold = {gold_of[q] for q in s.asked if gold_of[q]}
            got = [mapped[t] for t in texts]
            hit += bool(gold & set(got))
            recall += len(gold & set(got)) / len(gold)
            mrr += next((1.0 / (i + 1) for i, g in enumerate(got) if g in gold), 0.0)
        n = len(samples)
        rows[name] = {"hit@5": round(100 * hit / n, 2), "recall@5": round(100 * recall / n, 2),
                      "mrr@5": round(100 * mrr / n, 2),
                      "tagged_statements_proposed_pct": round(100 * statements / max(1, sum(map(len, proposed))), 2),
                      **common.percentiles(seconds)}
        openings[name] = [[r["text"] for r in ranker.rank([{"speaker": "patient", "text": o}], [], None, "en", 3)["results"]]
                          for o in OPENINGS]
        print(name, rows[name], flush=True)
    payload = {"environment": common.environment(args.threads, args.seed, "mts-dialog + aci-bench"),
               "turns": len(samples), "k": K, "systems": rows,
               "first_stage": {"questions": len(stage.bank), "training_turns": len(stage.memory.tails),
                               "weights": stage.weights},
               "openings": {o: {name: openings[name][i] for name in banks} for i, o in enumerate(OPENINGS)}}
    md = ["# The English question bank: ranked by the query alone vs by the history first stage", "",
          f"{len(samples)} questioning doctor turns of the history validation split whose asked question is in the first "
          f"stage's bank ({len(stage.bank):,} canonical questions, {len(stage.memory.tails):,} training turns); "
          f"k = {K}; values in %, latency per `rank` call in ms.", "",
          "| system | hit@5 | recall@5 | MRR@5 | statements with a tag among the proposed | p50 ms | p95 ms |",
          "|---|---:|---:|---:|---:|---:|---:|",
          *(f"| {n} | {r['hit@5']} | {r['recall@5']} | {r['mrr@5']} | {r['tagged_statements_proposed_pct']} | "
            f"{r['p50_ms']} | {r['p95_ms']} |" for n, r in rows.items()), "",
          "A statement with a tag: the plan announced or the record confirmed (\"... okay?\", \"you're seventy eight "
          "years old correct?\"; `medrank.pipelines.history.question_bank.is_tagged_statement`); the asked question "
          "of a validation turn may be one, so leaving them out can only lower hit@5 there.", "",
          "## First three questions after an opening that names no symptom", "",
          "| opening | " + " | ".join(banks) + " |", "|---|" + "---|" * len(banks),
          *(f"| {o} | " + " | ".join("; ".join(openings[name][i]) for name in banks) + " |" for i, o in enumerate(OPENINGS))]
    common.write("question_bank_first_stage", payload, "\n".join(md))


if __name__ == "__main__":
    main()
