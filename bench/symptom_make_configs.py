"""Write ``configs/symptom/cpu/chip-cdn-*.yaml``: the CPU recipe of every model in the Bi-HardNCE comparison.

One shared recipe (``BASE``) and one line per model (loss, miner, E-FN, negatives), so the
16 configs cannot drift apart. The generated files are committed; rerun after changing BASE:

    python bench/symptom_make_configs.py
"""

from __future__ import annotations

from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "configs" / "symptom" / "cpu"
BASE = dict(
    task="symptom", dataset="chip-cdn", encoder="e5-small", max_length=32,
    train_layers=1, cache=True, batch_size=32, lr=2.0e-4, scheduler="linear", warmup_ratio=0.1,
    epochs=3, max_steps_per_epoch=50, temperature=0.05, pool=100,
    n_hard_queries=3, n_hard_terms=3,
    alpha_start=0.8, alpha_step=0.05, alpha_max=0.95,
    mining_terms="gold", eval_candidates=["gold", "vocab"], select_metric="ndcg@5",
    # 1 thread: under the shared load (5-10 runnable jobs on 2 cores) a step of the single trainable
    # block ran 3x faster with 1 torch thread than with 2 (OpenMP threads waiting for each other)
    seed=13, threads=1, keep_checkpoints=1, save_model=True,
)
MODELS = [
    # name, overrides (order = run priority)
    ("bi-hardnce", dict(loss="bi-hardnce", miner="hd-sampling", efn=True)),
    ("nce-forward", dict(loss="nce-forward", miner="none", efn=False)),
    ("bi-nce", dict(loss="bi-nce", miner="none", efn=False)),
    ("nce-backward", dict(loss="nce-backward", miner="none", efn=False)),
    ("sentbert", dict(loss="sentbert", miner="random", efn=False, n_hard_terms=1)),
    ("triplet", dict(loss="triplet", miner="random", efn=False, n_hard_terms=1, margin=0.2)),
    ("contrastive", dict(loss="contrastive", miner="random", efn=False, n_hard_terms=1, margin=0.5)),
    ("cross-encoder", dict(loss="cross-encoder", miner="random", efn=False, n_hard_terms=1,
                           rerank_depth=10, eval_queries=200, save_model=False)),
    ("bi-nce-topk", dict(loss="bi-nce", miner="topk", efn=False)),
    ("bi-nce-topk-efn", dict(loss="bi-nce", miner="topk", efn=True)),
    ("bi-nce-htt", dict(loss="bi-nce", miner="higher-than-true", efn=False)),
    ("bi-nce-htt-efn", dict(loss="bi-nce", miner="higher-than-true", efn=True)),
    ("bi-hardnce-no-efn", dict(loss="bi-hardnce", miner="hd-sampling", efn=False)),
    ("sentbert-hn", dict(loss="sentbert", miner="hd-sampling", efn=True, n_hard_terms=1)),
    ("triplet-hn", dict(loss="triplet", miner="hd-sampling", efn=True, n_hard_terms=1, margin=0.2)),
    ("contrastive-hn", dict(loss="contrastive", miner="hd-sampling", efn=True, n_hard_terms=1, margin=0.5)),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, over in MODELS:
        cfg = {"name": name, **BASE, **over, "output_dir": f"runs/symptom/cpu/chip-cdn-{name}"}
        text = (
            f"# CPU recipe (2 shared cores): {name} on CHIP-CDN; written by bench/symptom_make_configs.py.\n"
            f"# run: medrank train configs/symptom/cpu/chip-cdn-{name}.yaml  (bench/symptom_table.py runs them all)\n"
        )
        (OUT / f"chip-cdn-{name}.yaml").write_text(text + yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    print(f"wrote {len(MODELS)} configs to {OUT}")


if __name__ == "__main__":
    import argparse

    # no options: the parser only answers --help (and refuses typos) instead of rewriting the configs
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
