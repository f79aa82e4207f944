"""medrank: medical retrieval and ranking on one shared core."""

from medrank.loading import artefact_kind, load
from medrank.records import (
    Concept,
    ConceptDataset,
    Dialogue,
    DialogueTurn,
    Document,
    Passage,
    Qrels,
    Query,
    Ranking,
    Run,
)

__version__ = "0.1.0"

__all__ = [
    "Concept",
    "ConceptDataset",
    "Dialogue",
    "DialogueTurn",
    "Document",
    "Passage",
    "Qrels",
    "Query",
    "Ranking",
    "Run",
    "__version__",
    "artefact_kind",
    "load",
]
