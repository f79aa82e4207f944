"""Concept retrievers built from a dataset's vocabulary, and their evaluation over several systems.

What ``medrank index``, ``medrank evaluate`` (concept datasets) and ``medrank demo`` run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from medrank import config
from medrank.records import ConceptDataset
from medrank.retrieval.concept import DEFAULT_METRICS, ConceptRetriever, evaluate_retriever


def build_retriever(
    dataset: str,
    candidates: str,
    method: str,
    encoder_name: str | None,
    eval_set: ConceptDataset | None = None,
    data_root: str | Path | None = None,
    backend: str = "torch",
) -> ConceptRetriever:
    """A :class:`ConceptRetriever` over ``dataset``'s ``candidates`` (``gold`` / ``vocab`` / a file).

    ``backend``: how the encoder runs (``torch``, or ONNX Runtime ``onnx`` / ``onnx-int8``).

    Packaged encoders cache the vocabulary's vectors on disk (``$MEDRANK_CACHE/embeddings``: the
    weights never change); queries never go through that cache.
    """
    from medrank.encoders import load_encoder
    from medrank.retrieval.concept_data import default_encoder, default_language, load_candidates

    concepts = load_candidates(dataset, candidates, eval_set=eval_set, root=data_root)
    encoder = None
    if method in ("dense", "hybrid"):
        from medrank.encoders import CachedEncoder
        from medrank.encoders.registry import ALIASES

        name = encoder_name or default_encoder(dataset)
        encoder = load_encoder(name, backend=backend)
        if name.lower() in ALIASES:
            encoder = CachedEncoder(encoder, config.cache_dir() / "embeddings")
    retriever = ConceptRetriever.build(concepts, method=method, encoder=encoder, language=default_language(dataset))
    uncache_queries(retriever.index)
    return retriever


def uncache_queries(index: Any) -> None:
    """Queries must not go through the on-disk cache (it would persist hashes of patient text)."""
    from medrank.encoders import CachedEncoder

    for part in getattr(index, "components", [index]):
        if isinstance(getattr(part, "encoder", None), CachedEncoder):
            part.encoder = part.encoder.encoder


def concept_systems(
    dataset: str,
    candidates: str,
    methods: Iterable[str],
    encoders: list[str],
    eval_set: ConceptDataset,
    index_dir: Path | None = None,
    data_root: str | Path | None = None,
    backend: str = "torch",
    search: str = "exact",
) -> dict[str, Callable[[], ConceptRetriever]]:
    """``name → builder`` of each system to evaluate: a saved index, or each method × encoder.

    A saved index's query encoder runs on ``backend`` and its dense search is ``search`` (``exact`` or
    ``hnsw``), as :func:`~medrank.retrieval.concept.prepare_for_serving` sets them up; built systems
    encode on ``backend`` and search exactly."""
    from medrank.retrieval.concept import prepare_for_serving
    from medrank.retrieval.concept_data import default_encoder

    if search not in ("exact", "hnsw"):
        raise ValueError(f"search must be 'exact' or 'hnsw', got {search!r}")
    systems: dict[str, Callable[[], ConceptRetriever]] = {}
    if index_dir is not None:

        def saved() -> ConceptRetriever:
            retriever = ConceptRetriever.load(index_dir)
            retriever.serving = prepare_for_serving(retriever, backend, search)  # nothing changes for torch + exact
            return retriever

        served = [x for x in (backend if backend != "torch" else "", "HNSW" if search == "hnsw" else "") if x]
        systems[f"index:{index_dir.name}" + "".join(f":{x}" for x in served)] = saved
        return systems
    for m in methods:
        encs: list[str | None] = [None] if m == "bm25" else list(encoders or [default_encoder(dataset)])
        for e in encs:
            name = m if e is None else f"{m}:{e}" + ("" if backend == "torch" else f":{backend}")
            systems[name] = lambda m=m, e=e: build_retriever(dataset, candidates, m, e, eval_set, data_root, backend)
    return systems


def evaluate_systems(
    systems: dict[str, Callable[[], ConceptRetriever]],
    eval_set: ConceptDataset,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Build and score each system in turn (``on_result`` sees each result as soon as it is known)."""
    results: dict[str, Any] = {}
    for name, make in systems.items():
        results[name] = evaluate_retriever(make(), eval_set, DEFAULT_METRICS)
        if on_result is not None:
            on_result(name, results[name])
    return results
