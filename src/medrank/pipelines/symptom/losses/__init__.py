"""Losses for symptom / concept detection: Bi-HardNCE (Zhang et al., KDD 2022) and its baselines.

One loss per file, each documenting its inputs, shapes and citation:

========================  =====================================================================
``NCEForwardLoss``        InfoNCE query → terms (in-batch + optional hard-negative terms)
``NCEBackwardLoss``       InfoNCE term → queries (in-batch + optional hard-negative queries)
``BiNCELoss``             forward + backward
``BiHardNCELoss``         Bi-NCE with required hard-negative queries and terms
``TripletLoss``           triplet margin (baseline)
``ContrastiveLoss``       Hadsell contrastive (baseline)
``SoftmaxClassifierLoss`` Sent-BERT softmax over ``[u, v, |u - v|]`` (baseline)
``CrossEncoderBCELoss``   cross-encoder binary cross-entropy (baseline)
========================  =====================================================================
"""

from medrank.losses.cross_encoder_bce import CrossEncoderBCELoss
from medrank.losses.triplet import TripletLoss
from medrank.pipelines.symptom.losses.bi_hard_nce import BiHardNCELoss
from medrank.pipelines.symptom.losses.bi_nce import BiNCELoss
from medrank.pipelines.symptom.losses.contrastive import ContrastiveLoss
from medrank.pipelines.symptom.losses.nce_backward import NCEBackwardLoss
from medrank.pipelines.symptom.losses.nce_forward import NCEForwardLoss
from medrank.pipelines.symptom.losses.softmax_classifier import SoftmaxClassifierLoss

__all__ = [
    "BiHardNCELoss",
    "BiNCELoss",
    "ContrastiveLoss",
    "CrossEncoderBCELoss",
    "NCEBackwardLoss",
    "NCEForwardLoss",
    "SoftmaxClassifierLoss",
    "TripletLoss",
]
