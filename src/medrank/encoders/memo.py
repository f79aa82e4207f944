"""Remember the vectors of the last queries an encoder read, in memory.

A complaint's pieces are encoded to search the vocabulary and, a moment later, to compare them with other texts
under the same encoder (the symptom pipeline's small-talk gate): the second pass should cost a look-up, not a
second forward pass. :class:`QueryMemo` wraps any encoder and keeps the vectors of the last ``size`` texts it
encoded, each keyed by the text as the model reads it (prompt included): a symmetric encoder (MiniLM) answers a
query with the vector it gave the same text as a passage, an asymmetric one (e5: "query: " / "passage: ") keeps the
two apart. Thread-safe.

An int8 ONNX encoder quantises activations per batch, so a text's vector depends a little on the batch it was
encoded in; the memo returns the vector of the first batch that held the text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from medrank.encoders.base import Encoder, TextKind, WrappedEncoder

DEFAULT_SIZE = 4096


class QueryMemo(WrappedEncoder):
    """Wraps ``encoder``; the vectors of the last ``size`` distinct texts (of any kind, keyed by prompt and text)
    are answered from memory."""

    def __init__(self, encoder: Encoder, size: int = DEFAULT_SIZE) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        super().__init__(encoder)
        self.size = size
        self._memo: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # the wrapped encoder's own settings (prompts, max length, session)
        if name == "encoder":  # not set yet (during unpickling or a failed __init__)
            raise AttributeError(name)
        return getattr(self.encoder, name)

    def clear(self) -> None:
        """Forget every remembered vector (a benchmark timing encoders from cold)."""
        with self._lock:
            self._memo.clear()

    def _prompt_of(self, kind: TextKind | None) -> str:
        prompts = {"query": getattr(self.encoder, "query_prompt", ""), "passage": getattr(self.encoder, "passage_prompt", "")}
        return prompts.get(kind or "", "")

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        # a vector is keyed by the text as the model reads it (its prompt included): a symmetric encoder's query and
        # passage of one text are one vector (MiniLM), an e5 query and passage are two
        prompt = self._prompt_of(kind)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if (prompt, t) not in self._memo))
        fresh = (self.encoder.encode(missing, kind, batch_size=batch_size, show_progress=show_progress)
                 if missing else np.zeros((0, self.dim), np.float32))
        with self._lock:
            found = dict(zip(missing, fresh, strict=True))
            out = []
            for t in texts:  # the texts of this call, freshest last
                v = found.get(t)
                if v is None:
                    v = self._memo.get((prompt, t))
                if v is not None:
                    self._memo[(prompt, t)] = v
                    self._memo.move_to_end((prompt, t))
                out.append(v)
            while len(self._memo) > self.size:
                self._memo.popitem(last=False)
        if any(v is None for v in out):  # evicted by another thread between the two looks: encode this call again
            return self.encoder.encode(texts, kind, batch_size=batch_size, show_progress=show_progress)
        return np.stack(out).astype(np.float32, copy=False)


def remembering_queries(encoder: Encoder, size: int = DEFAULT_SIZE) -> Encoder:
    """``encoder`` wrapped in a :class:`QueryMemo` (itself when it already is one)."""
    return encoder if isinstance(encoder, QueryMemo) else QueryMemo(encoder, size)
