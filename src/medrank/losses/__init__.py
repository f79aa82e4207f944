"""Losses used by more than one pipeline, one class per file (formula and citation in each docstring).

==============================  ==============================  ========================================================
``TripletLoss``                 symptom, procedures (MTCG)      triplet margin, Schroff et al. 2015
``CrossEncoderBCELoss``         symptom, procedures (KAR)       pointwise BCE, Nogueira & Cho 2019
``ListNetLoss``                 history, procedures (KAR)       listwise top-one CE, Cao et al. 2007
``ListwiseSoftmaxLoss``         passages, history               softmax CE over one positive + negatives
``SynonymMarginalizationLoss``  symptom (BioSyn)                −log Σ softmax over gold-id candidates, Sung et al. 2020
==============================  ==============================  ========================================================

A loss only one pipeline uses stays in that pipeline's ``losses/`` package.
"""

from medrank.losses.cross_encoder_bce import CrossEncoderBCELoss
from medrank.losses.listnet import ListNetLoss
from medrank.losses.listwise_softmax import ListwiseSoftmaxLoss
from medrank.losses.synonym_marginalization import SynonymMarginalizationLoss
from medrank.losses.triplet import TripletLoss

__all__ = ["CrossEncoderBCELoss", "ListNetLoss", "ListwiseSoftmaxLoss", "SynonymMarginalizationLoss", "TripletLoss"]
