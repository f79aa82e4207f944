"""The ``"torch-bf16"`` backend: a :class:`TransformerEncoder` run under ``torch.autocast`` in bfloat16.

On CPUs with native bfloat16 matrix units (Intel AMX on Sapphire Rapids and later, or AVX512-BF16)
oneDNN runs the bf16 matrix products several times faster than float32 ones, which pays off on the
long batched encodes that build indexes (tens of thousands of names at batch 128). Autocast keeps
layer norms, softmax and the residual additions in float32 and only casts the inputs of the matrix
products, so the vectors stay close to float32 torch's (far closer than the int8 ONNX export's).
On CPUs without native bf16 the products are emulated and slower than float32:
:func:`medrank.utils.cpu.native_bf16` tells the two apart, and :func:`medrank.encoders.choose_backend` skips this
backend there.

The weights are the wrapped encoder's own (no copy): training the torch encoder changes what this
one computes, and :meth:`Bf16Encoder.fingerprint` follows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from medrank.encoders.base import Encoder, TextKind
from medrank.encoders.transformer import TransformerEncoder
from medrank.utils.cpu import native_bf16

__all__ = ["BACKEND", "Bf16Encoder", "native_bf16"]

BACKEND = "torch-bf16"


class Bf16Encoder(Encoder):
    """``encoder`` with its forward pass under ``torch.autocast(dtype=torch.bfloat16)``.

    Tokenisation, prompts, pooling, truncation and normalisation are the wrapped encoder's; pooled
    vectors are returned as float32 unit vectors like every encoder's.
    """

    backend = BACKEND

    def __init__(self, encoder: TransformerEncoder) -> None:
        if not isinstance(encoder, TransformerEncoder):
            raise TypeError(f"the torch-bf16 backend serves a TransformerEncoder, got {type(encoder).__name__}")
        self.encoder = encoder
        self.name = encoder.name
        self.query_prompt, self.passage_prompt = encoder.query_prompt, encoder.passage_prompt

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        with torch.autocast(device_type=self.encoder.device.type, dtype=torch.bfloat16):
            out = self.encoder._encode(texts, kind, batch_size, show_progress)
        if self.encoder.normalize:  # the norm taken in bf16 is off by ~1e-3: renormalise in float32
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def spec(self) -> dict[str, Any]:
        return {**self.encoder.spec(), "backend": self.backend}

    def fingerprint(self) -> dict[str, Any]:
        # bf16 vectors differ from float32 ones in the third decimal: cached vectors of either are not the other's
        return {**self.encoder.fingerprint(), "backend": self.backend}
