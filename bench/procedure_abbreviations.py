"""Procedure abbreviations written alone ("TURP") at /normalize: which are read, what they get, what stays refused.

/normalize refuses a mention without a Han character (an English sentence's nearest Chinese name would be a confident
wrong code). Records also write a procedure by its abbreviation alone, and the CHIP 2019 training mentions hold such
rows; the page's hint promised that "common abbreviations such as TURP work too", yet "TURP" was refused. The
service now reads the abbreviations of its data (``medrank.pipelines.procedures.abbreviations``: the Latin words the
code list writes in brackets, and those of the training mentions written without a Han character). Reported:

* the abbreviations, and for each, the served zero-shot normaliser's first name against the names the data gives it
  (the names that write it in brackets, the training names of a mention that is that abbreviation alone);
* the visible validation mentions without a Han character: how many are read now, and their first name;
* what must stay refused: the MTS-Dialog validation patient turns (English sentences) and a few typed texts.

    python bench/procedure_abbreviations.py [--state DIR] [--threads 1]
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import common

from medrank.config import dataset_dir, set_threads
from medrank.pipelines.history.builders.mts_aci import read_dialogues
from medrank.service.build import build_services
from medrank.service.settings import ServiceSettings

TYPED = ("hello", "I need surgery", "what is this code", "ok", "12345", "knee replacement", "CT scan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, default=None, help="the service state folder (default: as `medrank serve`)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    from medrank.data.procedures import load_procedure_kb, load_procedure_mentions
    from medrank.pipelines.procedures.abbreviations import (
        latin_words,
        procedure_abbreviations,
        reads_as_abbreviation,
    )
    from medrank.text import has_han

    settings = ServiceSettings(api_token=None, batch_queries=False, models_dir=Path("/nonexistent-no-runs"),
                               **({"state_dir": args.state} if args.state else {}))
    service = build_services(settings, ("normalize",), show_progress=False).normalize
    known = service.abbreviations
    # the names the data gives each abbreviation: those that write it in brackets, ...
    expected: dict[str, set[str]] = defaultdict(set)
    for concept in load_procedure_kb():
        for word in procedure_abbreviations([concept.name]):
            expected[word].add(concept.name)
    train = load_procedure_mentions("train")
    for q in train.queries:  # ... and the training names of a mention that is the abbreviation alone
        if not has_han(q.text) and len(latin_words(q.text)) == 1:
            expected[latin_words(q.text)[0]] |= set(train.qrels.relevant(q.id))
    rows, right = [], 0
    for word in sorted(known):
        top = service.normalize(word, k=1)["results"]
        name = top[0]["name"] if top else ""
        ok = name in expected.get(word, set())
        right += ok
        rows.append({"abbreviation": word, "first_name": name, "expected": sorted(expected.get(word, ())), "right": ok})
    valid = load_procedure_mentions("val")
    bare = [q for q in valid.queries if not has_han(q.text)]
    bare_rows = []
    for q in bare:
        read = reads_as_abbreviation(q.text, known)
        first = service.normalize(q.text, k=1)["results"][0]["name"] if read else None
        bare_rows.append({"mention": q.text, "read": read, "first_name": first,
                          "right": first in set(valid.qrels.relevant(q.id)) if first else False})
    # every patient turn of the MTS-Dialog validation conversations
    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-ValidationSet.csv"
    turns = sorted({t.text for d in read_dialogues([path], "valid") for t in d.turns if t.speaker == "patient"})
    read_turns = [t for t in turns if reads_as_abbreviation(t, known)]
    typed = {t: reads_as_abbreviation(t, known) for t in TYPED}
    out = {"abbreviations": len(known), "first_name_right": right, "rows": rows,
           "validation_mentions": len(valid.queries), "validation_without_han": bare_rows,
           "english_patient_turns": len(turns), "english_turns_read": read_turns, "typed_read": typed,
           "environment": common.environment(threads=args.threads, seed=None, data="../shared/data")}
    lines = ["### Procedure abbreviations written alone at /normalize (zero-shot normaliser as served)", "",
             f"{len(known)} abbreviations from the data (the code list's bracketed words, the training mentions written "
             f"without a Han character); the served zero-shot normaliser's first name is one the data gives the "
             f"abbreviation for **{right}** of them ({round(100 * right / max(1, len(known)), 1)} %). Before, every one "
             "was refused (404).", "",
             f"Visible validation mentions without a Han character: {len(bare_rows)} of {len(valid.queries)}: " +
             "; ".join(f"{r['mention']} → {'read, ' + str(r['first_name']) + (' (right)' if r['right'] else ' (wrong)') if r['read'] else 'refused'}"
                       for r in bare_rows) + ".", "",
             f"Still refused: {len(turns) - len(read_turns)} of {len(turns)} MTS-Dialog validation patient turns "
             f"(read: {read_turns or 'none'}); typed texts read: {[t for t, r in typed.items() if r] or 'none'} of "
             f"{list(TYPED)}.", "",
             "| abbreviation | first name (served) | right |", "|---|---|---|"]
    lines += [f"| {r['abbreviation']} | {r['first_name']} | {'yes' if r['right'] else 'no'} |" for r in rows]
    common.write("procedure_abbreviations", out, "\n".join(lines))
    print("\n".join(lines[:8]), flush=True)


if __name__ == "__main__":
    main()
