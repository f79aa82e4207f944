"""File names that mark a saved procedure-normalisation run (read by :func:`medrank.load`)."""

#: the manifest of a KAR / fusion run a :class:`ProcedureNormalizer` loads
NORMALIZER_MARKER = "normalizer.json"
