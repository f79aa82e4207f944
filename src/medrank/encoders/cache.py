"""An on-disk embedding cache around any encoder.

Encoding a 40k-term vocabulary with a 12-layer model takes minutes on a CPU;
benchmarks and services that re-index the same texts should pay that once.
Vectors are keyed by the encoder's :meth:`~medrank.encoders.Encoder.fingerprint` (its settings
and a digest of its model folder's files, not the folder's path), the
text kind (query/passage) and the SHA-1 of each text, and stored as one
safetensors file per (encoder, kind) holding the vectors and the texts' digests together, written
atomically. Two processes sharing the cache (the service encodes its largest knowledge base in a side
process) never lose each other's vectors: a write holds a lock on the file, re-reads it and keeps what
another process added since; and a vector is never paired with the wrong text. (Caches of earlier versions, a ``.npy`` matrix plus a
separate key list, are not read: their texts are encoded again once.)

Do not wrap an encoder whose weights change in place (during training): the
spec would not change and stale vectors would be served.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from medrank.encoders.base import Encoder, TextKind, WrappedEncoder
from medrank.utils.io import atomic_write_bytes, atomic_write_text, file_lock


def _text_key(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8")).digest()


class CachedEncoder(WrappedEncoder):
    """Wraps ``encoder``; texts already encoded (with the same kind) are read from ``directory``."""

    def __init__(self, encoder: Encoder, directory: str | os.PathLike[str]) -> None:
        super().__init__(encoder)
        key = json.dumps(encoder.fingerprint(), sort_keys=True, default=str)
        self.directory = Path(directory) / hashlib.sha1(key.encode()).hexdigest()[:16]
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.directory / "spec.json").exists():  # written once (atomically): it names the folder's model
            described = {"fingerprint": json.loads(key), "spec": encoder.spec()}
            atomic_write_text(self.directory / "spec.json", json.dumps(described, sort_keys=True, default=str))
        self._stores: dict[str, tuple[dict[bytes, int], np.ndarray]] = {}

    def _path(self, kind: TextKind | None) -> Path:
        return self.directory / f"{kind or 'plain'}.safetensors"

    def _read(self, kind: TextKind | None) -> tuple[dict[bytes, int], np.ndarray]:
        """What the file of ``kind`` holds now: text digest → row, and the vectors."""
        from safetensors.numpy import load_file

        path = self._path(kind)
        keys: list[bytes] = []
        vecs = np.zeros((0, self.dim), np.float32)
        if path.exists():
            tensors = load_file(str(path))
            digests, stored = tensors.get("sha1"), tensors.get("vectors")
            if digests is not None and stored is not None and len(digests) == len(stored):
                keys, vecs = [bytes(row) for row in digests], stored
        return {k: i for i, k in enumerate(keys)}, vecs

    def _store(self, kind: TextKind | None) -> tuple[dict[bytes, int], np.ndarray]:
        stem = kind or "plain"
        if stem not in self._stores:
            self._stores[stem] = self._read(kind)
        return self._stores[stem]

    def _write(self, kind: TextKind | None, index: dict[bytes, int], vecs: np.ndarray) -> tuple[dict[bytes, int], np.ndarray]:
        """Replace the file of ``kind`` with ``index``/``vecs`` plus whatever another process wrote there since
        this one read it (under a lock, so neither loses the other's vectors); returns the merged pair."""
        from safetensors.numpy import save

        stem = kind or "plain"
        with file_lock(self.directory / f"{stem}.lock"):
            on_disk, disk_vecs = self._read(kind)
            theirs = [k for k in on_disk if k not in index]
            if theirs:
                start = len(vecs)
                vecs = np.concatenate([vecs, disk_vecs[[on_disk[k] for k in theirs]].astype(np.float32)])
                index = {**index, **{k: start + i for i, k in enumerate(theirs)}}
            digests = np.frombuffer(b"".join(index), dtype=np.uint8).reshape(len(index), 20)
            # one file: the vectors and the digests of their texts are replaced together
            atomic_write_bytes(self._path(kind), save({"sha1": digests, "vectors": np.ascontiguousarray(vecs)}))
        for old in (self.directory / f"{stem}.npy", self.directory / f"{stem}.keys.json"):
            old.unlink(missing_ok=True)  # an earlier version's cache of this kind: superseded
        self._stores[stem] = (index, vecs)
        return index, vecs

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        index, vecs = self._store(kind)
        keys = [_text_key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in index and k not in missing:
                missing[k] = t
        if missing:
            new = self.encoder.encode(
                list(missing.values()), kind=kind, batch_size=batch_size, show_progress=show_progress
            )
            start = len(vecs)
            vecs = np.concatenate([vecs, new.astype(np.float32)])
            index = {**index, **{k: start + i for i, k in enumerate(missing)}}
            index, vecs = self._write(kind, index, vecs)
        return vecs[[index[k] for k in keys]]
