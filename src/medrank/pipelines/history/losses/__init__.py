"""Ranking losses for the history-taking re-rankers (one file each; shapes in ``_common``).

=====================  ===========  ==========================================================
``BCELoss``            pointwise    binary cross-entropy per candidate
``RankNetLoss``        pairwise     Burges et al. 2005
``LambdaLoss``         pairwise     NDCG-Loss2, Wang et al. 2018
``ListNetLoss``        listwise     Cao et al. 2007
``ListMLELoss``        listwise     Xia et al. 2008
``ApproxNDCGLoss``     listwise     Qin et al. 2010
``NeuralNDCGLoss``     listwise     Pobrotyn & Białobrzeski 2021
=====================  ===========  ==========================================================

All take ``(scores, labels, mask=None)`` with ``(B, N)`` tensors and return a scalar.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from medrank.losses.listnet import ListNetLoss
from medrank.pipelines.history.losses.approx_ndcg import ApproxNDCGLoss
from medrank.pipelines.history.losses.bce import BCELoss
from medrank.pipelines.history.losses.lambdaloss import LambdaLoss
from medrank.pipelines.history.losses.listmle import ListMLELoss
from medrank.pipelines.history.losses.neural_ndcg import NeuralNDCGLoss
from medrank.pipelines.history.losses.ranknet import RankNetLoss

LOSSES: dict[str, type[nn.Module]] = {
    "bce": BCELoss,
    "ranknet": RankNetLoss,
    "lambdaloss": LambdaLoss,
    "listnet": ListNetLoss,
    "listmle": ListMLELoss,
    "approx_ndcg": ApproxNDCGLoss,
    "neural_ndcg": NeuralNDCGLoss,
}


def make_loss(name: str, **kwargs: Any) -> nn.Module:
    """Instantiate a loss by its config name."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose from {sorted(LOSSES)}")
    return LOSSES[name](**kwargs)


__all__ = [
    "LOSSES",
    "ApproxNDCGLoss",
    "BCELoss",
    "LambdaLoss",
    "ListMLELoss",
    "ListNetLoss",
    "NeuralNDCGLoss",
    "RankNetLoss",
    "make_loss",
]
