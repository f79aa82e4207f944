"""What the procedure pipeline serves: the end-to-end :class:`ProcedureNormalizer` of a KAR / fusion run."""

from medrank.pipelines.procedures.artefacts import NORMALIZER_MARKER
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer

__all__ = ["NORMALIZER_MARKER", "ProcedureNormalizer"]
