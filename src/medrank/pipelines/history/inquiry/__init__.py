"""Symptom inquiry: which question to ask next, the differential, and when to stop.

A knowledge-base first stage (expected information gain over a naive-Bayes posterior fitted on
training patients) proposes questions about findings not yet established; a trained history
re-ranker may reorder them given the dialogue. English uses the DDXPlus knowledge base, Chinese
the DXY symptom statistics. ``load_engine("en" | "zh")`` fits (or reloads) one; see :class:`InquiryEngine`.
The English differential also weighs a condition outside its collection (:mod:`.outside`).
"""

from medrank.pipelines.history.inquiry.build import engine_prepared, load_engine, prepare_engines
from medrank.pipelines.history.inquiry.engine import (
    Calibration,
    Finding,
    InquiryEngine,
    ProposedQuestion,
    RankedCondition,
)
from medrank.pipelines.history.inquiry.findings import EN_YES_NO_QUESTION
from medrank.pipelines.history.inquiry.kb import InquiryInputError

__all__ = ["Calibration", "EN_YES_NO_QUESTION", "Finding", "engine_prepared", "InquiryEngine", "InquiryInputError", "ProposedQuestion", "RankedCondition",
           "load_engine", "prepare_engines"]
