"""Neural and linear pair matchers (STMT and its baselines)."""

from medrank.pipelines.similar.models.esim import ESIM
from medrank.pipelines.similar.models.layers import PairHead, SinusoidalPositions, masked_max, masked_mean
from medrank.pipelines.similar.models.linear import LogisticRegression, TfidfFeaturizer
from medrank.pipelines.similar.models.siamese import BiLSTMEncoder, SiameseMatcher, SiameseTransformerEncoder
from medrank.pipelines.similar.models.stmt import STMT, STMTEncoder, STMTLayer

__all__ = [
    "ESIM",
    "STMT",
    "BiLSTMEncoder",
    "LogisticRegression",
    "PairHead",
    "STMTEncoder",
    "STMTLayer",
    "SiameseMatcher",
    "SinusoidalPositions",
    "TfidfFeaturizer",
    "SiameseTransformerEncoder",
    "masked_max",
    "masked_mean",
]
