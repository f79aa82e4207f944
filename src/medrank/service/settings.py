"""Service settings: where the data, models and built indexes live, and the request limits.

Every field can come from the environment (``MEDRANK_API_TOKEN``,
``MEDRANK_SERVICE_STATE``, ``MEDRANK_MODELS``, ``MEDRANK_STORE``,
``MEDRANK_REQUEST_TIMEOUT``) or from ``medrank serve`` options.

Trained checkpoints are looked up under ``models_dir`` (``$MEDRANK_MODELS``,
default ``./runs``, where ``medrank train`` writes) at these paths, unless
``model_paths`` names another folder for a pipeline:

=================  ============================================================
pipeline           default path under ``models_dir``
=================  ============================================================
``symptoms-zh``    ``symptom/cpu/chip-cdn-bi-hardnce-best-2l`` or ``symptom/cpu/chip-cdn-bi-hardnce`` (a Bi-HardNCE run: ``detector.json``)
``symptoms-en``    ``symptom/cpu/hpo-layperson-ensemble-4l-def-e5`` (a MiniLM and an e5-small run's mean), ``…-ensemble-4l-def`` (two MiniLM seeds' mean), ``…-bi-hardnce-best-4l-def``, ``…-best-2l-def`` or ``symptom/cpu/hpo-layperson-bi-hardnce`` (an ``hpo-layperson`` run: its ``index-hpo``)
``similar-zh``     ``similar/chip-sts/stmt`` (an STMT run: ``matcher/``)
``similar-en``     ``similar/medical-question-pairs/stmt``
``passages``       ``passages/index-all`` (a CDV sentence index) or ``passages/cdv`` (a CDV run)
``normalize``      ``procedures/fusion`` (KAR + learned fusion) or ``procedures/kar`` (a KAR run; both hold ``normalizer.json``)
``next-questions`` none: only ``--model next-questions=runs/history/<run>`` (the CPU-recipe re-rankers trail the first stage)
=================  ============================================================

A pipeline without a checkpoint serves its zero-shot / BM25 form and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from medrank.config import cache_dir

DEFAULT_MODEL_PATHS: dict[str, tuple[str, ...]] = {
    "symptoms-zh": ("symptom/cpu/chip-cdn-bi-hardnce-best-2l", "symptom/cpu/chip-cdn-bi-hardnce"),
    "symptoms-en": ("symptom/cpu/hpo-layperson-ensemble-4l-def-e5", "symptom/cpu/hpo-layperson-ensemble-4l-def",
                    "symptom/cpu/hpo-layperson-bi-hardnce-best-4l-def",
                    "symptom/cpu/hpo-layperson-bi-hardnce-best-2l-def", "symptom/cpu/hpo-layperson-bi-hardnce"),
    "similar-zh": ("similar/chip-sts/stmt",),
    "similar-en": ("similar/medical-question-pairs/stmt",),
    "passages": ("passages/index-all", "passages/cdv"),
    "normalize": ("procedures/fusion", "procedures/kar"),
    # No default for the history re-ranker: the CPU-recipe runs score below the first stage on validation
    # (bench/results/history_table.md), so the service keeps the first stage unless a run is named with
    # `medrank serve --model next-questions=PATH`.
    "next-questions": (),
}

#: knowledge bases ``medrank serve`` builds by default
DEFAULT_KBS = ("hpo", "icd10cm", "chip-cdn", "dxy", "procedures")


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None


@dataclass
class ServiceSettings:
    """Everything the app and the builder need; plain data so tests can construct it directly."""

    #: ``Authorization: Bearer <token>`` required on every API route when set (``$MEDRANK_API_TOKEN``)
    api_token: str | None = field(default_factory=lambda: os.environ.get("MEDRANK_API_TOKEN") or None)
    #: built indexes and knowledge bases (``$MEDRANK_SERVICE_STATE``, default ``$MEDRANK_CACHE/service``)
    state_dir: Path = field(default_factory=lambda: Path(os.environ.get("MEDRANK_SERVICE_STATE") or cache_dir() / "service"))
    #: where trained runs are looked up (``$MEDRANK_MODELS``, default ``./runs``)
    models_dir: Path = field(default_factory=lambda: Path(os.environ.get("MEDRANK_MODELS") or "runs"))
    #: explicit checkpoint folders per pipeline (overrides :data:`DEFAULT_MODEL_PATHS`)
    model_paths: dict[str, Path] = field(default_factory=dict)
    #: ``embedded:DIR`` or ``postgresql://…`` for the knowledge bases; ``None`` = medrank indexes in ``state_dir``
    store: str | None = field(default_factory=lambda: os.environ.get("MEDRANK_STORE") or None)
    #: dataset root (``None`` = ``$MEDRANK_DATA`` or ``../shared/data``)
    data_root: Path | None = None
    kbs: tuple[str, ...] = DEFAULT_KBS
    #: retrieval method per knowledge base (bm25 | dense | hybrid; default hybrid)
    kb_methods: dict[str, str] = field(default_factory=dict)
    encoder_en: str = "minilm"
    encoder_zh: str = "e5-small"
    #: how the encoders run: torch | torch-bf16 | onnx | onnx-int8, or auto = the fastest ONNX form whose vectors
    #: agree with torch's on a few sentences at start-up (torch when none does), with knowledge-base entries encoded
    #: by torch under bf16 autocast where the CPU has native bf16 and it agrees; ``medrank serve`` defaults to auto
    backend: str = field(default_factory=lambda: os.environ.get("MEDRANK_BACKEND") or "torch")
    #: request limits: body bytes, characters of one text, items of one list
    max_body_bytes: int = 64 * 1024
    max_text_chars: int = 2000
    max_list_items: int = 50
    max_k: int = 50
    #: seconds a request may run (504 after) and may wait for a worker (503 after)
    request_timeout_s: float = field(default_factory=lambda: _env_float("MEDRANK_REQUEST_TIMEOUT", 30.0))
    max_concurrency: int = 32
    #: coalesce concurrent query encodes into one forward pass (:mod:`medrank.service.batching`)
    batch_queries: bool = True
    #: the urgent-signs file (``$MEDRANK_URGENT_SIGNS``; ``None``: the one shipped with the package, written from public
    #: guidance and not reviewed by a clinician): which decided terms raise a crisis / emergency notice, and its text
    urgent_signs: Path | None = field(default_factory=lambda: Path(os.environ["MEDRANK_URGENT_SIGNS"])
                                      if os.environ.get("MEDRANK_URGENT_SIGNS") else None)
    #: log request paths, status and time only; never query strings or bodies (keep False in production)
    log_request_text: bool = False

    def __post_init__(self) -> None:
        import math

        if not (isinstance(self.request_timeout_s, int | float) and math.isfinite(self.request_timeout_s)
                and self.request_timeout_s > 0):
            raise ValueError(f"the request timeout must be a positive number of seconds, got {self.request_timeout_s!r}")
        if self.backend not in ("auto", "torch", "torch-bf16", "onnx", "onnx-int8"):
            raise ValueError(f"backend must be auto, torch, torch-bf16, onnx or onnx-int8, got {self.backend!r}")
        for name in ("max_concurrency", "max_body_bytes", "max_text_chars", "max_list_items", "max_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")

    def model_path(self, pipeline: str) -> Path | None:
        """The checkpoint folder of ``pipeline`` if one exists (explicit path first, then the defaults)."""
        if pipeline in self.model_paths:
            path = Path(self.model_paths[pipeline])
            if not path.exists():
                raise FileNotFoundError(f"model path for {pipeline!r} does not exist: {path}")
            return path
        for rel in DEFAULT_MODEL_PATHS.get(pipeline, ()):
            path = self.models_dir / rel
            if path.exists():
                return path
        return None
