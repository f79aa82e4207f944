"""Re-ranking samples from simulated inquiries, in the history pipeline's built format.

Every turn of a simulated episode is one sample: the dialogue so far (the opening statement, then
doctor question / patient answer turns), the first stage's top-``k`` open questions as candidates
(bank id = finding name, text = its question), and as positives the candidates the patient actually
has (DDXPlus: present binary evidences and categorical / multi-choice ones with a non-default value)
or that the doctor asked (DXY: the implicit symptoms of the record). Training samples come from the
training carve-out (tables fitted on it), validation samples from the validation carve-out, so
``medrank train`` (tasks ``history-global`` / ``history-cross-encoder`` / ``history-bi-encoder``) and
the history evaluators work on them unchanged.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from medrank.pipelines.history.data import Sample, Turn, write_jsonl
from medrank.pipelines.history.inquiry.build import BUDGETS, fit_engine, load_corpus
from medrank.pipelines.history.inquiry.engine import InquiryEngine
from medrank.pipelines.history.inquiry.kb import Patient
from medrank.pipelines.history.inquiry.simulate import (
    answer,
    answer_text,
    opening,
    opening_text,
    positive_evidences,
)


def wanted(engine: InquiryEngine, patient: Patient) -> set[str]:
    """The findings a good next question is about."""
    if engine.language == "zh":
        return set(patient.record) - set(patient.initial)
    return positive_evidences(engine, patient)


def episode_samples(engine: InquiryEngine, patient: Patient, budget: int, k: int) -> list[Sample]:
    findings = opening(engine, patient)
    dialogue = [opening_text(engine, patient, findings)]
    context = [Turn("patient", dialogue[0])]
    targets = wanted(engine, patient)
    out = []
    for t in range(budget):
        observed = engine.observed(findings)
        ranked = engine.first_stage(observed, k, engine.log_posterior_observed(observed, findings, dialogue))
        if not ranked:
            break
        names = [n for n, _ in ranked]
        positives = [n for n in names if n in targets]
        if positives:
            out.append(Sample(f"{patient.id}:t{t}", patient.id, f"inquiry-{engine.language}", list(context),
                              [engine.labels[n] for n in positives], positives, names,
                              [round(s, 6) for _, s in ranked]))
        name = names[0]  # the episode goes on with the first stage's choice
        reply = answer(engine, patient, name)
        findings.extend(reply)
        text = answer_text(engine, name, [f.value for f in reply])
        dialogue += [engine.labels[name], text]
        context += [Turn("doctor", engine.labels[name]), Turn("patient", text)]
    return out


def build_sequences(language: str, out_dir: Path, data_root: str | Path | None = None, k: int = 30) -> dict[str, Any]:
    from medrank.utils.io import atomic_dir, atomic_write_json

    t0 = time.perf_counter()
    corpus = load_corpus(language, data_root)
    engine = fit_engine(corpus, corpus.train)
    if engine.text_prior is not None:
        engine.text_weight = 1.0
    budget = BUDGETS[language]
    with atomic_dir(out_dir) as folder:
        write_jsonl(folder / "bank.jsonl", [{"id": n, "text": engine.labels[n], "count": 1, "members": []}
                                            for n in engine.model.variables])
        meta: dict[str, Any] = {"source": f"inquiry-{language}", "first_stage": {"k": k, "kind": "expected information gain"},
                                "budget": budget, "splits": {}}
        for split, patients in (("train", corpus.train), ("valid", corpus.valid)):
            samples = [s for p in patients for s in episode_samples(engine, p, budget, k)]
            write_jsonl(folder / f"{split}.jsonl", [s.to_json() for s in samples])
            meta["splits"][split] = {"patients": len(patients), "samples": len(samples)}
        meta["seconds"] = round(time.perf_counter() - t0, 1)
        atomic_write_json(folder / "meta.json", meta)
    return meta


def main(argv: list[str] | None = None) -> None:
    """``python -m medrank.pipelines.history.inquiry.sequences en|zh [OUT]`` (default OUT: the cache's
    ``history/inquiry-ddxplus`` / ``history/inquiry-dxy``, where the training configs look)."""
    import json
    import sys

    from medrank.pipelines.history.builders import default_out_dir

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("en", "zh"):
        raise SystemExit("usage: python -m medrank.pipelines.history.inquiry.sequences en|zh [OUT]")
    out = Path(args[1]) if len(args) > 1 else default_out_dir("inquiry-ddxplus" if args[0] == "en" else "inquiry-dxy")
    print(json.dumps(build_sequences(args[0], out)))


if __name__ == "__main__":
    main()
