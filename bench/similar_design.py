"""Design choices of the CPU recipe, measured with a quick, reduced STMT recipe on CHIP-STS.

1. Chinese input unit: characters vs jieba words — vocabulary size of the
   training side, validation tokens/types unseen in training, mean question length.
2. For each variant, the same reduced STMT recipe — N = 2 layers (instead of
   6), the first 4,000 training pairs, 3 epochs of Adam (lr 1e-3, batch 64),
   scored on the first 1,000 validation pairs:

   * characters vs jieba words (pre-norm, head with |v_q - v_c| and v_q * v_c);
   * the paper's head on ``[v_q, v_c]`` vs the head with ``|v_q - v_c|, v_q * v_c`` added;
   * post-norm (the paper's "residual and layer norm") vs pre-norm.

Word2vec (CBOW, d = 100) is trained per tokenisation on the same
training-side questions.

    nice -n 10 python bench/similar_design.py --threads 1
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np
import torch

from medrank.config import data_root, seed_everything, set_threads
from medrank.data.questions import unique_questions
from medrank.pipelines.similar.config import resolve_config
from medrank.pipelines.similar.evaluation import PAIR_METRICS, metric_subset, pair_metrics
from medrank.pipelines.similar.experiment import build_matcher, prepare_data
from medrank.pipelines.similar.losses import PairCrossEntropyLoss
from medrank.pipelines.similar.text import QuestionTokenizer, TokenizerSpec
from medrank.pipelines.similar.training import EpochBatches

ARCH = {"layers": 2, "head_features": "concat-diff-prod", "norm_first": True}
VARIANTS = {
    "characters, pre-norm, head [v_q, v_c, |v_q - v_c|, v_q * v_c]": ("char", ARCH),
    "jieba words, pre-norm, head [v_q, v_c, |v_q - v_c|, v_q * v_c]": ("jieba", ARCH),
    "characters, pre-norm, paper head [v_q, v_c]": ("char", {**ARCH, "head_features": "concat"}),
    "characters, post-norm, head [v_q, v_c, |v_q - v_c|, v_q * v_c]": ("char", {**ARCH, "norm_first": False}),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train-pairs", type=int, default=4000)
    ap.add_argument("--valid-pairs", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    set_threads(args.threads)
    results, rows, units = {}, {}, {}
    for name, (mode, arch) in VARIANTS.items():
        cfg = resolve_config({"dataset": "chip-sts", "model": "stmt", "tokenizer": {"zh_mode": mode}, "arch": arch})
        data = prepare_data(cfg)
        tok = QuestionTokenizer(TokenizerSpec("zh", mode))
        train_tokens = tok.batch(unique_questions(data["train"]))
        valid_tokens = tok.batch(unique_questions(data["valid"]))
        seen = {t for toks in train_tokens for t in toks}
        vtypes = {t for toks in valid_tokens for t in toks}
        vflat = [t for toks in valid_tokens for t in toks]
        seed_everything(13)
        matcher, info = build_matcher(cfg, data)
        train, valid = data["train"][: args.train_pairs], data["valid"][: args.valid_pairs]
        feats = matcher.features([(p.text1, p.text2) for p in train])
        vfeats = matcher.features([(p.text1, p.text2) for p in valid])
        opt = torch.optim.Adam(matcher.module.parameters(), lr=1e-3)
        loss_fn = PairCrossEntropyLoss()
        t0 = time.perf_counter()
        for epoch in range(args.epochs):
            matcher.module.train()
            for batch in EpochBatches(matcher, feats, [p.label for p in train], 64, 13, epoch):
                loss = loss_fn(matcher.logits(batch), batch["labels"])
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(matcher.module.parameters(), 5.0)
                opt.step()
        seconds = time.perf_counter() - t0
        metrics = metric_subset(pair_metrics(valid, matcher.score_features(vfeats)))
        units[mode] = {
            "train_vocabulary": len(seen), "valid_types_unseen": round(1 - len(vtypes & seen) / len(vtypes), 4),
            "valid_tokens_unseen": round(sum(t not in seen for t in vflat) / len(vflat), 4),
            "mean_tokens_per_question": round(float(np.mean([len(t) for t in train_tokens])), 2),
            "word2vec_vocabulary": info["vocabulary"],
        }
        results[name] = {"zh_mode": mode, "arch": arch, "train_seconds": round(seconds, 1), "valid": metrics}
        rows[f"{name} ({seconds:.0f} s)"] = metrics
        print(name, results[name], flush=True)
    facts = "\n".join(
        f"| {m} | {r['train_vocabulary']:,} | {100 * r['valid_types_unseen']:.1f} | {100 * r['valid_tokens_unseen']:.1f} | "
        f"{r['mean_tokens_per_question']} |" for m, r in units.items())
    md = (
        "CHIP-STS split (seed 13), training side vs validation side:\n\n"
        "| unit | train-side types | valid types unseen % | valid tokens unseen % | tokens / question |\n"
        "| --- | ---: | ---: | ---: | ---: |\n" + facts + "\n\n"
        f"Reduced STMT (N = 2, first {args.train_pairs:,} training pairs, {args.epochs} epochs, first {args.valid_pairs:,} "
        "CHIP-STS validation pairs; training seconds in brackets):\n\n" + common_table(rows)
    )
    common.write("similar_design", {"environment": common.environment(args.threads, 13, str(data_root())),
                                    "settings": vars(args), "units": units, "results": results}, md)


def common_table(rows: dict) -> str:
    from medrank.metrics import to_markdown_table

    return to_markdown_table(rows, list(PAIR_METRICS), name_header="variant")


if __name__ == "__main__":
    main()
