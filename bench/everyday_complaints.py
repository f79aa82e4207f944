"""English complaints in everyday words → HPO terms: a small hand-written check of real phrasing.

The synthetic check of ``bench/symptom_sets.py`` (table (c)) composes complaints from HPO's own layperson synonyms;
people write otherwise ("I've had the runs", "my nose is blocked", "it stings when I pee"). ``bench/data/
everyday_complaints_en.jsonl`` holds 60 such complaints, written by a developer of this project, not by patients or
clinicians, with the HPO terms that may stand for each symptom they name (one *slot* per symptom; any of its terms
fills it). The labels were written before the detectors read the complaints. It is small and one person's wording:
a check of what a user meets, not a benchmark to tune on (nothing is fitted on it).

Scored with :func:`medrank.pipelines.symptom.set_eval.slot_prf` (micro P / R / F1 over slots; a term fills at most
one slot). "Decided or offered first" also counts a slot filled by the first alternative the page offers to tick.

``bench/data/everyday_complaints_en_2.jsonl`` holds 60 more (110 slots), written later by a second writer who saw
neither the first set nor any detector's output (``--data``; results in ``everyday_complaints_2``).

Chinese: ``bench/data/everyday_complaints_zh.jsonl`` (60 complaints, 87 slots, written by a developer of this
project before any detector read them) and ``everyday_complaints_zh_2.jsonl`` (60 complaints, 104 slots, written by a
second writer who saw neither the first set nor any detector's output), each slot naming ICD-10 Beijing terms and the
DXY symptoms that may stand for the symptom. They are read as ``/symptoms`` reads a Chinese complaint on a fresh
checkout (``kb: auto``): the zero-shot e5-small hybrid over ICD-10 Beijing with its shipped calibration, completed by
the ``dxy`` self-report model on the words it leaves uncovered, both built by the service's own code
(``medrank.service.build``, no trained run); beside it each part alone.

    python bench/everyday_complaints.py [--run runs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5] [--threads 1]
    python bench/everyday_complaints.py --data bench/data/everyday_complaints_en_2.jsonl
    python bench/everyday_complaints.py --data bench/data/everyday_complaints_zh.jsonl   # and ..._zh_2.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import common

from medrank.config import cache_dir, set_threads
from medrank.pipelines.symptom.inference import word_encoder
from medrank.pipelines.symptom.set_eval import slot_prf
from medrank.pipelines.symptom.sets import CALIBRATIONS, HpoHierarchy, SetCalibration, SetDetector

DATA = Path(__file__).resolve().parent / "data" / "everyday_complaints_en.jsonl"
DEFAULT_RUN = Path("runs/symptom/cpu/hpo-layperson-ensemble-4l-def-e5")


def load(path: Path, name_to_id: dict[str, str], vocabulary: str = "HPO term", fold: bool = True
         ) -> tuple[list[str], list[list[list[str]]]]:
    """The complaints of ``path`` and their slots, each name as the id ``name_to_id`` gives it (``fold``: names are
    looked up lower-cased)."""
    texts, slots = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        key = (lambda t: t.lower()) if fold else (lambda t: t)
        missing = [t for slot in row["symptoms"] for t in slot if key(t) not in name_to_id]
        if missing:
            raise SystemExit(f"{path}:{n}: no {vocabulary} is named {missing}")
        texts.append(row["text"])
        slots.append([[name_to_id[key(t)] for t in slot] for slot in row["symptoms"]])
    return texts, slots


def pct(d: dict[str, float]) -> dict[str, float]:
    return {k: round(100 * v, 2) for k, v in d.items()}


def score(detect: Any, texts: list[str], slots: list[list[list[str]]], names: dict[str, str] | None = None,
          search: Any = None, by_name: bool = False) -> dict[str, Any]:
    """Slot P / R / F1 of what ``detect`` decides (and offers first) for each complaint; ``names`` turns decided ids
    into names for the examples; ``search`` adds the whole-text top-1 row; ``by_name``: terms are matched by name (ICD-10
    Beijing writes some names under several codes)."""
    # one complaint at a time, as /symptoms reads them: an int8 query encoder quantises a batch's activations with one
    # scale, so a complaint read in a batch with others may come out otherwise
    t0 = time.perf_counter()
    found = [detect(t) for t in texts]
    seconds = time.perf_counter() - t0
    def key(t: Any) -> str:
        return t.name if by_name else t.id

    decided = [[key(t) for t in s.terms] for s in found]
    first = [[key(t) for t in s.terms] + [key(t) for t in s.alternatives[:1]] for s in found]
    names = names or {}
    examples = [{"text": text, "decided": [names.get(i, i) for i in d]} for text, d in zip(texts, decided, strict=True)]
    out = {"decided": pct(slot_prf(decided, slots)), "decided_or_offered_first": pct(slot_prf(first, slots))}
    if search is not None:
        out["whole_text_top1"] = pct(slot_prf([[i for i, _ in hits[:1]] for hits in search(texts, 1)], slots))
    return {**out, "ms_per_complaint": round(1000 * seconds / len(texts), 1), "examples": examples}


def write_tables(result_name: str, language: str, out: dict[str, Any], vocabulary: str, kept: list[str]) -> None:
    """The results file and its table (one row per system)."""
    top1 = all("whole_text_top1" in r for r in out["systems"].values())
    lines = [f"### {language} complaints in everyday words ({out['complaints']} hand-written complaints, {out['slots']} "
             "symptoms; written by a developer, not patients; a check, nothing fitted on it)", "",
             "| system | decided P | decided R | **decided F1** | decided or offered first R | "
             + ("whole-text top-1 F1 | " if top1 else "") + "ms / complaint |",
             "|---|---|---|---|---|" + ("---|" if top1 else "") + "---|"]
    for name, r in out["systems"].items():
        d = r["decided"]
        lines.append(f"| {name} | {d['precision']} | {d['recall']} | **{d['f1']}** | "
                     f"{r['decided_or_offered_first']['recall']} | "
                     + (f"{r['whole_text_top1']['f1']} | " if top1 else "") + f"{r['ms_per_complaint']} |")
    lines += ["", f"Slots: each symptom a complaint names, with the {vocabulary} that may stand for it; a decided term "
              "fills at most one slot (`medrank.pipelines.symptom.set_eval.slot_prf`). The complaints and their slots: "
              f"`bench/data/{out['data']}`."]
    if kept:
        lines += ["", "Not re-run this time (the trained run was not on the machine), kept as an earlier run of this script "
                  "wrote them: " + "; ".join(kept) + "."]
    common.write(result_name, out, "\n".join(lines))
    for name, r in out["systems"].items():
        print(name, r["decided"], flush=True)


def main_zh(args: argparse.Namespace) -> None:
    import tempfile

    from medrank.config import dataset_dir
    from medrank.service.build import build_services
    from medrank.service.settings import ServiceSettings

    vocabulary = dataset_dir("chip-cdn") / "icd10_beijing_v601.tsv"
    icd = {line.split("\t")[1] for line in vocabulary.read_text(encoding="utf-8").splitlines()[1:] if "\t" in line}
    dxy = {line.strip() for line in (dataset_dir("dxy-dialog") / "symptoms_dxy.txt").read_text(encoding="utf-8").splitlines()
           if line.strip()}
    texts, slots = load(args.data, {n: n for n in icd | dxy}, "ICD-10 Beijing name or DXY symptom", fold=False)
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as state:
        # what a fresh checkout serves: no trained run (an empty models folder), the two Chinese knowledge bases
        settings = ServiceSettings(api_token=None, batch_queries=False, backend="auto", state_dir=Path(state),
                                   models_dir=Path(empty), kbs=("chip-cdn", "dxy"))
        symptoms = build_services(settings, ("symptoms",), show_progress=False).symptoms
    icd_alone, dxy_alone = symptoms.set_detectors["chip-cdn"], symptoms.set_detectors["dxy"]
    served = {
        "zero-shot e5-small hybrid over ICD-10 Beijing, shipped calibration, completed by the dxy self-report model "
        "(as served, kb auto)": lambda t: symptoms.decide_many([t], "zh")[0],
        "zero-shot e5-small hybrid over ICD-10 Beijing alone (kb chip-cdn)": icd_alone.detect,
        "dxy self-report model alone (41 DXY symptoms, kb dxy)": dxy_alone.detect,
    }
    systems = {name: score(detect, texts, slots, by_name=True) for name, detect in served.items()}
    result_name = args.name or args.data.stem
    out = {"complaints": len(texts), "slots": sum(len(s) for s in slots), "data": str(args.data.name),
           "systems": systems, "environment": common.environment(threads=args.threads, seed=None, data=str(args.data))}
    write_tables(result_name, "Chinese", out, "ICD-10 Beijing names and DXY symptoms", [])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=DEFAULT_RUN, help="the trained English run the service serves")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default=None, help="results file name under bench/results (default: from --data: "
                    "everyday_complaints for everyday_complaints_en.jsonl, everyday_complaints_2 for ..._en_2.jsonl)")
    args = ap.parse_args()
    set_threads(args.threads)
    if "_zh" in args.data.stem:
        main_zh(args)
        return
    from symptom_sets import retriever

    from medrank.data.consumer import hpo_with_consumer_wordings

    concepts = hpo_with_consumer_wordings()  # as the service's HPO knowledge base holds them
    name_to_id = {c.name.lower(): c.id for c in concepts}
    names = {c.id: c.name for c in concepts}
    texts, slots = load(args.data, name_to_id)
    systems: dict[str, Any] = {}
    if (args.run / "sets-hpo.json").exists():
        # as /symptoms serves it: the run's index and calibration, queries on the fastest agreeing ONNX form
        served = SetDetector.from_run(args.run, "hpo", backend="auto")
        how = f" ({served.serving})" if served.serving else ""
        how += " + small-talk gate" if served.small_talk is not None else ""
        systems[f"trained run {args.run.name}, its own calibration, served form{how}"] = score(served.detect, texts, slots, names, served.search)
    result_name = args.name or args.data.stem.replace("_en", "")
    results = common.RESULTS / f"{result_name}.json"
    kept: list[str] = []
    if not (args.run / "sets-hpo.json").exists() and results.exists():
        # the trained run is not on this machine: its rows stay as the last run that had it wrote them, and say so
        before = json.loads(results.read_text(encoding="utf-8"))
        for name, row in before.get("systems", {}).items():
            if name.startswith("trained run"):
                systems[name] = row
                kept.append(name)
        print(f"{args.run} has no sets-hpo.json: its rows are kept from {results.name} ({len(kept)})", flush=True)
    # what a fresh checkout serves without trained runs: MiniLM hybrid over every HPO name and synonym
    hybrid = retriever("hpo-full-hybrid-minilm", concepts, "hybrid", "minilm", "en")
    zero = SetDetector.from_retriever(hybrid, language="en", hierarchy=HpoHierarchy(), name="hpo")
    zero.calibration = SetCalibration.load(CALIBRATIONS / "hpo-hybrid.json")
    # small talk read as no finding over the hybrid's dense part, as the service's HPO store is gated
    gate = " + small-talk gate" if zero.use_small_talk(hybrid.index, concepts) else ""
    # everyday words read as the vocabulary's nearest word (rule lay_words), over the same dense encoder
    zero.use_lay_words(word_encoder(hybrid.index), cache_dir() / "embeddings")
    systems[f"zero-shot MiniLM hybrid, shipped calibration (hpo-hybrid.json){gate}"] = score(zero.detect, texts, slots, names, zero.search)
    out = {"complaints": len(texts), "slots": sum(len(s) for s in slots), "data": str(args.data.name),
           "systems": systems, **({"kept_from_an_earlier_run": kept} if kept else {}),
           "environment": common.environment(threads=args.threads, seed=None, data=str(args.data))}
    write_tables(result_name, "English", out, "HPO terms", kept)


if __name__ == "__main__":
    main()
