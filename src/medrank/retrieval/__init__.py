"""Concept retrieval shared by the app, the pipelines and the service.

* :mod:`~medrank.retrieval.concept` — :class:`ConceptRetriever` (BM25 / dense / hybrid over a
  concept list) and :func:`evaluate_retriever`;
* :mod:`~medrank.retrieval.concept_data` — the concept-normalisation datasets and their
  default encoders and languages.
"""
