"""ONNX Runtime backends for :class:`~medrank.encoders.TransformerEncoder`: ``"onnx"`` (fp32) and ``"onnx-int8"``.

The torch model (any BERT-style ``transformers`` model, including trained weights and characters
added with :meth:`TransformerEncoder.add_characters`) is exported once with ``torch.onnx.export``
(pooling included in the graph) and for ``int8`` its weight matrix products quantised dynamically
(per output channel) with ``onnxruntime.quantization.quantize_dynamic``, an encoder's feed-forward outlier
channels first split off and kept fp32 and its other products' inputs smoothed (:mod:`medrank.encoders.onnx_outliers`).
The graph is left unfused, and the
sessions switch off onnxruntime's transformer fusions (:data:`SLOW_FUSIONS`): on x86 their CPU kernels
(SkipLayerNormalization, BiasGelu, the fused Attention over many short rows) run slower than the plain
LayerNormalization, Gelu and batched MatMul they replace, most at batch 32. Tokenisation, prompts,
length sorting, truncation and normalisation are the torch encoder's own, so the vectors agree.

Exports are cached under ``$MEDRANK_CACHE/onnx/<key>/`` where the key is a digest of the model's
weights as they are in memory (not its folder's path: a re-saved or retrained model is exported
again), the pooling, the variant and the export recipe. Each folder is written atomically and holds
``export.json`` with the SHA-256 of its ``model.onnx``; a file that no longer matches (damaged,
truncated) is exported again. ``medrank cache list/prune`` covers these folders.

Training stays on torch: an :class:`OnnxEncoder` is a frozen copy of the weights it was built from.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import logging
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from medrank.encoders.base import Encoder, TextKind, batch_order, validate_texts
from medrank.encoders.onnx_outliers import OUTLIER_SHARE, SMOOTHING_ALPHA
from medrank.encoders.transformer import TransformerEncoder

log = logging.getLogger(__name__)

Backend = Literal["torch", "torch-bf16", "onnx", "onnx-int8"]
#: every backend name (``"torch-bf16"``: torch under bfloat16 autocast, :mod:`medrank.encoders.bf16`)
BACKENDS: tuple[str, ...] = ("torch", "torch-bf16", "onnx", "onnx-int8")
Variant = Literal["fp32", "int8"]

#: bumped whenever the export recipe changes what a cached file holds
EXPORT_FORMAT = 4
OPSET = 17
#: what an encoder's int8 export quantises (part of its cache key: an export made by another recipe is made again)
INT8_RECIPE = (
    "dynamic: MatMul with a weight operand, per-channel int8 weights; the feed-forward blocks' outlier channels "
    f"(1/{round(1 / OUTLIER_SHARE)}, by magnitude on the packaged calibration sentences) apart in fp32; every other weight "
    f"product's input smoothed (SmoothQuant, alpha {SMOOTHING_ALPHA:g}, same calibration); unfused graph"
)
#: what the int8 export of a cross-encoder, re-ranker or frozen bottom quantises
INT8_RECIPE_UNSPLIT = "dynamic: MatMul with a weight operand but the feed-forward output projections, per-channel int8 weights, unfused graph"
#: what a frozen bottom's int8 export adds to :data:`INT8_RECIPE_UNSPLIT`
INT8_SMOOTHING = f"; every other weight product's input smoothed (SmoothQuant, alpha {SMOOTHING_ALPHA:g}, the packaged calibration sentences)"
#: onnxruntime's session-level fusions that replace fast plain kernels with slower fused ones on x86 CPUs
SLOW_FUSIONS = (
    "AttentionFusion", "SkipLayerNormFusion", "BiasSkipLayerNormFusion", "BiasGeluFusion", "EmbedLayerNormFusion",
    "FastGeluFusion", "BiasSoftmaxFusion",
)
MODEL_FILE = "model.onnx"
INFO_FILE = "export.json"



class OnnxBackendError(ValueError):
    """A model that cannot be served by ONNX Runtime (or a backend name that does not exist)."""


def check_backend(backend: str) -> str:
    """``backend`` if it names a backend, else :class:`OnnxBackendError` listing them."""
    if backend not in BACKENDS:
        raise OnnxBackendError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def default_root() -> Path:
    """``$MEDRANK_CACHE/onnx`` (not created)."""
    from medrank.config import cache_dir

    return cache_dir(create=False) / "onnx"


def weights_digest(model: Any) -> str:
    """SHA-256 over every tensor of ``model.state_dict()`` (names, dtypes, shapes and bytes), in name order.

    The export is keyed by the weights themselves: a model trained in place, loaded from a re-saved
    folder or given extra character rows digests differently from the folder it came from.
    """
    digest = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        if tensor.numel():
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}
_FILE_LOCK = threading.Lock()


def _file_sha256(path: Path) -> str:
    """SHA-256 of a file, memoised per process on its path, size and modification time."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _FILE_LOCK:
        if key in _FILE_DIGESTS:
            return _FILE_DIGESTS[key]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    value = digest.hexdigest()
    with _FILE_LOCK:
        _FILE_DIGESTS[key] = value
    return value


def ort_version() -> str:
    import onnxruntime

    return ".".join(onnxruntime.__version__.split(".")[:2])


@dataclass(frozen=True)
class ExportGraph:
    """A graph to export that this module does not build itself (see :attr:`ExportSource.graph`).

    ``module`` maps ``inputs`` (example tensors, named ``input_names``) to one output named ``"output"``;
    ``transformer`` is the ``transformers`` model inside it, whose attention is traced eagerly and whose
    config drives the fusions; ``dynamic_axes`` names the variable axes of every input and the output.
    """

    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    input_names: list[str]
    dynamic_axes: dict[str, dict[int, str]]
    transformer: Any
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportSource:
    """A model to export: ``head`` is ``"mean"`` / ``"cls"`` (pooled hidden states, an encoder) or
    ``"logit"`` (the first logit of a sequence-classification model, a cross-encoder's score); any other
    head names a graph that ``graph`` builds (its name joins the cache key, ``model``'s weights are digested)."""

    model: Any
    tokenizer: Any
    head: str
    name: str
    graph: Callable[[], ExportGraph] | None = None

    @classmethod
    def of(cls, source: TransformerEncoder | ExportSource) -> ExportSource:
        if isinstance(source, ExportSource):
            if source.head not in ("mean", "cls", "logit") and source.graph is None:
                raise OnnxBackendError(f"head must be 'mean', 'cls' or 'logit' (or come with its graph), got {source.head!r}")
            return source
        if not isinstance(source, TransformerEncoder):
            raise OnnxBackendError(f"only a TransformerEncoder can be exported to ONNX, got {type(source).__name__}")
        return cls(source.model, source.tokenizer, source.pooling, source.name)


def export_key(source: TransformerEncoder | ExportSource, variant: Variant, digest: str | None = None) -> tuple[str, dict[str, Any]]:
    """The cache folder name of ``source``'s ``variant`` export, and what it was derived from."""
    source = ExportSource.of(source)
    described = {
        "weights": digest or weights_digest(source.model),
        "pooling": source.head,
        "variant": variant,
        "format": EXPORT_FORMAT,
        "opset": OPSET,
        # the fusions and the quantiser belong to onnxruntime's python package: another version may write another graph
        "onnxruntime": ort_version(),
    }
    if variant == "int8":
        described["quantised"] = int8_recipe(source)
        if _calibrated(source):
            described["calibration"] = _calibration_digest()
    key = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]
    return key, described


def _valid_export(folder: Path, described: dict[str, Any]) -> bool:
    """Whether ``folder`` holds a complete export of exactly ``described`` whose file is undamaged."""
    try:
        info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
        model = folder / MODEL_FILE
        return info.get("source") == described and info.get("sha256") == _file_sha256(model)
    except (OSError, ValueError, AttributeError):
        return False


class PooledGraph(torch.nn.Module):
    """The graph that is exported: token ids → pooled (not normalised) vectors, or one logit per text."""

    def __init__(self, model: torch.nn.Module, pooling: str, with_token_types: bool) -> None:
        super().__init__()
        self.model, self.pooling, self.with_token_types = model, pooling, with_token_types

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        extra = {"token_type_ids": rest[0]} if self.with_token_types else {}
        if self.pooling == "logit":
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **extra).logits[:, 0]
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def _takes_token_types(model: Any) -> bool:
    try:
        return "token_type_ids" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _example_inputs(tokenizer: Any, with_types: bool) -> tuple[tuple[torch.Tensor, ...], list[str], dict[str, dict[int, str]]]:
    """Example token inputs to trace, their names, and their variable axes (batch and tokens)."""
    # an example with a padded row, so no branch that skips masking for all-ones masks is traced
    first = tokenizer.cls_token_id or 0
    ids = torch.tensor([[first, 5, 6, 7], [first, 5, 6, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    inputs: tuple[torch.Tensor, ...] = (ids, mask) + ((torch.zeros_like(ids),) if with_types else ())
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
    return inputs, names, {name: {0: "batch", 1: "tokens"} for name in names}


def _pooled_graph(source: ExportSource) -> ExportGraph:
    """The graph of an encoder (pooled vectors) or a pair classifier (one logit per text)."""
    model = source.model
    with_types = _takes_token_types(model)
    inputs, names, axes = _example_inputs(source.tokenizer, with_types)
    axes["output"] = {0: "batch"}
    return ExportGraph(PooledGraph(model, source.head, with_types), inputs, names, axes, model, {"token_type_ids": with_types})


def _check_cpu_encoder(encoder: Any, what: str) -> None:
    if not isinstance(encoder, TransformerEncoder):
        raise OnnxBackendError(f"{what} needs a TransformerEncoder, got {type(encoder).__name__}")
    if encoder.device.type != "cpu":
        raise OnnxBackendError(f"the ONNX backends run on the CPU; this encoder is on {encoder.device}")


def _export_fp32(source: ExportSource, out: Path, work: Path) -> dict[str, Any]:
    """Export ``source``'s model with its head to ``out`` (the traced graph as it is: no fusions, see the module docstring)."""
    spec = source.graph() if source.graph is not None else _pooled_graph(source)
    model = spec.transformer
    config = model.config
    raw = work / "raw.onnx"
    previous = getattr(config, "_attn_implementation", None)
    was_training = spec.module.training
    spec.module.eval()
    # eager attention traces into plain MatMul/Softmax nodes (SDPA would trace into a pattern of its own)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    try:
        if switch:
            model.set_attn_implementation("eager")
        with torch.no_grad(), warnings.catch_warnings():
            # the TorchScript exporter's deprecation notice and tracer notes on shape arithmetic that is
            # constant for every input (agreement at every batch size and length is tested)
            warnings.simplefilter("ignore", category=DeprecationWarning)
            warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", message="Exporting aten::index operator")
            torch.onnx.export(
                spec.module, spec.inputs, str(raw), input_names=spec.input_names,
                output_names=["output"], dynamic_axes=spec.dynamic_axes, opset_version=OPSET, do_constant_folding=True,
                dynamo=False,
            )
    finally:
        if switch:
            model.set_attn_implementation(previous)
        if was_training:
            spec.module.train()
    os.replace(raw, out)
    return dict(spec.details)


class _QuietAdvice(logging.Filter):
    """Drops the quantiser's advice to pre-process the model (logged on the root logger at every call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in str(record.msg)


def _quantize(fp32: Path, out: Path, source: ExportSource) -> None:
    import onnx
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from medrank.encoders import onnx_outliers

    source_file = fp32
    model = onnx.load(str(fp32))
    if _splits_outliers(source):
        maxima = onnx_outliers.feed_forward_maxima(source.model, source.tokenizer, onnx_outliers.calibration_sentences())
        keep_fp32 = onnx_outliers.split_outlier_channels(model, maxima, onnx_outliers.OUTLIER_SHARE)
    else:
        # the feed-forward output projections stay fp32: their input is the GELU output, whose outlier
        # channels make a per-tensor 8-bit activation scale coarse (see medrank.encoders.onnx_outliers)
        keep_fp32 = [
            node.name for node in model.graph.node
            if node.op_type == "MatMul" and "/output/dense/" in node.name and "/attention/" not in node.name
        ]
    if _smooths_inputs(source):
        # every other product's input (the residual stream's outlier dimensions), calibrated on the graph as split
        tensors = list(onnx_outliers.product_inputs(model.graph, set(keep_fp32)))
        feeds = onnx_outliers.calibration_feeds(source.tokenizer, onnx_outliers.calibration_sentences())
        inputs_maxima = onnx_outliers.product_input_maxima(model, tensors, feeds, out.with_name("probe.onnx"))
        onnx_outliers.smooth_product_inputs(model, inputs_maxima, onnx_outliers.SMOOTHING_ALPHA, set(keep_fp32))
    if _calibrated(source):
        source_file = out.with_name("prepared.onnx")  # in the export's scratch folder, removed with it
        onnx.save(model, str(source_file))
    del model
    quiet = _QuietAdvice()
    logging.getLogger().addFilter(quiet)
    try:
        quantize_dynamic(
            str(source_file), str(out), per_channel=True, weight_type=QuantType.QInt8,
            # the products with a weight matrix carry the time; attention's products of two activations
            # (MatMulConstBOnly) and the embedding tables (Gather) stay fp32
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=keep_fp32,
            # a tensor whose type shape inference cannot tell is float32
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": TensorProto.FLOAT},
        )
    finally:
        logging.getLogger().removeFilter(quiet)
        if source_file != fp32:
            source_file.unlink(missing_ok=True)


def _splits_outliers(source: ExportSource) -> bool:
    """Whether ``source``'s int8 export computes the feed-forward outlier channels apart (pooled encoders); the
    other heads keep the whole output projections fp32: cross-encoders and re-rankers, and frozen bottoms, whose
    hidden states feed trained top blocks (the procedures' shared e5-small bottom lost more accuracy with the split,
    ``bench/procedures_backends.py``)."""
    return source.head in ("mean", "cls")


def _smooths_inputs(source: ExportSource) -> bool:
    """Whether ``source``'s int8 export smooths its products' inputs (encoders and frozen bottoms; cross-encoders
    and re-rankers keep the earlier recipe until they are measured with it)."""
    return source.head in ("mean", "cls") or source.head.startswith("bottom-")


def _calibrated(source: ExportSource) -> bool:
    """Whether ``source``'s int8 export depends on the calibration sentences (split or smoothed)."""
    return _splits_outliers(source) or _smooths_inputs(source)


def _calibration_digest() -> str:
    from medrank.encoders.onnx_outliers import calibration_sentences

    return hashlib.sha256("\n".join(calibration_sentences()).encode("utf-8")).hexdigest()[:16]


def int8_recipe(source: TransformerEncoder | ExportSource) -> str:
    """The int8 recipe of ``source``'s export (part of its cache key and of its vectors' fingerprint)."""
    source = ExportSource.of(source)
    if _splits_outliers(source):
        return INT8_RECIPE
    return INT8_RECIPE_UNSPLIT + (INT8_SMOOTHING if _smooths_inputs(source) else "")


def ensure_export(
    encoder: TransformerEncoder | ExportSource, variant: Variant = "fp32", root: str | os.PathLike[str] | None = None,
    digest: str | None = None,
) -> Path:
    """The folder holding ``encoder``'s ``variant`` export, exporting it first when missing or damaged."""
    from medrank.cache_admin import mark_used
    from medrank.utils.io import atomic_dir

    if variant not in ("fp32", "int8"):
        raise OnnxBackendError(f"variant must be 'fp32' or 'int8', got {variant!r}")
    encoder = ExportSource.of(encoder)
    root = default_root() if root is None else Path(root)
    digest = digest or weights_digest(encoder.model)
    key, described = export_key(encoder, variant, digest)
    folder = root / key
    if _valid_export(folder, described):
        mark_used(folder)
        return folder
    if folder.exists():
        log.warning("the ONNX export in %s is incomplete or damaged: exporting it again", folder)
    source = ensure_export(encoder, "fp32", root, digest) if variant == "int8" else None
    root.mkdir(parents=True, exist_ok=True)
    log.info("exporting %s to ONNX (%s) into %s", encoder.name, variant, folder)
    with atomic_dir(folder) as tmp:
        if source is None:
            details = _export_fp32(encoder, tmp / MODEL_FILE, tmp)
        else:
            _quantize(source / MODEL_FILE, tmp / MODEL_FILE, encoder)
            details = json.loads((source / INFO_FILE).read_text(encoding="utf-8"))["details"]
        for leftover in tmp.iterdir():  # the quantiser's and optimiser's scratch files
            if leftover.name not in (MODEL_FILE,) and not leftover.name.startswith("."):
                leftover.unlink()
        info = {"source": described, "sha256": _file_sha256(tmp / MODEL_FILE), "details": details, "name": encoder.name}
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True), encoding="utf-8")
    return folder


class SessionRunner:
    """An ONNX Runtime session over one model file, rebuilt when the wanted intra-op thread count changes."""

    def __init__(self, model_file: Path, threads: int | None) -> None:
        self.model_file = model_file
        self.fixed_threads = None if threads is None else int(threads)
        self._lock = threading.Lock()
        self._session: Any = None
        self._inputs: frozenset[str] = frozenset()
        self.threads = 0
        self.session()

    def wanted_threads(self) -> int:
        if self.fixed_threads is not None:
            return self.fixed_threads
        from medrank.config import default_threads, requested_threads

        return requested_threads() or default_threads()

    def session(self) -> tuple[Any, frozenset[str]]:
        """The session for the wanted thread count and its input names."""
        threads = self.wanted_threads()
        with self._lock:
            if self._session is None or self.threads != threads:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.log_severity_level = 3
                self._session = ort.InferenceSession(
                    str(self.model_file), options, providers=["CPUExecutionProvider"], disabled_optimizers=list(SLOW_FUSIONS)
                )
                self._inputs = frozenset(i.name for i in self._session.get_inputs())
                self.threads = threads
            return self._session, self._inputs


class OnnxEncoder(Encoder):
    """A :class:`TransformerEncoder` run by ONNX Runtime (``quantized``: its int8 export).

    Args:
        encoder: the torch encoder to serve (its tokenizer, pooling, prompts and maximum length are used
            as they are; its weights are exported, or read from the export cache).
        quantized: serve the dynamically quantised int8 export instead of the fp32 one.
        threads: ONNX Runtime's intra-op threads; ``None`` follows medrank's thread setting
            (``--threads``, :func:`medrank.config.set_threads`), also when it changes later.
        cache_root: where exports are cached (default ``$MEDRANK_CACHE/onnx``).
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        *,
        quantized: bool = False,
        threads: int | None = None,
        cache_root: str | os.PathLike[str] | None = None,
    ) -> None:
        _check_cpu_encoder(encoder, "an ONNX backend")
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
        self.backend = "onnx-int8" if quantized else "onnx"
        self.variant: Variant = "int8" if quantized else "fp32"
        self.name = encoder.name
        self.tokenizer = encoder.tokenizer
        self.pooling = encoder.pooling
        self.query_prompt, self.passage_prompt = encoder.query_prompt, encoder.passage_prompt
        self.max_length, self.normalize = encoder.max_length, encoder.normalize
        self.model_path = encoder.model_path
        self.added_characters = encoder.added_characters
        self._dim = encoder.dim
        self._spec = encoder.spec()
        self._fingerprint = encoder.fingerprint()
        # what an int8 export's vectors depend on beyond the weights: the recipe (and the calibration of a split one)
        self._recipe: dict[str, Any] = {}
        if self.variant == "int8":
            source = ExportSource.of(encoder)
            self._recipe = {"quantised": int8_recipe(source), "export_format": EXPORT_FORMAT}
            if _calibrated(source):
                self._recipe["calibration"] = _calibration_digest()
        self.folder = ensure_export(encoder, self.variant, cache_root)
        self.model_file = self.folder / MODEL_FILE
        self._runner = SessionRunner(self.model_file, threads)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def threads(self) -> int:
        """The intra-op threads the current session runs with (follows medrank's setting unless fixed)."""
        return self._runner.threads

    def _encode(self, texts: list[str], kind: TextKind | None, batch_size: int, show_progress: bool) -> np.ndarray:
        from tqdm.auto import tqdm

        session, inputs = self._runner.session()
        prompt = self._prompt(kind)
        enc = self.tokenizer(
            [prompt + t for t in texts], truncation=True, max_length=self.max_length, padding=False,
            return_attention_mask=False, return_token_type_ids=False,
        )["input_ids"]
        order, source = batch_order(enc)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in tqdm(
            range(0, len(order), batch_size), desc=f"encode[{self.name}:{self.backend}]",
            disable=not show_progress, unit="batch",
        ):
            idx = order[start : start + batch_size]
            longest = len(enc[idx[0]])
            ids = np.full((len(idx), longest), pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), longest), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(enc[i])] = enc[i]
                mask[row, : len(enc[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            pooled = session.run(None, feed)[0]
            if self.normalize:
                pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled
        return out[source]

    def spec(self) -> dict[str, Any]:
        return {**self._spec, "backend": self.backend}

    def fingerprint(self) -> dict[str, Any]:
        # the backend joins the key: int8 vectors differ from torch's, and fp32 ones in the last digits; so does
        # the quantisation recipe (vectors cached from another int8 export are not these)
        # (fp32 vectors agree across exports to 1e-6, so only int8 names its recipe)
        return {**self._fingerprint, "backend": self.backend, **self._recipe}


class OnnxPairScorer:
    """A cross-encoder (a one-logit ``transformers`` sequence-classification model over text pairs) run by
    ONNX Runtime; :meth:`score_pairs` matches :meth:`medrank.models.pair_classifier.PairScorer.score_pairs`.

    The export is cached like an encoder's (:func:`ensure_export`, head ``"logit"``).
    """

    def __init__(
        self, model: Any, tokenizer: Any, max_length: int = 128, *, quantized: bool = False,
        threads: int | None = None, cache_root: str | os.PathLike[str] | None = None, name: str = "cross-encoder",
    ) -> None:
        if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
            raise ValueError(f"threads must be a whole number >= 1 or None, got {threads!r}")
        self.tokenizer, self.max_length, self.name = tokenizer, max_length, name
        self.backend = "onnx-int8" if quantized else "onnx"
        self.folder = ensure_export(ExportSource(model, tokenizer, "logit", name), "int8" if quantized else "fp32", cache_root)
        self._runner = SessionRunner(self.folder / MODEL_FILE, threads)

    def score_pairs(
        self, queries: Sequence[str], passages: Sequence[str], batch_size: int = 64, show_progress: bool = False
    ) -> np.ndarray:
        from tqdm.auto import tqdm

        queries, passages = validate_texts(queries, "queries"), validate_texts(passages, "passages")
        if len(queries) != len(passages):
            raise ValueError(f"got {len(queries)} queries and {len(passages)} passages: one query per passage")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        session, inputs = self._runner.session()
        enc = self.tokenizer(queries, passages, truncation="only_second", max_length=self.max_length)
        order = np.argsort([-len(x) for x in enc["input_ids"]], kind="stable")
        pad = self.tokenizer.pad_token_id or 0
        out = np.empty(len(queries), dtype=np.float32)
        for start in tqdm(range(0, len(order), batch_size), disable=not show_progress, desc="cross-encoder", unit="batch"):
            idx = order[start : start + batch_size]
            longest = len(enc["input_ids"][idx[0]])
            feed = {k: np.full((len(idx), longest), pad if k == "input_ids" else 0, dtype=np.int64) for k in inputs if k in enc}
            for row, i in enumerate(idx):
                for k in feed:
                    seq = enc[k][i]
                    feed[k][row, : len(seq)] = seq
            if "token_type_ids" in inputs and "token_type_ids" not in feed:
                feed["token_type_ids"] = np.zeros((len(idx), longest), dtype=np.int64)
            out[idx] = session.run(None, feed)[0]
        return out


class BottomGraph(torch.nn.Module):
    """Token ids → hidden states after the embeddings and the first ``n_blocks`` blocks of a BERT-style model.

    The model's own forward over a copy that holds only those blocks (the copy shares every weight),
    so the export traces the same embeddings, mask and blocks as the full model's.
    """

    def __init__(self, model: torch.nn.Module, n_blocks: int, with_token_types: bool) -> None:
        super().__init__()
        from medrank.encoders.blocks import encoder_blocks

        blocks = encoder_blocks(model)
        if not 1 <= n_blocks <= len(blocks):
            raise OnnxBackendError(f"a frozen bottom has 1..{len(blocks)} blocks, got {n_blocks}")
        trunk = copy.copy(model)
        trunk._modules = dict(model._modules)
        encoder = copy.copy(model.encoder)
        encoder._modules = dict(model.encoder._modules)
        encoder.layer = torch.nn.ModuleList(list(blocks[:n_blocks]))
        trunk._modules["encoder"] = encoder
        if "pooler" in trunk._modules:  # BERT's pooler reads the last block's [CLS]: not part of a bottom
            trunk._modules["pooler"] = None
        self.trunk, self.with_token_types = trunk, with_token_types

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        extra = {"token_type_ids": rest[0]} if self.with_token_types else {}
        return self.trunk(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state


class OnnxFrozenBottom:
    """The frozen bottom of a partially trained bi-encoder (embeddings + first ``n_blocks`` blocks) run by
    ONNX Runtime: :meth:`__call__` maps tokenised features to ``(n, L, d)`` float32 hidden states, as
    :func:`medrank.encoders.blocks.frozen_bottom` does in torch.

    The export is cached like an encoder's, keyed by the whole model's weights and ``n_blocks``.
    """

    def __init__(
        self, encoder: TransformerEncoder, n_blocks: int, *, quantized: bool = False, threads: int | None = None,
        cache_root: str | os.PathLike[str] | None = None,
    ) -> None:
        _check_cpu_encoder(encoder, "an ONNX frozen bottom")
        model, with_types = encoder.model, _takes_token_types(encoder.model)
        BottomGraph(model, n_blocks, with_types)  # a clear error for a depth the model does not have, before any digest

        def graph() -> ExportGraph:
            module = BottomGraph(model, n_blocks, with_types)
            inputs, names, axes = _example_inputs(encoder.tokenizer, with_types)
            axes["output"] = {0: "batch", 1: "tokens"}
            return ExportGraph(module, inputs, names, axes, module.trunk, {"token_type_ids": with_types, "blocks": n_blocks})

        self.n_blocks = n_blocks
        self.backend = "onnx-int8" if quantized else "onnx"
        source = ExportSource(model, encoder.tokenizer, f"bottom-{n_blocks}", encoder.name, graph)
        self.folder = ensure_export(source, "int8" if quantized else "fp32", cache_root)
        self._runner = SessionRunner(self.folder / MODEL_FILE, threads)

    def __call__(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        session, inputs = self._runner.session()
        ids = features["input_ids"].detach().cpu().numpy().astype(np.int64, copy=False)
        feed = {"input_ids": ids, "attention_mask": features["attention_mask"].detach().cpu().numpy().astype(np.int64, copy=False)}
        if "token_type_ids" in inputs:
            types = features.get("token_type_ids")
            feed["token_type_ids"] = np.zeros_like(ids) if types is None else types.detach().cpu().numpy().astype(np.int64, copy=False)
        return torch.from_numpy(session.run(None, feed)[0])


def with_backend(encoder: TransformerEncoder, backend: str, threads: int | None = None,
                 cache_root: str | os.PathLike[str] | None = None) -> Encoder:
    """``encoder`` itself for ``"torch"``, a :class:`~medrank.encoders.bf16.Bf16Encoder` over it for
    ``"torch-bf16"``, else an :class:`OnnxEncoder` over it."""
    check_backend(backend)
    if backend == "torch":
        return encoder
    if backend == "torch-bf16":
        from medrank.encoders.bf16 import Bf16Encoder

        return Bf16Encoder(encoder)
    return OnnxEncoder(encoder, quantized=backend == "onnx-int8", threads=threads, cache_root=cache_root)

