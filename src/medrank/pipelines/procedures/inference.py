"""What the procedure pipeline serves: the end-to-end :class:`ProcedureNormalizer` of a KAR / fusion run, and which\nmentions without a Han character it reads (abbreviations written alone)."""

from medrank.pipelines.procedures.abbreviations import abbreviations_of_data, reads_as_abbreviation
from medrank.pipelines.procedures.artefacts import NORMALIZER_MARKER
from medrank.pipelines.procedures.normalizer import ProcedureNormalizer

__all__ = ["NORMALIZER_MARKER", "ProcedureNormalizer", "abbreviations_of_data", "reads_as_abbreviation"]
