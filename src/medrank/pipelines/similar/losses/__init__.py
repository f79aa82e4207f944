"""Losses of the similar-question pipeline, one per file."""

from medrank.pipelines.similar.losses.am_softmax import AMSoftmaxLoss
from medrank.pipelines.similar.losses.pair_cross_entropy import PairCrossEntropyLoss
from medrank.pipelines.similar.losses.softmax import SoftmaxClassificationLoss

__all__ = ["AMSoftmaxLoss", "PairCrossEntropyLoss", "SoftmaxClassificationLoss"]
