"""NCBI-disease devel with BioSyn's dictionary augmentation: MEDIC plus the training mentions as synonyms.

BioSyn evaluates against dictionaries that include the training mentions (its README: the dev dictionary
includes the train mentions, the test dictionary the train and dev mentions). Here MEDIC's concepts get the
disease names annotated in the NCBI-disease training documents as synonyms
(:func:`medrank.data.ncbi.augment_vocabulary` of :func:`~medrank.data.ncbi.mention_vocabulary`):

* **devel** (reported): MEDIC + the names of every training document;
* **tune** (the fixed-seed 10 % carve-out of the training documents, seed 13, which picks the sparse weight):
  MEDIC + the names of the other 90 % only, so that tuning sees what devel sees.

Rows: dense, sparse and fused Acc@1 / Acc@5 for zero-shot MiniLM and the top-block run
(``runs/concept/ncbi-disease-top1``), abbreviations expanded from the mention's abstract as trained, beside the
same encoders against MEDIC alone.

    python bench/concept_dictionary.py
"""

from __future__ import annotations

import os
from typing import Any

import common
from concept_bc5cdr import GRID, encoders, score


def pct(x: float) -> str:
    return f"{100 * x:.2f}"


def main() -> None:
    import torch

    from medrank.config import dataset_dir
    from medrank.data import parse_pubtator
    from medrank.data.ncbi import SPLIT_FILES, augment_vocabulary, mention_vocabulary
    from medrank.pipelines.symptom.biosyn import load_ncbi

    torch.set_num_threads(2)
    data = load_ncbi(None, True, 0.1, 13)
    docs = parse_pubtator(dataset_dir("ncbi-disease") / SPLIT_FILES["train"])
    fit_pmids = {str(q.meta["pmid"]) for q in data.train.queries}
    medic = data.vocabulary
    vocabularies = {
        "MEDIC": (medic, medic),
        "MEDIC + training mentions": (augment_vocabulary(medic, mention_vocabulary([d for d in docs if d.pmid in fit_pmids])),
                                      augment_vocabulary(medic, mention_vocabulary(docs))),
    }
    rows: list[dict[str, Any]] = []
    for enc_name, vectors in encoders().items():
        for vocab_name, (tune_vocab, devel_vocab) in vocabularies.items():
            tuned = score(vectors, tune_vocab, data.tune, GRID)
            best = max(GRID, key=lambda w: tuned[w]["acc@1"])
            devel = score(vectors, devel_vocab, data.devel, sorted({0.0, best, float("inf")}))
            rows.append({"encoder": enc_name, "dictionary": vocab_name, "dense": devel[0.0], "sparse": devel[float("inf")],
                         "fused": devel[best], "weight": best, "tune_sweep": {f"w={w:g}": m for w, m in tuned.items()},
                         "devel_entries": sum(len(c.names) for c in devel_vocab)})
            print(enc_name, vocab_name, {k: round(100 * rows[-1][k]["acc@1"], 2) for k in ("dense", "sparse", "fused")}, flush=True)
    out = {"environment": {**common.environment(2, 13, "../shared/data"), "load_average_end": [round(x, 2) for x in os.getloadavg()]},
           "devel_mentions": len(data.devel.queries), "tune_mentions": len(data.tune.queries), "rows": rows}
    md = ["# NCBI-disease devel → MEDIC with BioSyn's dictionary augmentation (training mentions as synonyms), CPU", "",
          f"{len(data.devel.queries)} devel mentions, abbreviations expanded; the sparse weight tuned on the fixed-seed 10 % carve-out "
          "of the training documents (seed 13) against MEDIC + the names of the other training documents; devel against MEDIC + "
          "the names of every training document (BioSyn's dev dictionary holds the train mentions the same way). "
          "`python bench/concept_dictionary.py`.", "",
          "| encoder | dictionary (devel entries) | dense Acc@1 / @5 | sparse Acc@1 / @5 | fused Acc@1 / @5 | w |",
          "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['encoder']} | {r['dictionary']} ({r['devel_entries']:,}) | {pct(r['dense']['acc@1'])} / {pct(r['dense']['acc@5'])} | "
                  f"{pct(r['sparse']['acc@1'])} / {pct(r['sparse']['acc@5'])} | {pct(r['fused']['acc@1'])} / {pct(r['fused']['acc@5'])} | "
                  f"{r['weight']:g} |")
    common.write("concept_dictionary", out, "\n".join(md))


if __name__ == "__main__":
    main()
