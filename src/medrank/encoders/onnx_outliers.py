"""Outlier channels of the feed-forward blocks kept in fp32 when an encoder's export is quantised to int8.

A BERT block's feed-forward output projection reads ``a = GELU(x W1 + b1)``, whose few outlier channels are a
property of the weights: they are large for every input (Bondarenko et al., 2021, "Understanding and Overcoming
the Challenges of Efficient Transformer Quantization"; Dettmers et al., 2022, "LLM.int8(): 8-bit Matrix
Multiplication for Transformers at Scale"). Dynamic int8 quantisation gives a whole activation tensor one scale,
so those channels set it and every other channel loses precision. As in LLM.int8()'s mixed-precision
decomposition, the block is split by channel:

    GELU(x W1 + b1) W2 = GELU(x W1[:, R] + b1[R]) W2[R] + GELU(x W1[:, T] + b1[T]) W2[T]

where ``T`` are the ``k`` channels with the largest magnitude on calibration sentences and ``R`` the rest. The
split is exact in fp32; the quantiser then quantises the first term and leaves the small second one in fp32.
Unlike LLM.int8(), which finds the outliers of each batch at run time, ``T`` is fixed when the graph is
exported, so the graph stays static and the side branch costs ``k / d_ff`` of the block's products.

The other weight products (queries, keys, values, attention output, the feed-forward input projection) read
the residual stream, whose few large dimensions are also a property of the weights. There SmoothQuant's
migration (:func:`smooth_product_inputs`) divides each input channel by a scale that the weight's row takes
on: one elementwise ``Mul`` per input tensor instead of a side branch per product.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: the share of each feed-forward block's channels computed in fp32 (16 of MiniLM's and e5-small's 1,536)
OUTLIER_SHARE = 1 / 96
#: the elementwise operators an exported activation (exact or tanh GELU, SiLU) is made of
ACTIVATION_OPS = frozenset({"Div", "Erf", "Add", "Mul", "Tanh", "Pow", "Sigmoid", "Constant"})
_BLOCK_MODULE = re.compile(r"(?:^|\.)layer\.(\d+)\.intermediate$")
_OUT_PROJECTION = re.compile(r"layer\.(\d+)/output/dense/MatMul$")


def calibration_sentences() -> list[str]:
    """The packaged calibration sentences (English and Chinese complaints, notes, terms and questions,
    written for this purpose: no dataset's text)."""
    return list(_packaged_sentences())


@functools.cache
def _packaged_sentences() -> tuple[str, ...]:
    text = resources.files("medrank.encoders").joinpath("calibration_sentences.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def feed_forward_maxima(
    transformer: torch.nn.Module, tokenizer: Any, texts: list[str], max_length: int = 128, batch_size: int = 16
) -> dict[int, np.ndarray]:
    """Per block index, the largest magnitude of each feed-forward activation channel over ``texts``' tokens
    (padding excluded), read with hooks on the blocks' ``intermediate`` modules (BERT's ``GELU(x W1 + b1)``)."""
    blocks = {int(m.group(1)): module for name, module in transformer.named_modules() if (m := _BLOCK_MODULE.search(name))}
    maxima: dict[int, np.ndarray] = {}
    mask: torch.Tensor | None = None

    def hook(index: int) -> Any:
        def record(_module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> None:
            assert mask is not None
            peak = output[mask].abs().amax(0).float().numpy()
            maxima[index] = peak if index not in maxima else np.maximum(maxima[index], peak)

        return record

    handles = [module.register_forward_hook(hook(i)) for i, module in blocks.items()]
    was_training = transformer.training
    transformer.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                features = tokenizer(
                    texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                mask = features["attention_mask"].bool()
                transformer(**{k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    finally:
        for handle in handles:
            handle.remove()
        transformer.train(was_training)
    return maxima


@dataclass
class FeedForward:
    """One feed-forward block of an exported graph: ``out(activation(bias(in(x))))``."""

    layer: int
    in_product: Any
    in_bias: Any
    activation: list[Any]
    out_product: Any


def feed_forward_blocks(graph: Any) -> tuple[list[FeedForward], list[Any]]:
    """The feed-forward blocks of an exported BERT-style graph that can be split, and the output projections
    of those that cannot (an activation of other operators, a shared weight)."""
    producer = {out: node for node in graph.node for out in node.output}
    weights = {init.name for init in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    found, unsplit = [], []
    names = [node.name for node in graph.node]
    unnamed = "" in names or len(set(names)) != len(names)  # the split finds nodes by name
    for node in graph.node:
        match = _OUT_PROJECTION.search(node.name)
        if node.op_type != "MatMul" or match is None or "/attention/" in node.name or node.input[1] not in weights:
            continue
        block = None if unnamed else _trace_back(node, producer, weights, int(match.group(1)))
        # each weight, the product x W1 and the activation's output must belong to this block alone
        shared = block is None or any(
            uses.get(name, 0) != 1
            for name in (block.in_product.input[1], _bias_name(block.in_bias, weights), node.input[1],
                         block.in_product.output[0], node.input[0])
        )
        (unsplit if shared else found).append(node if shared else block)
    return found, unsplit


def _bias_name(add: Any, weights: set[str]) -> str:
    return next(name for name in add.input if name in weights)


def _trace_back(out_product: Any, producer: dict[str, Any], weights: set[str], layer: int) -> FeedForward | None:
    """Walks from the output projection's input back through the activation to the bias ``Add`` of ``x W1``."""
    activation: list[Any] = []
    frontier, seen, bias = [out_product.input[0]], set(), None
    while frontier:
        node = producer.get(frontier.pop())
        if node is None or node.name in seen:
            continue
        inputs_from_product = [producer.get(name) for name in node.input]
        if node.op_type == "Add" and any(n in weights for n in node.input) and any(
            p is not None and p.op_type == "MatMul" for p in inputs_from_product
        ):
            if bias is not None and bias is not node:
                return None
            bias = node
            continue
        if node.op_type not in ACTIVATION_OPS:
            return None
        seen.add(node.name)
        activation.append(node)
        frontier.extend(node.input)
    if bias is None:
        return None
    in_product = next(p for p in (producer.get(n) for n in bias.input) if p is not None and p.op_type == "MatMul")
    if in_product.input[1] not in weights:
        return None
    return FeedForward(layer, in_product, bias, activation, out_product)


def split_outlier_channels(model: Any, maxima: dict[int, np.ndarray], share: float = OUTLIER_SHARE) -> list[str]:
    """Splits each feed-forward block of ``model`` (an ``onnx.ModelProto``, changed in place) into its
    ``share`` of outlier channels (by ``maxima``) and the rest; returns the names of the nodes to keep in fp32
    (the outlier branches, and the output projections of blocks that could not be split)."""
    from onnx import helper, numpy_helper

    graph = model.graph
    blocks, unsplit = feed_forward_blocks(graph)
    keep = [node.name for node in unsplit]
    weights = {init.name: init for init in graph.initializer}
    weight_names = set(weights)
    position = {node.name: i for i, node in enumerate(graph.node)}
    inserted: dict[int, list[Any]] = {}
    for block in blocks:
        peak = maxima.get(block.layer)
        w1_name, b1_name, w2_name = block.in_product.input[1], _bias_name(block.in_bias, weight_names), block.out_product.input[1]
        w1, b1, w2 = (numpy_helper.to_array(weights[n]) for n in (w1_name, b1_name, w2_name))
        if peak is None or peak.shape[0] != w1.shape[1]:
            keep.append(block.out_product.name)
            continue
        k = max(1, round(share * peak.shape[0]))
        outliers = np.sort(np.argsort(-peak, kind="stable")[:k])
        rest = np.setdiff1d(np.arange(peak.shape[0]), outliers)
        for name, value in ((w1_name, w1[:, rest]), (b1_name, b1[rest]), (w2_name, w2[rest])):
            weights[name].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(value), name))
        prefix = f"/outliers/layer.{block.layer}"
        for name, value in (("w1", w1[:, outliers]), ("b1", b1[outliers]), ("w2", w2[outliers])):
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), f"{prefix}/{name}"))
        renamed = {block.in_product.output[0]: f"{prefix}/xw1", block.in_bias.output[0]: f"{prefix}/h"}
        bias_inputs = [f"{prefix}/b1" if n == b1_name else renamed[block.in_product.output[0]] for n in block.in_bias.input]
        branch = [
            helper.make_node("MatMul", [block.in_product.input[0], f"{prefix}/w1"], [f"{prefix}/xw1"], name=f"{prefix}/in/MatMul"),
            helper.make_node("Add", bias_inputs, [f"{prefix}/h"], name=f"{prefix}/in/Add"),
        ]
        for node in sorted(block.activation, key=lambda n: position[n.name]):
            if node.op_type == "Constant":  # its value is shared with the main branch
                continue
            for out in node.output:
                renamed[out] = f"{prefix}{out}"
            clone = helper.make_node(
                node.op_type, [renamed.get(n, n) for n in node.input], [renamed[o] for o in node.output],
                name=f"{prefix}{node.name}", domain=node.domain,
            )
            clone.attribute.extend(node.attribute)
            branch.append(clone)
        total = block.out_product.output[0]
        main = f"{total}/main"
        block.out_product.output[0] = main
        branch += [
            helper.make_node("MatMul", [renamed[block.out_product.input[0]], f"{prefix}/w2"], [f"{prefix}/y"], name=f"{prefix}/out/MatMul"),
            helper.make_node("Add", [main, f"{prefix}/y"], [total], name=f"{prefix}/sum"),
        ]
        inserted[block.out_product.name] = branch
        keep += [node.name for node in branch]
    nodes = []
    for node in list(graph.node):
        nodes.append(node)
        nodes.extend(inserted.get(node.name, []))
    del graph.node[:]
    graph.node.extend(nodes)
    return keep


#: SmoothQuant's migration strength: how much of an input channel's range moves into the weight's row
SMOOTHING_ALPHA = 0.6


def product_inputs(graph: Any, skip: set[str]) -> dict[str, list[Any]]:
    """The products with a 2-D weight matrix of their own whose input is smoothed, by input tensor: every
    ``MatMul`` but those named in ``skip`` and the feed-forward output projections (split by
    :func:`split_outlier_channels`, or kept fp32)."""
    weights = {init.name: init for init in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        if node.op_type != "MatMul" or node.name in skip or node.input[1] not in weights or uses[node.input[1]] != 1:
            continue
        if _OUT_PROJECTION.search(node.name) and "/attention/" not in node.name:
            continue
        if len(weights[node.input[1]].dims) != 2:
            continue
        found.setdefault(node.input[0], []).append(node)
    return found


def product_input_maxima(model: Any, tensors: list[str], feeds: list[dict[str, np.ndarray]], probe: Path) -> dict[str, np.ndarray]:
    """Per tensor of ``tensors`` (inputs of products in ``model``, an ``onnx.ModelProto`` left as it is), the largest
    magnitude of each last-axis channel over runs on ``feeds`` (one unpadded text each), read from a copy of the
    graph that returns those tensors, written to ``probe`` for the run and removed after it."""
    import onnx
    import onnxruntime as ort

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in tensors)
    onnx.save(copy, str(probe))
    del copy
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        session = ort.InferenceSession(str(probe), options, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        maxima: dict[str, np.ndarray] = {}
        for feed in feeds:
            for name, value in zip(tensors, session.run(tensors, {k: v for k, v in feed.items() if k in names}), strict=True):
                peak = np.abs(value.reshape(-1, value.shape[-1])).max(0)
                maxima[name] = peak if name not in maxima else np.maximum(maxima[name], peak)
        return maxima
    finally:
        probe.unlink(missing_ok=True)


def calibration_feeds(tokenizer: Any, texts: list[str], max_length: int = 128) -> list[dict[str, np.ndarray]]:
    """One unpadded int64 feed per text (``input_ids``, ``attention_mask``, ``token_type_ids``)."""
    feeds = []
    for text in texts:
        enc = tokenizer([text], truncation=True, max_length=max_length, return_tensors="np")
        ids = enc["input_ids"].astype(np.int64)
        feeds.append({"input_ids": ids, "attention_mask": enc["attention_mask"].astype(np.int64),
                      "token_type_ids": np.zeros_like(ids)})
    return feeds


def smooth_product_inputs(model: Any, maxima: dict[str, np.ndarray], alpha: float = SMOOTHING_ALPHA,
                          skip: set[str] | None = None) -> int:
    """Moves the outlier channels of each weight product's input into its weight (SmoothQuant: Xiao et al.,
    2023, "SmoothQuant: Accurate and Efficient Post-Training Quantization for Large Language Models"):

        x W = (x diag(s)^-1) (diag(s) W),    s_j = max|x_j|^alpha / max|W_j|^(1 - alpha)

    ``max|x_j|`` is channel ``j``'s calibration maximum (``maxima``, per input tensor) and ``max|W_j|`` the
    largest entry of row ``j`` over every product that reads the tensor (the queries, keys and values share
    one ``s``). The residual stream's few large dimensions no longer set the input's per-tensor 8-bit scale,
    and the per-column weight scales take a share of them. Exact in fp32; ``model`` (an
    ``onnx.ModelProto``) is changed in place: one ``Mul`` per input tensor, the weights' rows rescaled.
    Returns how many input tensors were smoothed."""
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    before: dict[str, Any] = {}
    for n_input, (tensor, products) in enumerate(product_inputs(graph, skip or set()).items()):
        peak = maxima.get(tensor)
        matrices = [numpy_helper.to_array(weights[p.input[1]]) for p in products]
        if peak is None or any(w.shape[0] != peak.shape[0] for w in matrices):
            continue
        row_peak = np.max([np.abs(w).max(1) for w in matrices], axis=0)
        scale = (np.maximum(peak, 1e-5) ** alpha / np.maximum(row_peak, 1e-5) ** (1 - alpha)).astype(np.float32)
        name = f"/smoothed/{n_input}"
        graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), f"{name}/inverse_scale"))
        before[products[0].name] = helper.make_node("Mul", [tensor, f"{name}/inverse_scale"], [name], name=f"{name}/Mul")
        for product, w in zip(products, matrices, strict=True):
            weights[product.input[1]].CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w * scale[:, None]), product.input[1]))
            product.input[0] = name
    nodes = []
    for node in list(graph.node):
        if node.name in before:
            nodes.append(before[node.name])
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return len(before)
