"""quiet_weight_loading hides transformers' "Loading weights" bar and nothing else."""

from __future__ import annotations

import threading

import pytest
from transformers.utils import logging as hf_logging

from medrank.utils.hf import LOADING_BAR, quiet_weight_loading


def bar_disabled(desc: str) -> bool:
    bar = hf_logging.tqdm(range(3), desc=desc)
    try:
        return bool(getattr(bar, "disable", True))  # EmptyTqdm (bars switched off globally) has no 'disable'
    finally:
        if hasattr(bar, "close"):
            bar.close()


@pytest.fixture(autouse=True)
def bars_on_and_hook_restored():
    """Progress bars on for the test; the process's bar setting and tqdm hook as they were afterwards."""
    was_on = hf_logging.is_progress_bar_enabled()
    hook = hf_logging.set_tqdm_hook(None)
    hf_logging.enable_progress_bar()
    yield
    hf_logging.set_tqdm_hook(hook)
    if not was_on:
        hf_logging.disable_progress_bar()


def test_hides_only_the_loading_bar_and_restores_the_users_hook() -> None:
    seen: list[str] = []

    def user_hook(factory, args, kwargs):
        seen.append(kwargs.get("desc"))
        return factory(*args, **kwargs)

    hf_logging.set_tqdm_hook(user_hook)
    try:
        assert not bar_disabled(LOADING_BAR)
        with quiet_weight_loading():
            with quiet_weight_loading():  # nested: the outer block still hides it after the inner one ends
                assert bar_disabled(LOADING_BAR)
            assert bar_disabled(LOADING_BAR)
            assert not bar_disabled("Downloading")  # a hub download keeps its progress bar
        assert not bar_disabled(LOADING_BAR)
        assert hf_logging._tqdm_hook is user_hook
        assert seen == [LOADING_BAR, LOADING_BAR, LOADING_BAR, "Downloading", LOADING_BAR]
    finally:
        hf_logging.set_tqdm_hook(None)


def test_a_hook_installed_inside_the_block_is_kept() -> None:
    def theirs(factory, args, kwargs):
        return factory(*args, **kwargs)

    with quiet_weight_loading():
        hf_logging.set_tqdm_hook(theirs)
    assert hf_logging._tqdm_hook is theirs
    hf_logging.set_tqdm_hook(None)


def test_threads_leave_the_hook_as_they_found_it() -> None:
    before = hf_logging._tqdm_hook
    barrier = threading.Barrier(4)

    hidden: list[bool] = []

    def load() -> None:
        with quiet_weight_loading():
            barrier.wait(timeout=10)  # all four inside at once
            hidden.append(bar_disabled(LOADING_BAR))
            barrier.wait(timeout=10)  # none leaves before all have looked

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert hidden == [True] * 4 and hf_logging._tqdm_hook is before and not bar_disabled(LOADING_BAR)


def test_a_saved_model_loads_without_the_bar(tiny_encoder, tmp_path, capfd) -> None:
    from medrank.encoders import TransformerEncoder

    tiny_encoder.save(tmp_path / "enc")
    capfd.readouterr()
    TransformerEncoder(tmp_path / "enc")
    assert LOADING_BAR not in capfd.readouterr().err
