"""How many tokens the inquiry global re-ranker reads, and what a shorter question cap would save.

The candidate question texts of each knowledge base (the bank the re-ranker training sequences use) in
the base encoder's tokens, and the whole re-ranker input over the same 40 real mid-inquiry states as
``history_inquiry.py`` at question caps of 24 (the recipes') and 16 / 12 tokens. No model runs: only the
tokenizer, so these figures do not depend on the machine's load.

    python bench/history_inquiry_tokens.py [--states 40]
"""

from __future__ import annotations

import argparse
import os
import sys

import common
import history_inquiry as hi
import numpy as np

CAPS = (24, 16, 12)


def main() -> None:
    from transformers import AutoTokenizer

    from medrank.encoders import resolve_model_path
    from medrank.pipelines.history.builders import default_out_dir
    from medrank.pipelines.history.data import read_bank
    from medrank.pipelines.history.models.global_reranker import GlobalInputConfig, encode_sample

    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    env = common.environment(threads=1, seed=args.seed, data=str(os.environ.get("MEDRANK_DATA", "../shared/data")))
    env["command"] = "python bench/history_inquiry_tokens.py " + " ".join(sys.argv[1:])
    out = {}
    for lang, data in (("en", "inquiry-ddxplus"), ("zh", "inquiry-dxy")):
        tok = AutoTokenizer.from_pretrained(resolve_model_path(hi.BASES[lang]))
        bank = read_bank(default_out_dir(data) / "bank.jsonl")
        lengths = np.array([len(tok(q.text, add_special_tokens=False)["input_ids"]) for q in bank])
        engine, states = hi.mid_inquiry_states(lang, args.seed)
        inputs = hi.rerank_inputs(engine, states)
        picked = [inputs[i] for i in sorted(np.random.default_rng(args.seed).choice(
            len(inputs), min(args.states, len(inputs)), replace=False))]
        inputs_by_cap = {}
        for cap in CAPS:
            cfg = GlobalInputConfig(max_question_tokens=cap)
            encoded = [encode_sample(tok, d, q, cfg) for d, q in picked]
            inputs_by_cap[cap] = {"tokens_p50": float(np.median([len(e.input_ids) for e in encoded])),
                                  "dialogue_block_p50": float(np.median([e.segment_ids.count(0) for e in encoded]))}
        out[lang] = {"base": hi.BASES[lang], "questions": len(lengths),
                     "question_tokens": {"p50": float(np.median(lengths)), "p90": float(np.percentile(lengths, 90)),
                                         "max": int(lengths.max()),
                                         "over": {str(c): int((lengths > c).sum()) for c in CAPS}},
                     "states": len(picked), "input_by_question_cap": inputs_by_cap}
    payload = {"environment": env, "languages": out}
    md = [f"Command: `{env['command'].strip()}` (tokenizer only).", "",
          "| language | base | questions | question tokens p50 / p90 / max | longer than 24 / 16 / 12 | "
          "input tokens p50 at cap 24 / 16 / 12 (dialogue block) | states |", "|---|---|---|---|---|---|---|"]
    for lang, r in out.items():
        q, by = r["question_tokens"], r["input_by_question_cap"]
        md.append(f"| {lang} | {r['base']} | {r['questions']} | {q['p50']:.0f} / {q['p90']:.1f} / {q['max']} | "
                  + " / ".join(str(q["over"][str(c)]) for c in CAPS) + " | "
                  + " / ".join(f"{by[c]['tokens_p50']:.0f}" for c in CAPS)
                  + f" ({by[24]['dialogue_block_p50']:.0f}) | {r['states']} |")
    common.write("history_inquiry_tokens", payload, "\n".join(md))


if __name__ == "__main__":
    main()
