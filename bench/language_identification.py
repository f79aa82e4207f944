"""Which language a short text is in: the character n-gram identifier against the word reader (``medrank.text``).

medrank serves English and Chinese and refuses other languages (a nearest neighbour in the wrong language is a
confident wrong answer). A Latin-script text was read by py3langid's character n-grams, which misread short English
("seizures" as German, "eczema" as Polish, "swollen hands" as Dutch: the service refused them) and short foreign
words ("vertiges", "mareos" read as English). The word reader scores each candidate language by the frequencies of
the text's words in it (wordfreq's lists). Both weigh English :data:`medrank.text.ENGLISH_PRIOR` times (10, chosen
before this bench on ``tests/test_text.py``'s examples); the other priors are shown for how much they matter, not
chosen here.

Texts (each labelled with its language):

* English symptom wordings: every HPO name and synonym of one to three words (the words a person or a clinician may
  type alone);
* English complaints: the 120 of ``bench/data/everyday_complaints_en.jsonl`` and ``…_en_2.jsonl``;
* English openings: the first patient turn of each MTS-Dialog training conversation;
* other languages: ``bench/data/complaints_other_languages.jsonl``, 60 short symptom complaints in French, German,
  Spanish, Italian, Portuguese and Dutch (ten each, one to seven words; written by a developer of this project before
  the word reader was run on them, not by patients).

Reported: the share of each English set read as another language (refused), the share of the other-language
complaints read as English (searched as English), the mean time per text (word lists loaded), and the memory the
word lists take once loaded.

    python bench/language_identification.py
"""

from __future__ import annotations

import csv
import json
import re
import resource
import time
from pathlib import Path
from typing import Any

import common

import medrank.text as text_module
from medrank.config import dataset_dir
from medrank.text import identify

ROOT = Path(__file__).resolve().parent
PRIORS = (3.0, 10.0, 30.0, 100.0)


def english_sets() -> dict[str, list[str]]:
    from medrank.pipelines.symptom.inference import zero_shot_concepts

    wordings = list(dict.fromkeys(w for c in zero_shot_concepts("hpo") for w in (c.name, *c.synonyms)
                                  if 1 <= len(w.split()) <= 3))
    complaints = [json.loads(line)["text"] for name in ("everyday_complaints_en.jsonl", "everyday_complaints_en_2.jsonl")
                  for line in (ROOT / "data" / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    csv.field_size_limit(10**8)
    openings = []
    path = dataset_dir("mts-dialog") / "Main-Dataset" / "MTS-Dialog-TrainingSet.csv"
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            turn = next((m.group(1).strip() for line in row["dialogue"].splitlines()
                         if (m := re.match(r"\s*patient\s*:\s*(.+)", line, re.I))), None)
            if turn:
                openings.append(turn)
    return {"English symptom wordings (HPO, 1-3 words)": wordings, "English complaints (everyday sets)": complaints,
            "English openings (MTS-Dialog patients)": openings}


def read(texts: list[str], words: bool) -> tuple[list[Any], float]:
    t0 = time.perf_counter()
    found = [identify(t, words=words) for t in texts]
    return found, 1000 * (time.perf_counter() - t0) / max(1, len(texts))


def main() -> None:
    english = english_sets()
    other = [json.loads(line) for line in (ROOT / "data" / "complaints_other_languages.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    identify("swollen hands")  # loads the word lists
    load = {"seconds": round(time.perf_counter() - t0, 2),
            "max_rss_mb_added": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before)}
    rows: dict[str, Any] = {}
    examples: dict[str, Any] = {}
    default_prior = text_module.ENGLISH_PRIOR
    for prior in PRIORS:
        text_module.ENGLISH_PRIOR = prior
        for words in (False, True):
            name = (f"{'word reader' if words else 'character n-grams (py3langid)'}, English × {prior:g}"
                    + (" (as served)" if words and prior == default_prior else "")
                    + (" (as served before)" if not words and prior == default_prior else ""))
            row: dict[str, Any] = {}
            ms = []
            for label, texts in english.items():
                found, per = read(texts, words)
                refused = [t for t, f in zip(texts, found, strict=True) if f.language != "en"]
                row[f"{label}: refused %"] = round(100 * len(refused) / len(texts), 2)
                ms.append(per)
                if prior == default_prior:
                    examples.setdefault(name, {})[label] = refused[:15]
            found, per = read([o["text"] for o in other], words)
            taken = [o["text"] for o, f in zip(other, found, strict=True) if f.language == "en"]
            row["other languages: read as English %"] = round(100 * len(taken) / len(other), 2)
            row["ms per text"] = round(sum(ms) / len(ms), 3)
            if prior == default_prior:
                examples.setdefault(name, {})["other languages read as English"] = taken
            rows[name] = row
            print(name, row, flush=True)
    text_module.ENGLISH_PRIOR = default_prior
    sizes = {label: len(texts) for label, texts in english.items()} | {"other languages": len(other)}
    out = {"texts": sizes, "rows": rows, "examples": examples, "word_lists": load,
           "environment": common.environment(threads=1, seed=None, data="../shared/data")}
    cols = list(next(iter(rows.values())))
    lines = ["### Language of short texts: character n-grams against the word reader", "",
             "Texts: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()) + ". Word lists loaded in "
             f"{load['seconds']} s, {load['max_rss_mb_added']} MB of memory.", "",
             "| reader | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    lines += [f"| {name} | " + " | ".join(str(r[c]) for c in cols) + " |" for name, r in rows.items()]
    lines += ["", "Examples at the served prior (first 15 refused per English set; every other-language complaint read "
              "as English):", ""]
    for name, ex in examples.items():
        lines += [f"* {name}: " + "; ".join(f"{k}: {', '.join(repr(t) for t in v) or 'none'}" for k, v in ex.items())]
    common.write("language_identification", out, "\n".join(lines))


if __name__ == "__main__":
    main()
