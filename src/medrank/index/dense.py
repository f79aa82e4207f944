"""Dense vector index over faiss.

Vectors are L2-normalised by the encoder, so inner product is cosine. The
default is exact search (``IndexFlatIP``); ``factory="hnsw"`` builds an HNSW
graph (``M`` links, ``ef_search`` at query time) and ``factory="ivf"`` an
inverted file with ``nlist`` cells probed ``nprobe`` at a time, for large
collections where exact search is too slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.encoders.base import Encoder
from medrank.index.base import Index, IndexFormatError, register, top_items
from medrank.records import Ranking, is_integer

#: queries scored by one matrix product at a time in :func:`flat_search` (bounds the score matrix's memory)
FLAT_QUERY_BLOCK = 64


def flat_search(index: Any, vectors: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product search of a faiss ``IndexFlatIP``: ``(scores, positions)`` of the ``depth`` best entries
    per query, best first, as ``index.search`` returns them.

    For fewer queries than its BLAS threshold (a complaint's few spans) faiss scans every entry vector once per
    query; one matrix product over the index's own vectors (read in place, not copied) reads them once per block of
    queries, which is what a served complaint's search costs."""
    import faiss

    n, d = index.ntotal, index.d
    if n == 0 or not isinstance(index, faiss.IndexFlatIP):
        return index.search(vectors, depth)
    depth = min(depth, n)
    xb = faiss.rev_swig_ptr(index.get_xb(), n * d).reshape(n, d)
    scores_out = np.empty((len(vectors), depth), dtype=np.float32)
    idx_out = np.empty((len(vectors), depth), dtype=np.int64)
    for start in range(0, len(vectors), FLAT_QUERY_BLOCK):
        scores = vectors[start:start + FLAT_QUERY_BLOCK] @ xb.T
        if depth < n:
            part = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        else:
            part = np.broadcast_to(np.arange(n), scores.shape)
        top = np.take_along_axis(scores, part, axis=1)
        # best first; among equal scores the earlier entry first (faiss leaves that order to its heap)
        order = np.lexsort((part, -top), axis=1)
        idx_out[start:start + len(scores)] = np.take_along_axis(part, order, axis=1)
        scores_out[start:start + len(scores)] = np.take_along_axis(top, order, axis=1)
    return scores_out, idx_out


@register
class DenseIndex(Index):
    """Encoder + faiss. ``encoder`` may be ``None`` when only :meth:`search_vectors` is used."""

    kind: ClassVar[str] = "dense"

    def __init__(
        self,
        encoder: Encoder | None,
        factory: str = "flat",
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 200,
        nlist: int | None = None,
        nprobe: int = 16,
        batch_size: int = 128,
        show_progress: bool | None = None,
    ) -> None:
        super().__init__()
        if factory not in ("flat", "hnsw", "ivf"):
            raise ValueError(f"factory must be 'flat', 'hnsw' or 'ivf', got {factory!r}")
        # faiss asserts on some of these (hnsw_m=0 aborts the process): checked here, with the name
        for name, value, low in (("hnsw_m", hnsw_m, 2), ("ef_search", ef_search, 1), ("ef_construction", ef_construction, 1),
                                 ("nprobe", nprobe, 1), ("batch_size", batch_size, 1), ("nlist", nlist, 1)):
            if value is None and name == "nlist":
                continue
            if not is_integer(value) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.encoder = encoder
        self.factory = factory
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction
        self.nlist, self.nprobe = nlist, nprobe
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.faiss_index: Any = None
        self._items = np.array([], dtype=object)
        self._n_unique = 0

    # -- faiss plumbing ---------------------------------------------------------------------------
    def _new_faiss(self, dim: int, train: np.ndarray | None) -> Any:
        import faiss

        if self.factory == "flat":
            return faiss.IndexFlatIP(dim)
        if self.factory == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
            return index
        nlist = self.nlist or max(1, int(4 * np.sqrt(len(train) if train is not None else 1)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        if train is None or len(train) < nlist:
            raise ValueError(f"IVF with nlist={nlist} needs at least {nlist} vectors to train")
        index.train(train)
        index.nprobe = self.nprobe
        return index

    def _require_encoder(self) -> Encoder:
        if self.encoder is None:
            raise RuntimeError("this DenseIndex has no encoder; pass encoder= or use *_vectors methods")
        return self.encoder

    def encode_entries(self, texts: list[str]) -> np.ndarray:
        return self._require_encoder().encode(
            texts, kind="passage", batch_size=self.batch_size, show_progress=self.show_progress
        )

    def _build(self) -> None:
        self.build_from_vectors(self.encode_entries(self.entry_texts))

    def build_from_vectors(self, vectors: np.ndarray) -> None:
        """(Re)build the faiss index from precomputed entry vectors aligned with the entries."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(self.entry_ids):
            raise ValueError(f"expected ({len(self.entry_ids)}, dim) vectors, got {vectors.shape}")
        self.faiss_index = self._new_faiss(vectors.shape[1], vectors)
        self.faiss_index.add(vectors)
        self._items = np.array(self.entry_items, dtype=object)
        self._n_unique = len(set(self.entry_items))

    def _add(self, start: int) -> None:
        vectors = self.encode_entries(self.entry_texts[start:])
        if self.faiss_index is None:
            self.build_from_vectors(vectors)
            return
        self.faiss_index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._items = np.array(self.entry_items, dtype=object)
        self._n_unique = len(set(self.entry_items))

    def to_hnsw(self, hnsw_m: int | None = None, ef_search: int | None = None, ef_construction: int | None = None) -> None:
        """Replace an exact (flat) index by an HNSW graph over the same vectors, in memory: a query then
        visits a few thousand entries instead of every one (the index saved afterwards is the HNSW one)."""
        if self.faiss_index is None:
            raise ValueError("the index is not built yet")
        if self.factory == "hnsw":
            return
        if self.factory != "flat":
            raise ValueError(f"only a flat index can be turned into HNSW, this one is {self.factory!r}")
        vectors = self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)
        self.hnsw_m = hnsw_m or self.hnsw_m
        self.ef_search = ef_search or self.ef_search
        self.ef_construction = ef_construction or self.ef_construction
        self.factory = "hnsw"
        self.build_from_vectors(vectors)

    def search_vectors(self, qids: list[str], vectors: np.ndarray, k: int) -> list[Ranking]:
        """Search with precomputed query vectors."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None]
        if vectors.ndim != 2 or vectors.shape[1] != self.faiss_index.d or len(vectors) != len(qids):
            raise ValueError(
                f"query vectors {tuple(vectors.shape)} do not fit {len(qids)} queries of this index's dimension "
                f"{self.faiss_index.d} (an encoder other than the one the index was built with?)"
            )
        n_items = self._n_unique
        depth = k if n_items == len(self._items) else min(len(self._items), k * 4)
        results: list[Ranking | None] = [None] * len(qids)
        pending = list(range(len(qids)))
        while pending:
            scores, idx = self._faiss_search(vectors[pending], min(depth, len(self._items)))
            still = []
            for row, qi in enumerate(pending):
                ids, sc = top_items(self._items, idx[row], scores[row], k)
                if len(ids) < min(k, n_items) and depth < len(self._items):
                    still.append(qi)
                    continue
                results[qi] = Ranking(qids[qi], tuple(ids), tuple(sc))
            pending = still
            depth = min(len(self._items), depth * 4)
        return [r for r in results if r is not None]

    def _faiss_search(self, vectors: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        if self.factory == "hnsw":
            import faiss

            # HNSW returns at most efSearch hits: widen it for this call when more are asked for
            params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, depth))
            return self.faiss_index.search(vectors, depth, params=params)
        if self.factory == "flat":
            return flat_search(self.faiss_index, vectors, depth)
        return self.faiss_index.search(vectors, depth)

    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        q = self._require_encoder().encode(texts, kind="query", batch_size=self.batch_size, show_progress=False)
        return self.search_vectors(qids, q, k)

    def vectors(self) -> np.ndarray:
        """All entry vectors (reconstructed from faiss)."""
        return self.faiss_index.reconstruct_n(0, self.faiss_index.ntotal)

    # -- persistence -------------------------------------------------------------------------
    def _save(self, path: Path) -> None:
        import faiss

        faiss.write_index(self.faiss_index, str(path / "vectors.faiss"))

    def config(self) -> dict[str, Any]:
        return {
            "factory": self.factory,
            "hnsw_m": self.hnsw_m,
            "ef_search": self.ef_search,
            "ef_construction": self.ef_construction,
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "encoder": self.encoder.spec() if self.encoder is not None else None,
        }

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> DenseIndex:
        import faiss

        encoder = kwargs.pop("encoder", None)
        if encoder is None and config.get("encoder") and kwargs.pop("load_encoder", True):
            from medrank.encoders import load_encoder

            encoder = load_encoder(config["encoder"])
        cfg = {k: v for k, v in config.items() if k != "encoder"}
        index = cls(encoder, **cfg, **kwargs)
        vec_path = path / "vectors.faiss"
        if not vec_path.exists():
            raise IndexFormatError(f"{path}: vectors.faiss missing")
        index.faiss_index = faiss.read_index(str(vec_path))
        if index.factory == "hnsw":
            index.faiss_index.hnsw.efSearch = index.ef_search
        if index.factory == "ivf":
            index.faiss_index.nprobe = index.nprobe
        return index

    def _load_entries(self, path: Path) -> None:
        super()._load_entries(path)
        if self.faiss_index.ntotal != len(self.entry_ids):
            raise IndexFormatError(
                f"{path}: {self.faiss_index.ntotal} vectors but {len(self.entry_ids)} entries (corrupt index)"
            )
        self._items = np.array(self.entry_items, dtype=object)
        self._n_unique = len(set(self.entry_items))
