"""File names that mark a saved history re-ranker, one per model kind (read by :func:`medrank.load`)."""

GLOBAL_RERANKER_MARKER = "global_reranker.json"
CROSS_ENCODER_MARKER = "history_cross_encoder.json"
BI_ENCODER_MARKER = "history_bi_encoder.json"
#: any of them marks a re-ranker folder (in the run folder or its ``model/``)
RERANKER_MARKERS = (GLOBAL_RERANKER_MARKER, CROSS_ENCODER_MARKER, BI_ENCODER_MARKER)
