"""Small talk read as no finding: what the English set detector decides on patient turns that are mostly not
complaints, and on complaints, with and without the small-talk gate (``medrank.pipelines.symptom.small_talk``).

Texts:

* every patient (and family) turn of MTS-Dialog's *validation* conversations (the gate's small-talk turns come
  from the training conversations only). Most turns answer a question ("Yes.", "I'm forty one.", "Thank you,
  doctor."); some state a finding ("My right hand hurts.", "I threw up this morning."). Nothing here says which,
  so the table reports how many turns get a decided term, and the JSON lists every turn whose terms the gate
  removed, to be read;
* the two sets of everyday English complaints (``bench/data/everyday_complaints_en*.jsonl``), scored by slots as
  in ``bench/everyday_complaints.py``: what the gate costs on complaints;
* a few texts a person types to a clinic's page that are not complaints (``CHATTER``, written by a developer).

Two detectors, each with the gate and without: the served English run as ``/symptoms`` serves it
(``SetDetector.from_run``, queries on the ONNX form chosen at load), and the zero-shot MiniLM hybrid a fresh checkout
serves (its gate over the hybrid's dense part); one text at a time on ``--threads`` threads, the query memo emptied
before each text.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

import common

from medrank.config import dataset_dir, set_threads
from medrank.pipelines.symptom.set_eval import slot_prf
from medrank.pipelines.symptom.sets import SetDetector
from medrank.pipelines.symptom.small_talk import MAX_WORDS, patient_turns

DEFAULT_RUN = Path("runs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5")
EVERYDAY = (Path(__file__).parent / "data" / "everyday_complaints_en.jsonl",
            Path(__file__).parent / "data" / "everyday_complaints_en_2.jsonl")
#: texts a person may type to the page that name no finding (a developer's list; the MTS-Dialog turns are the data)
CHATTER = ("ok", "hello", "thank you", "I'm fine", "can you help me", "my name is John", "what should I do",
           "I need a doctor", "hi, I am not feeling well", "nothing", "good morning doctor", "yes", "no", "see you")
def validation_turns() -> list[str]:
    return patient_turns(dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-ValidationSet.csv")


def decide(detector: SetDetector, texts: list[str], memo_of: SetDetector | None = None) -> tuple[list[Any], list[float]]:
    """Each text decided alone, and the milliseconds it took (the query memo of ``memo_of``'s gate emptied before each)."""
    sets, ms = [], []
    for t in texts:
        if memo_of is not None:  # each text read as a new one: no query vector remembered from before
            memo_of.forget_queries()
        t0 = time.perf_counter()
        sets.append(detector.detect(t))
        ms.append(1000 * (time.perf_counter() - t0))
    return sets, ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=DEFAULT_RUN, help="the trained English run the service serves")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    from everyday_complaints import load
    from symptom_sets import _plain_query_encoder, retriever

    from medrank.data.consumer import hpo_with_consumer_wordings
    from medrank.pipelines.symptom.sets import CALIBRATIONS, HpoHierarchy, SetCalibration

    served = SetDetector.from_run(args.run, "hpo", backend="auto")
    if served.small_talk is None:
        raise SystemExit("the small-talk gate could not be built (is MTS-Dialog under the data root?)")
    # what a fresh checkout serves: MiniLM hybrid over every HPO name, synonym and everyday wording, the shipped
    # calibration, the gate over its dense part (the service's HPO store is gated on its dense scores the same way)
    concepts = hpo_with_consumer_wordings()
    hybrid = retriever("hpo-full-hybrid-minilm", concepts, "hybrid", "minilm", "en")
    _plain_query_encoder(hybrid)  # queries encoded as the service encodes them, not read from the bench's disk cache
    zero = SetDetector.from_retriever(hybrid, language="en", hierarchy=HpoHierarchy(), name="hpo")
    zero.calibration = SetCalibration.load(CALIBRATIONS / "hpo-hybrid.json")
    zero.use_small_talk(hybrid.index, concepts)
    out: dict[str, Any] = {"run": str(args.run)}
    turns = validation_turns()
    tables = []
    for key, label, gated in (("served", f"served English run {args.run.name}", served),
                              ("zero_shot", "zero-shot MiniLM hybrid, shipped calibration (hpo-hybrid.json)", zero)):
        plain = copy.copy(gated)  # the same loaded detector (one ONNX form for both), without the gate
        plain.small_talk = None
        name_to_id = {n.lower(): i for i, n in gated.names.items()}
        part: dict[str, Any] = {"small_talk_turns": len(gated.small_talk.turns)}
        rows = []
        without_sets, without_ms = decide(plain, turns, memo_of=gated)
        with_sets, with_ms = decide(gated, turns, memo_of=gated)
        removed = [{"text": t, "removed": [x.name for x in b.terms if x.id not in {y.id for y in a.terms}]}
                   for t, a, b in zip(turns, with_sets, without_sets, strict=True)
                   if {x.id for x in a.terms} != {x.id for x in b.terms}]
        decided_without = sum(bool(s.terms) for s in without_sets)
        decided_with = sum(bool(s.terms) for s in with_sets)
        part["mts_dialog_validation"] = {"turns": len(turns), "with_a_decided_term_without_gate": decided_without,
                                         "with_a_decided_term_with_gate": decided_with, "turns_changed": len(removed),
                                         "changed": removed}
        rows.append(f"| MTS-Dialog validation patient turns ({len(turns)}): turns with a decided term | "
                    f"{decided_without} ({100 * decided_without / len(turns):.1f} %) | {decided_with} "
                    f"({100 * decided_with / len(turns):.1f} %) |")
        chatter_with, _ = decide(gated, list(CHATTER), memo_of=gated)
        chatter_without, _ = decide(plain, list(CHATTER), memo_of=gated)
        part["chatter"] = [{"text": t, "without_gate": [x.name for x in b.terms], "with_gate": [x.name for x in a.terms]}
                           for t, a, b in zip(CHATTER, chatter_with, chatter_without, strict=True)]
        rows.append(f"| {len(CHATTER)} typed non-complaints (`CHATTER`): texts with a decided term | "
                    f"{sum(bool(s.terms) for s in chatter_without)} | {sum(bool(s.terms) for s in chatter_with)} |")
        everyday = {}
        for path in EVERYDAY:
            texts, slots = load(path, name_to_id)
            a, _ = decide(gated, texts, memo_of=gated)
            b, _ = decide(plain, texts, memo_of=gated)
            f_with = slot_prf([{x.id for x in s.terms} for s in a], slots)
            f_without = slot_prf([{x.id for x in s.terms} for s in b], slots)
            everyday[path.name] = {
                "complaints": len(texts), "without_gate": {k: round(100 * v, 2) for k, v in f_without.items()},
                "with_gate": {k: round(100 * v, 2) for k, v in f_with.items()},
                "changed": [{"text": t, "without_gate": [x.name for x in y.terms], "with_gate": [x.name for x in x2.terms]}
                            for t, x2, y in zip(texts, a, b, strict=True) if {x.id for x in x2.terms} != {x.id for x in y.terms}]}
            rows.append(f"| everyday complaints `{path.name}` ({len(texts)}): decided P / R / **F1** | "
                        f"{f_without['precision'] * 100:.2f} / {f_without['recall'] * 100:.2f} / **{f_without['f1'] * 100:.2f}** | "
                        f"{f_with['precision'] * 100:.2f} / {f_with['recall'] * 100:.2f} / **{f_with['f1'] * 100:.2f}** |")
        part["everyday"] = everyday
        part["ms_per_text"] = {"without_gate_p50": round(statistics.median(without_ms), 1),
                               "with_gate_p50": round(statistics.median(with_ms), 1)}
        rows.append(f"| ms per MTS-Dialog turn, p50 | {part['ms_per_text']['without_gate_p50']} | "
                    f"{part['ms_per_text']['with_gate_p50']} |")
        out[key] = part
        tables += [f"#### {label} (gate over {part['small_talk_turns']} small-talk turns)", "",
                   "| texts | without the gate | with the gate |", "|---|---|---|", *rows, ""]
        print("\n".join(tables[-len(rows) - 5:]), flush=True)
    out["environment"] = common.environment(threads=args.threads, seed=None, data="mts-dialog (validation), "
                                            "bench/data/everyday_complaints_en*.jsonl")
    lines = ["### Small talk read as no finding (MTS-Dialog training turns of at most "
             f"{MAX_WORDS} words, as the service reads them)", "", *tables,
             "Every MTS-Dialog turn the gate changed is listed in `small_talk.json` (`<detector>.mts_dialog_validation."
             "changed`); the turns are a mix of answers and findings, and nothing marks which."]
    common.write("small_talk", out, "\n".join(lines))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
