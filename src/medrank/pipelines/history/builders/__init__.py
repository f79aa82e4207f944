"""Dataset builders: raw dialogues / cases -> the JSONL re-ranking format of :mod:`..data`.

``build_mts_aci`` builds the question bank and the first-stage memory from the training files
and the samples of every split. By default ``valid_fraction`` (0.2) of the training dialogues
(seed 13, whole dialogues) are carved out and added to the official validation files, so the
validation split is large enough to compare re-rankers; no dialogue is on both sides. Given an
existing built folder (``bank_dir``) it builds new splits — e.g. an official test file in the
same raw format — against that bank, memory and first stage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medrank.pipelines.history.builders.mts_aci import (
    RawSample,
    carve,
    default_files,
    question_samples,
    questions_in,
    read_dialogues,
)
from medrank.pipelines.history.builders.question_bank import DEFAULT_THRESHOLD, build_bank, map_to_bank
from medrank.pipelines.history.data import Sample, read_bank, read_jsonl, write_jsonl
from medrank.pipelines.history.first_stage import DEFAULT_WEIGHTS, FirstStage, Memory, context_tail


def default_out_dir(name: str = "mts-aci") -> Path:
    from medrank.config import cache_dir

    return cache_dir() / "history" / name


def load_meta(out_dir: Path) -> dict[str, Any]:
    path = Path(out_dir) / "meta.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (build the dataset with `medrank history build`)")
    return json.loads(path.read_text(encoding="utf-8"))


def _bank_and_memory(kept: Sequence[Any], encoder: Any, threshold: float, show_progress: bool) -> tuple[list, Memory]:
    """The question bank of ``kept`` training dialogues and the first stage's memory of their questioning turns."""
    train_raw = question_samples(kept)
    bank, known = build_bank([q for s in train_raw for q in s.asked], encoder, threshold, show_progress=show_progress)
    memory = Memory([context_tail(s.context) for s in train_raw], [[known[q] for q in s.asked] for s in train_raw],
                    [s.dialogue_id for s in train_raw])
    return bank, memory


def _write_bank_and_memory(out_dir: Path, bank: Sequence[Any], memory: Memory) -> None:
    write_jsonl(out_dir / "bank.jsonl", [{"id": q.id, "text": q.text, "count": q.count, "members": q.members} for q in bank])
    write_jsonl(out_dir / "memory.jsonl", [{"tail": t, "asked": a, "dialogue_id": d}
                                           for t, a, d in zip(memory.tails, memory.asked, memory.dialogues, strict=True)])


def _bank_meta(bank: Sequence[Any], threshold: float, encoder_name: str, built_from: str) -> dict[str, Any]:
    return {"size": len(bank), "threshold": threshold, "encoder": encoder_name, "built_from": built_from,
            "questions": sum(q.count for q in bank), "distinct_phrasings": sum(len(q.members) for q in bank),
            "clustering": "leader clustering by decreasing frequency, MiniLM cosine >= threshold"}


def build_mts_aci(
    out_dir: Path,
    splits: Mapping[str, Sequence[Path]] | None = None,
    *,
    bank_dir: Path | None = None,
    bank_split: str = "train",
    valid_fraction: float = 0.2,
    seed: int = 13,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = 30,
    weights: dict[str, float] | None = None,
    encoder_name: str = "minilm",
    encoder: Any = None,
    data_root: str | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Build ``bank.jsonl``, ``memory.jsonl``, ``<split>.jsonl`` and ``meta.json`` under ``out_dir``,
    all at once: the folder is written aside and swapped in when complete (a failed build leaves the old one).

    ``splits`` maps split names to raw CSV files (default: the visible MTS-Dialog / ACI-Bench
    train and validation files); ``encoder`` overrides ``encoder_name`` (tests pass a tiny model).
    """
    from medrank.utils.io import atomic_dir, atomic_write_json

    if bank_dir is not None and Path(out_dir).resolve() == Path(bank_dir).resolve():
        # the folder is replaced as a whole: its own train/valid samples would be lost
        raise ValueError(f"--out {out_dir} is the --bank folder itself; write the new split elsewhere "
                         "(e.g. --out /tmp/history-test)")
    with atomic_dir(out_dir) as out_dir:  # every file below lands in the temporary folder, swapped in at the end
        from medrank.encoders import load_encoder
        t0 = time.perf_counter()
        splits = dict(splits or default_files(data_root))
        if not splits:
            raise ValueError("no raw files given")
        encoder = encoder if encoder is not None else load_encoder(encoder_name)
        dialogues = {name: read_dialogues(paths, name) for name, paths in splits.items()}
        if bank_dir is not None:
            bank_dir = Path(bank_dir)
            old = load_meta(bank_dir)
            bank = read_bank(bank_dir / "bank.jsonl")
            mem_rows = read_jsonl(bank_dir / "memory.jsonl")
            memory = Memory([r["tail"] for r in mem_rows], [r["asked"] for r in mem_rows], [r["dialogue_id"] for r in mem_rows])
            threshold = old["bank"]["threshold"]
            stage_cfg = old["first_stage"]
            carved_n = 0
        else:
            if bank_split not in dialogues:
                raise ValueError(f"the bank is built from split {bank_split!r}, which is not among {sorted(dialogues)}")
            kept, carved = carve(dialogues[bank_split], valid_fraction, seed)
            dialogues[bank_split] = kept
            dialogues["valid"] = dialogues.get("valid", []) + carved
            carved_n = len(carved)
            bank, memory = _bank_and_memory(kept, encoder, threshold, show_progress)
            stage_cfg = {"k": k, "weights": {**DEFAULT_WEIGHTS, **(weights or {})}, "tail_turns": 2,
                         "knn_k": 200, "knn_temperature": 0.1}
        known = {m: q.id for q in bank for m in q.members}
        _write_bank_and_memory(out_dir, bank, memory)
        stage = FirstStage(bank, encoder, stage_cfg["weights"], memory, tail_turns=stage_cfg["tail_turns"],
                           knn_k=stage_cfg["knn_k"], knn_temperature=stage_cfg["knn_temperature"])
        meta: dict[str, Any] = {
            "source": "mts-aci",
            "files": {n: [str(p) for p in ps] for n, ps in splits.items()},
            "carved_from_train": {"fraction": valid_fraction if bank_dir is None else 0.0, "seed": seed,
                                  "dialogues": carved_n},
            "bank": _bank_meta(bank, threshold, encoder_name, str(bank_dir) if bank_dir else bank_split),
            "first_stage": stage_cfg,
            "splits": {},
        }
        for name, dlg in dialogues.items():
            items: list[RawSample] = question_samples(dlg)
            samples, stats = _first_stage_samples(items, bank, stage, encoder, known, threshold, stage_cfg["k"],
                                                  show_progress)
            write_jsonl(out_dir / f"{name}.jsonl", [s.to_json() for s in samples])
            meta["splits"][name] = {"dialogues": len(dlg), **stats}
        meta["seconds"] = round(time.perf_counter() - t0, 1)
        atomic_write_json(out_dir / "meta.json", meta)
        return meta


def build_first_stage(
    out_dir: Path,
    encoder: Any,
    *,
    encoder_name: str = "minilm",
    data_root: str | None = None,
    files: Sequence[Path] | None = None,
    valid_fraction: float = 0.2,
    seed: int = 13,
    threshold: float = DEFAULT_THRESHOLD,
    k: int = 30,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Only ``bank.jsonl``, ``memory.jsonl`` and ``meta.json`` under ``out_dir`` (no split samples): the first stage
    :func:`build_mts_aci` builds from the same training dialogues (the same carve, ``seed``), readable with
    :func:`load_first_stage`, for a caller that ranks with it (the service) rather than trains on its samples.
    ``encoder`` is the ``encoder_name`` model the caller holds (its embedding cache is reused); ``files``: the raw
    training files (default: the visible MTS-Dialog / ACI-Bench ones under ``data_root``)."""
    from medrank.utils.io import atomic_dir, atomic_write_json

    with atomic_dir(out_dir) as out:
        t0 = time.perf_counter()
        train_files = list(files) if files is not None else default_files(data_root)["train"]
        kept, carved = carve(read_dialogues(train_files, "train"), valid_fraction, seed)
        bank, memory = _bank_and_memory(kept, encoder, threshold, show_progress)
        _write_bank_and_memory(out, bank, memory)
        meta: dict[str, Any] = {
            "source": "mts-aci", "files": {"train": [str(f) for f in train_files]},
            "carved_from_train": {"fraction": valid_fraction, "seed": seed, "dialogues": len(carved)},
            "bank": _bank_meta(bank, threshold, encoder_name, "train"),
            "first_stage": {"k": k, "weights": dict(DEFAULT_WEIGHTS), "tail_turns": 2, "knn_k": 200, "knn_temperature": 0.1},
            "memory": len(memory.tails), "splits": {}, "seconds": round(time.perf_counter() - t0, 1),
        }
        atomic_write_json(out / "meta.json", meta)
        return meta


def _first_stage_samples(
    items: Sequence[RawSample], bank, stage: FirstStage, encoder, known: dict[str, str], threshold: float, k: int,
    show_progress: bool,
) -> tuple[list[Sample], dict[str, Any]]:
    asked_flat = sorted({q for s in items for q in s.asked})
    mapped = dict(zip(asked_flat, map_to_bank(asked_flat, bank, stage.vectors, encoder, known, threshold), strict=True))
    excludes = []
    for s in items:
        earlier = {q for t in s.context if t.speaker == "doctor" for q in questions_in(t.text)}
        excludes.append({m for q in earlier if (m := mapped.get(q) or known.get(q))})
    retrieved = stage.retrieve([s.context for s in items], excludes, k=k, dialogue_ids=[s.dialogue_id for s in items],
                               show_progress=show_progress)
    samples: list[Sample] = []
    recalls, in_bank = [], []
    for s, (cands, scores) in zip(items, retrieved, strict=True):
        pos = list(dict.fromkeys(m for q in s.asked if (m := mapped[q]) is not None))
        in_bank.append(len(pos) / len(s.asked))
        cset = set(cands)
        recalls.append(sum(p in cset for p in pos) / len(s.asked))
        if any(p in cset for p in pos):
            samples.append(Sample(s.id, s.dialogue_id, s.source, list(s.context), list(s.asked), pos, cands, scores))
    stats = {
        "questioning_turns": len(items),
        "kept_samples": len(samples),
        "kept_dialogues": len({s.dialogue_id for s in samples}),
        "asked_in_bank": round(float(np.mean(in_bank)), 4) if in_bank else None,
        f"first_stage_recall@{k}": round(float(np.mean(recalls)), 4) if recalls else None,
        "mean_positives_in_candidates": round(float(np.mean([sum(x.labels()) for x in samples])), 3) if samples else None,
    }
    return samples, stats


def raw_split_samples(meta: dict[str, Any]) -> dict[str, list[RawSample]]:
    """Every questioning turn of each split of a built folder, re-read from its raw files (same carve)."""
    files = {n: [Path(p) for p in ps] for n, ps in meta["files"].items()}
    dialogues = {n: read_dialogues(ps, n) for n, ps in files.items()}
    carve_cfg = meta.get("carved_from_train", {})
    if carve_cfg.get("dialogues"):
        bank_split = meta["bank"]["built_from"]
        kept, carved = carve(dialogues[bank_split], carve_cfg["fraction"], carve_cfg["seed"])
        dialogues[bank_split] = kept
        dialogues["valid"] = dialogues.get("valid", []) + carved
    return {n: question_samples(d) for n, d in dialogues.items()}


def load_first_stage(built_dir: Path, encoder: Any = None) -> tuple[FirstStage, dict[str, str], dict[str, Any]]:
    """The first stage of a built folder (bank, memory, weights) with its ``phrasing -> bank id`` map and meta."""
    from medrank.encoders import load_encoder

    built_dir = Path(built_dir)
    meta = load_meta(built_dir)
    bank = read_bank(built_dir / "bank.jsonl")
    rows = read_jsonl(built_dir / "memory.jsonl")
    memory = Memory([r["tail"] for r in rows], [r["asked"] for r in rows], [r["dialogue_id"] for r in rows])
    cfg = meta["first_stage"]
    encoder = encoder if encoder is not None else load_encoder(meta["bank"]["encoder"])
    stage = FirstStage(bank, encoder, cfg["weights"], memory, tail_turns=cfg["tail_turns"], knn_k=cfg["knn_k"],
                       knn_temperature=cfg["knn_temperature"])
    return stage, {m: q.id for q in bank for m in q.members}, meta
