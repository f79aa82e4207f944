"""Which backend serves an encoder: the fastest ONNX Runtime form whose vectors agree with torch's.

Kept apart from :mod:`medrank.encoders.onnx` because it builds encoders by name through
:func:`medrank.encoders.registry.load_encoder`, which itself reaches the ONNX module.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder, TextKind, validate_texts
from medrank.encoders.bf16 import Bf16Encoder, native_bf16
from medrank.encoders.onnx import OnnxBackendError, OnnxEncoder, check_backend
from medrank.encoders.registry import load_encoder
from medrank.encoders.transformer import TransformerEncoder

log = logging.getLogger(__name__)

#: default agreement bars of :func:`choose_backend` (cosine to the torch vectors of the same texts):
#: (minimum over the texts, mean over the texts)
DEFAULT_AGREEMENT: dict[str, tuple[float, float]] = {
    "onnx": (0.999, 0.9999), "torch-bf16": (0.999, 0.9999), "onnx-int8": (0.95, 0.99)}


@dataclass(frozen=True)
class BackendChoice:
    """What :func:`choose_backend` chose, and why (``agreement``: backend → (min, mean) cosine to torch)."""

    encoder: Encoder
    backend: str
    reason: str
    agreement: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __iter__(self):  # ``encoder, backend, reason = choose_backend(...)``
        return iter((self.encoder, self.backend, self.reason))


def agreement(reference: np.ndarray, candidate: np.ndarray) -> tuple[float, float]:
    """(min, mean) cosine between matching rows of two sets of unit vectors."""
    cos = np.sum(reference.astype(np.float64) * candidate.astype(np.float64), axis=1)
    return float(cos.min()), float(cos.mean())


def choose_backend(
    name_or_path: str | os.PathLike[str] | TransformerEncoder,
    sentences: Sequence[str],
    prefer: Sequence[str] = ("onnx-int8", "onnx", "torch"),
    *,
    kind: TextKind | None = None,
    min_cosine: float | dict[str, float] | None = None,
    min_mean_cosine: float | dict[str, float] | None = None,
    threads: int | None = None,
    cache_root: str | os.PathLike[str] | None = None,
    **encoder_kwargs: Any,
) -> BackendChoice:
    """The first backend of ``prefer`` (fastest first) whose vectors agree with torch's on ``sentences``.

    Every candidate encodes ``sentences`` (as ``kind``); it passes when the minimum and the mean
    cosine to the torch vectors reach ``min_cosine`` / ``min_mean_cosine`` (one number for every
    backend, or one per backend; defaults :data:`DEFAULT_AGREEMENT`). A backend that fails to build
    or to agree is skipped with its reason; torch is the fallback even when ``prefer`` omits it.
    The reason is logged (never the sentences). ``name_or_path`` is anything :func:`load_encoder`
    takes, or a built (possibly trained) :class:`TransformerEncoder`.
    """
    texts = validate_texts(sentences, "sentences")
    if not texts:
        raise ValueError("choose_backend needs at least one sentence to compare the backends on")
    for b in prefer:
        check_backend(b)
    if isinstance(name_or_path, TransformerEncoder):
        torch_encoder = name_or_path
    else:
        built = load_encoder(name_or_path, **encoder_kwargs)
        if not isinstance(built, TransformerEncoder):
            raise OnnxBackendError(f"{name_or_path!r} is not a transformer encoder: only torch can serve it")
        torch_encoder = built

    def bar(setting: float | dict[str, float] | None, backend: str, which: int) -> float:
        if isinstance(setting, dict):
            return float(setting.get(backend, DEFAULT_AGREEMENT[backend][which]))
        return DEFAULT_AGREEMENT[backend][which] if setting is None else float(setting)

    reference: np.ndarray | None = None
    measured: dict[str, tuple[float, float]] = {}
    skipped: list[str] = []
    for backend in prefer:
        if backend == "torch":
            break
        if backend == "torch-bf16" and not (native_bf16() and torch_encoder.device.type == "cpu"):
            # emulated bf16 is slower than float32: never a reason to give up precision
            skipped.append("torch-bf16 unavailable (this CPU has no native bfloat16 matrix products)")
            continue
        try:
            candidate: Encoder = (
                Bf16Encoder(torch_encoder) if backend == "torch-bf16"
                else OnnxEncoder(torch_encoder, quantized=backend == "onnx-int8", threads=threads, cache_root=cache_root))
            if reference is None:
                reference = torch_encoder.encode(texts, kind=kind, show_progress=False)
            low, mean = agreement(reference, candidate.encode(texts, kind=kind, show_progress=False))
        except Exception as exc:  # noqa: BLE001 - any failure to export or run means: not this backend
            skipped.append(f"{backend} unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
            continue
        measured[backend] = (low, mean)
        need_min, need_mean = bar(min_cosine, backend, 0), bar(min_mean_cosine, backend, 1)
        if low >= need_min and mean >= need_mean:
            reason = (f"{backend}: cosine to torch min {low:.5f} >= {need_min} and mean {mean:.5f} >= {need_mean} "
                      f"over {len(texts)} sentences" + (f"; skipped: {'; '.join(skipped)}" if skipped else ""))
            log.info("encoder %s served by %s", torch_encoder.name, reason)
            return BackendChoice(candidate, backend, reason, measured)
        skipped.append(f"{backend} disagrees with torch (cosine min {low:.5f} < {need_min} or mean {mean:.5f} < {need_mean})")
    reason = "torch" + (f": {'; '.join(skipped)}" if skipped else ": preferred")
    log.info("encoder %s served by %s", torch_encoder.name, reason)
    return BackendChoice(torch_encoder, "torch", reason, measured)
