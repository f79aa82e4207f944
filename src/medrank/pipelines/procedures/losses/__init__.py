"""Losses of the procedure-normalisation pipeline (one per file).

=========================  =====================================================================
``MultiTaskTripletLoss``   MTCG: Euclidean triplet loss (margin 1, k_n negatives) + count-head CE
``CrossEncoderBCELoss``    KAR: binary cross-entropy of (mention, candidate) logits — the shared
                           loss from :mod:`medrank.losses`, re-exported
``ListNetLoss``            KAR's optional listwise term (``kar_listwise_weight``, not in the
                           paper): ListNet over each mention's candidates — the shared
                           loss from :mod:`medrank.losses`, re-exported
=========================  =====================================================================
"""

from medrank.losses.cross_encoder_bce import CrossEncoderBCELoss
from medrank.losses.listnet import ListNetLoss
from medrank.pipelines.procedures.losses.multitask_triplet import MultiTaskTripletLoss, count_class_weights

__all__ = ["CrossEncoderBCELoss", "ListNetLoss", "MultiTaskTripletLoss", "count_class_weights"]
