"""Losses of the procedure-normalisation pipeline (one per file).

=========================  =====================================================================
``MultiTaskTripletLoss``   MTCG: Euclidean triplet loss (margin 1, k_n negatives) + count-head CE
``CrossEncoderBCELoss``    KAR: binary cross-entropy of (mention, candidate) logits — the shared
                           symptom-pipeline loss, re-exported (same formula, no copy)
=========================  =====================================================================
"""

from medrank.pipelines.procedures.losses.multitask_triplet import MultiTaskTripletLoss, count_class_weights
from medrank.pipelines.symptom.losses.cross_encoder_bce import CrossEncoderBCELoss

__all__ = ["CrossEncoderBCELoss", "MultiTaskTripletLoss", "count_class_weights"]
