"""Symptom / concept detection with Bi-HardNCE (Zhang et al., KDD 2022) and its baselines.

* :mod:`~medrank.pipelines.symptom.losses` — NCE-forward, NCE-backward, Bi-NCE, Bi-HardNCE,
  triplet, contrastive, Sent-BERT softmax, cross-encoder BCE (one file each);
* :mod:`~medrank.training.miners` — Top-K, HigherThanTrue, HD-sampling, random;
* :mod:`~medrank.pipelines.symptom.efn` — E-FN threshold calibration;
* :mod:`~medrank.pipelines.symptom.data` — positive pairs and batches without in-batch false negatives;
* :mod:`~medrank.pipelines.symptom.model` — the cross-encoder baseline (the bi-encoder is :mod:`medrank.models`);
* :mod:`~medrank.pipelines.symptom.task` — one run's data, model, loss, miner and batches;
* :mod:`~medrank.pipelines.symptom.training` — the mine → train → re-mine loop on the shared Trainer;
* :mod:`~medrank.pipelines.symptom.evaluation` — the detection threshold β;
* :mod:`~medrank.pipelines.symptom.baselines` — the cross-encoder re-ranking baseline;
* :mod:`~medrank.pipelines.symptom.inference` — query → top-5 terms, optionally thresholded with β;
* :mod:`~medrank.pipelines.symptom.sets` — the set of terms a complaint names, with spans and probabilities;
* :mod:`~medrank.pipelines.symptom.synthetic` — synthetic English complaints from HPO layperson synonyms, and
  the set decision an English run serves fitted on them;
* :mod:`~medrank.pipelines.symptom.reranker` / :mod:`~medrank.pipelines.symptom.reranker_training` — a
  cross-encoder that re-scores each span's top hits of a trained English run (task ``symptom-reranker``);
* :mod:`~medrank.pipelines.symptom.ensemble` — the mean of several trained English runs' cosines, served as one run
  (task ``symptom-ensemble``);
* :mod:`~medrank.pipelines.symptom.biosyn` — English concept normalisation with BioSyn (sparse + dense
  scores, synonym marginalisation, candidates re-mined every epoch), ``medrank train`` task ``biosyn``.
"""

from typing import Any

from medrank.models import BiEncoder
from medrank.pipelines.symptom import biosyn_cli  # noqa: F401  (registers the ``biosyn`` trainer)
from medrank.pipelines.symptom.config import SymptomConfig
from medrank.pipelines.symptom.data import PairData, build_pair_data, no_duplicate_batches
from medrank.pipelines.symptom.efn import AlphaSchedule, FalseNegativeElimination, calibrate_threshold
from medrank.pipelines.symptom.inference import SymptomDetector
from medrank.pipelines.symptom.model import CrossEncoder
from medrank.training.miners import (
    HDSamplingMiner,
    HigherThanTrueMiner,
    RandomMiner,
    TopKMiner,
    mine_candidates,
)

__all__ = [
    "AlphaSchedule",
    "BiEncoder",
    "CrossEncoder",
    "FalseNegativeElimination",
    "HDSamplingMiner",
    "HigherThanTrueMiner",
    "PairData",
    "RandomMiner",
    "SymptomConfig",
    "SymptomDetector",
    "TopKMiner",
    "build_pair_data",
    "calibrate_threshold",
    "mine_candidates",
    "no_duplicate_batches",
]


def train_symptom(*args: Any, **kwargs: Any) -> dict[str, Any]:  # a thin lazy re-export
    """See :func:`medrank.pipelines.symptom.training.train_symptom`."""
    from medrank.pipelines.symptom.training import train_symptom as _train

    return _train(*args, **kwargs)
