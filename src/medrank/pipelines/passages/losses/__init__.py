"""Losses of the passage pipeline, one per file."""

from medrank.losses.listwise_softmax import ListwiseSoftmaxLoss
from medrank.pipelines.passages.losses.pseudo_huber import PseudoHuberLoss

__all__ = ["ListwiseSoftmaxLoss", "PseudoHuberLoss"]
