"""Models shared by more than one pipeline."""

from medrank.models.bi_encoder import BiEncoder, BiEncoderView
from medrank.models.pair_classifier import load_pair_classifier

__all__ = ["BiEncoder", "BiEncoderView", "load_pair_classifier"]
