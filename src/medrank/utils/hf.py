"""Hugging Face ``transformers`` helpers.

``transformers`` 5 draws a "Loading weights" progress bar on every ``from_pretrained``. Our models
load in well under a second, so every CLI command and every service start printed a finished bar
(one per model) between its own lines. :func:`quiet_weight_loading` hides that one bar while it is
active and leaves every other bar alone: a first download from a hub still shows its progress, and
a ``tqdm`` hook a user installed keeps working (it is called for every bar, the hidden one with
``disable=True``). ``transformers`` has one hook per process, so while any thread is inside the block
the bar is hidden in every thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

LOADING_BAR = "Loading weights"

_lock = threading.Lock()
_depth = 0
_previous: Callable[..., Any] | None = None


def _hide_loading_bar(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs.get("desc") == LOADING_BAR:
        kwargs = {**kwargs, "disable": True}
    # the hook that was installed before ours (a user's) still sees every bar
    return _previous(factory, args, kwargs) if _previous is not None else factory(*args, **kwargs)


@contextmanager
def quiet_weight_loading() -> Iterator[None]:
    """Hide ``transformers``' "Loading weights" bar inside the block (nestable, thread-safe)."""
    global _depth, _previous
    from transformers.utils import logging as hf_logging

    set_hook = getattr(hf_logging, "set_tqdm_hook", None)
    if set_hook is None:  # a transformers without tqdm hooks: nothing to hide through
        yield
        return
    with _lock:
        if _depth == 0:
            _previous = set_hook(_hide_loading_bar)  # set_tqdm_hook returns the hook it replaced
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                current = set_hook(_previous)
                if current is not _hide_loading_bar:  # someone installed another hook meanwhile: theirs stays
                    set_hook(current)
                _previous = None


def keep_first_layers(model: Any, layers: int | None) -> Any:
    """Keep the first ``layers`` transformer blocks of a BERT-style ``transformers`` model (in place).

    The blocks are ``model.base_model.encoder.layer``; the config's ``num_hidden_layers`` is set to
    match, so ``save_pretrained`` writes a model that ``from_pretrained`` reloads with ``layers`` blocks.
    ``None`` keeps them all. The compute of one pass grows with the number of blocks, so a shallower
    copy of a pre-trained encoder is the cheap way to a faster re-ranker that is still fine-tuned from
    pre-trained weights (its lower blocks).
    """
    if layers is None:
        return model
    blocks = getattr(getattr(getattr(model, "base_model", model), "encoder", None), "layer", None)
    if blocks is None:
        raise ValueError(f"{type(model).__name__} has no encoder.layer blocks to truncate")
    if not isinstance(layers, int) or isinstance(layers, bool) or not 1 <= layers <= len(blocks):
        raise ValueError(f"layers must be an integer from 1 to the base model's {len(blocks)} blocks, got {layers!r}")
    del blocks[layers:]
    model.config.num_hidden_layers = layers
    return model
