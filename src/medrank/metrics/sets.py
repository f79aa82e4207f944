"""Set-based metrics (answers that are sets of terms) and binary classification."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np


def _as_set(value: object, what: str) -> frozenset[str]:
    if isinstance(value, str | bytes):
        raise TypeError(f"{what} must be a set of terms, got the string {value!r} (wrap it: {{{value!r}}})")
    if not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a set of terms, got {type(value).__name__}")
    return frozenset(value)


def _paired_sets(
    gold: Sequence[Iterable[str]], predicted: Sequence[Iterable[str]]
) -> list[tuple[frozenset[str], frozenset[str]]]:
    if isinstance(gold, str | bytes) or isinstance(predicted, str | bytes):
        raise TypeError("gold and predicted must be sequences of term sets, not strings")
    gold_l, pred_l = list(gold), list(predicted)
    if len(gold_l) != len(pred_l):
        raise ValueError(f"gold has {len(gold_l)} examples but predicted has {len(pred_l)}")
    if not gold_l:
        raise ValueError("no examples to evaluate (gold and predicted are empty)")
    return [
        (_as_set(g, f"gold[{i}]"), _as_set(p, f"predicted[{i}]"))
        for i, (g, p) in enumerate(zip(gold_l, pred_l, strict=True))
    ]


def exact_set_accuracy(gold: Sequence[set[str]], predicted: Sequence[set[str]]) -> float:
    """Fraction of examples whose predicted term set equals the gold set exactly.

    Order and duplicates inside an example do not matter; a partial overlap scores 0.
    """
    pairs = _paired_sets(gold, predicted)
    return sum(g == p for g, p in pairs) / len(pairs)


def _safe_div(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _safe_div(2.0 * precision * recall, precision + recall)


def set_prf(
    gold: Sequence[set[str]],
    predicted: Sequence[set[str]],
    average: Literal["micro", "macro"] = "micro",
) -> dict[str, float]:
    """Precision, recall and F1 of predicted term sets against gold term sets.

    ``average="micro"`` pools the counts over all examples:
    ``P = sum|g ∩ p| / sum|p|``, ``R = sum|g ∩ p| / sum|g|``, ``F1 = 2PR / (P + R)``.

    ``average="macro"`` (example-based) averages per-example ``P_i = |g ∩ p| / |p|``,
    ``R_i = |g ∩ p| / |g|`` and ``F1_i`` over examples; F1 is the mean of ``F1_i``
    (not the harmonic mean of the macro P and R). An example whose gold and predicted
    sets are both empty scores 1 on all three.

    A zero denominator gives 0 (``P`` with no prediction at all, etc.).
    """
    pairs = _paired_sets(gold, predicted)
    if average == "micro":
        tp = sum(len(g & p) for g, p in pairs)
        n_pred = sum(len(p) for _, p in pairs)
        n_gold = sum(len(g) for g, _ in pairs)
        precision, recall = _safe_div(tp, n_pred), _safe_div(tp, n_gold)
        return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}
    if average == "macro":
        ps, rs, fs = [], [], []
        for g, p in pairs:
            if not g and not p:
                ps.append(1.0)
                rs.append(1.0)
                fs.append(1.0)
                continue
            tp = len(g & p)
            pi, ri = _safe_div(tp, len(p)), _safe_div(tp, len(g))
            ps.append(pi)
            rs.append(ri)
            fs.append(_f1(pi, ri))
        n = len(pairs)
        return {"precision": sum(ps) / n, "recall": sum(rs) / n, "f1": sum(fs) / n}
    raise ValueError(f"average must be 'micro' or 'macro', got {average!r}")


def evaluate_sets(
    gold: Sequence[set[str]],
    predicted: Sequence[set[str]],
    split_by_size: bool = True,
) -> dict[str, float]:
    """Exact-set accuracy overall and, for terminology normalisation, by gold-set size.

    Returns ``{"total": acc, "n_total": n}`` and, with ``split_by_size``, also
    ``"single"``/``"n_single"`` (gold set of exactly one term) and ``"multi"``/``"n_multi"``
    (gold set of two or more terms). An empty subset has accuracy ``nan`` (rendered
    as ``-`` by :func:`to_markdown_table`). With ``split_by_size`` every gold set must be
    non-empty (an empty one is neither single nor multi): ``ValueError`` otherwise.
    """
    pairs = _paired_sets(gold, predicted)
    correct = [g == p for g, p in pairs]
    out: dict[str, float] = {"total": sum(correct) / len(pairs), "n_total": len(pairs)}
    if not split_by_size:
        return out
    single: list[bool] = []
    multi: list[bool] = []
    for i, ((g, _), ok) in enumerate(zip(pairs, correct, strict=True)):
        if not g:
            raise ValueError(f"gold[{i}] is empty: it is neither a single- nor a multi-term answer")
        (single if len(g) == 1 else multi).append(ok)
    out["single"] = sum(single) / len(single) if single else math.nan
    out["n_single"] = len(single)
    out["multi"] = sum(multi) / len(multi) if multi else math.nan
    out["n_multi"] = len(multi)
    return out


def _as_binary(values: Sequence[int | bool], what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of 0/1 labels, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{what} must hold 0/1 (or bool) labels, got dtype {arr.dtype}")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        raise ValueError(f"{what} must hold only 0/1 labels; found {arr[bad][:5].tolist()}")
    return arr.astype(bool)


def binary_prf(y_true: Sequence[int | bool], y_pred: Sequence[int | bool]) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of binary predictions (positive class = 1/True).

    A zero denominator (no predicted or no true positives) gives 0.
    """
    t, p = _as_binary(y_true, "y_true"), _as_binary(y_pred, "y_pred")
    if len(t) != len(p):
        raise ValueError(f"y_true has {len(t)} labels but y_pred has {len(p)}")
    if len(t) == 0:
        raise ValueError("no labels to evaluate")
    tp = int(np.sum(t & p))
    precision = _safe_div(tp, int(p.sum()))
    recall = _safe_div(tp, int(t.sum()))
    return {
        "accuracy": float(np.mean(t == p)),
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
    }
