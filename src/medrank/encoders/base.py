"""The encoder interface every dense component of medrank uses.

An encoder maps texts to L2-normalised float32 vectors. ``kind`` says whether a
text is a query or a passage so asymmetric models (e5's ``"query: "`` /
``"passage: "`` prompts) get the right prompt; symmetric models ignore it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

TextKind = Literal["query", "passage"]


def validate_texts(texts: Sequence[str] | str, what: str = "texts") -> list[str]:
    """Return ``texts`` as a list of strings, raising a clear error on bad input."""
    if isinstance(texts, str):
        texts = [texts]
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{i}] must be a string, got {type(t).__name__}")
    return out


def batch_order(token_ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``token_ids`` to run, longest first, and for every row the one whose vector it takes.

    Texts that tokenise alike (another case or spacing that the tokenizer drops) are run once, so they get
    one vector: an int8 export's activation scale is set per batch, and equal token sequences run in two
    batches would get slightly different vectors and no longer tie as they do in fp32.
    """
    first: dict[tuple[int, ...], int] = {}
    source = np.fromiter((first.setdefault(tuple(ids), i) for i, ids in enumerate(token_ids)), dtype=np.int64, count=len(token_ids))
    distinct = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    order = distinct[np.argsort([-len(token_ids[i]) for i in distinct], kind="stable")]
    return order, source


class Encoder(ABC):
    """Text → vector. Subclasses implement :meth:`_encode`."""

    #: a short name used in reports and saved index configs
    name: str = "encoder"
    #: what computes the vectors: ``"torch"`` (also for encoders that need no model runtime),
    #: ``"onnx"`` or ``"onnx-int8"`` (:mod:`medrank.encoders.onnx`)
    backend: str = "torch"
    #: texts of each kind are prefixed with these (e5: ``"query: "`` / ``"passage: "``); empty for symmetric models
    query_prompt: str = ""
    passage_prompt: str = ""

    def _prompt(self, kind: TextKind | None) -> str:
        """The prefix of a text of ``kind`` (none for plain texts)."""
        if kind == "query":
            return self.query_prompt
        if kind == "passage":
            return self.passage_prompt
        return ""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Embedding dimensionality."""

    @abstractmethod
    def _encode(
        self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool
    ) -> np.ndarray: ...

    def encode(
        self,
        texts: Sequence[str] | str,
        kind: TextKind | None = None,
        *,
        batch_size: int = 64,
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """Encode ``texts`` into an ``(n, dim)`` float32 array of unit vectors.

        A single string gives a ``(dim,)`` vector. ``show_progress`` defaults to
        on for more than 1,000 texts.
        """
        single = isinstance(texts, str)
        items = validate_texts(texts)
        if kind not in (None, "query", "passage"):
            raise ValueError(f"kind must be 'query', 'passage' or None, got {kind!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if show_progress is None:
            show_progress = len(items) > 1000
        emb = np.ascontiguousarray(self._encode(items, kind, batch_size, show_progress), dtype=np.float32)
        return emb[0] if single else emb

    def spec(self) -> dict[str, Any]:
        """A JSON-serialisable description that :func:`medrank.encoders.load_encoder` can rebuild."""
        return {"name": self.name}

    def fingerprint(self) -> dict[str, Any]:
        """What the vectors depend on, for keying caches: by default :meth:`spec`.

        Encoders read from a folder replace its path with a digest of its files, so a moved
        folder keeps its caches and a folder whose model was re-saved in place does not.
        """
        return self.spec()


class WrappedEncoder(Encoder):
    """An encoder around another one (a cache, a memo, a batching queue): its name, backend, dimension, spec and
    fingerprint are the wrapped encoder's, so indexes and caches see the model underneath. Subclasses implement
    :meth:`_encode`, usually by calling ``self.encoder.encode``."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.name = getattr(encoder, "name", "encoder")
        self.backend = getattr(encoder, "backend", "torch")

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def spec(self) -> dict[str, Any]:
        return self.encoder.spec()

    def fingerprint(self) -> dict[str, Any]:
        inner = getattr(self.encoder, "fingerprint", None)  # an encoder outside this package may have none
        return inner() if callable(inner) else self.spec()
