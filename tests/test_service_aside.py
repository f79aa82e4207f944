"""Side processes of a first build: the largest knowledge base's entries encoded into the embedding cache
beside the build, found there by the build; never started where nothing would be gained."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_tiny_bert

VOCAB_TSV = "code\tname\nA00\t霍乱\nA00.0\t霍乱\nB01\t足骨折,未特指\nC02\t蛔虫病\nD03\t高血压\n"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from medrank.encoders import TransformerEncoder
    from medrank.service.settings import ServiceSettings

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    (tmp_path / "data" / "chip-cdn").mkdir(parents=True)
    (tmp_path / "data" / "chip-cdn" / "icd10_beijing_v601.tsv").write_text(VOCAB_TSV, encoding="utf-8")
    model, tok = make_tiny_bert(seed=5)
    TransformerEncoder(model, tok, pooling="mean", name="tiny").save(tmp_path / "tiny")
    settings = ServiceSettings(data_root=tmp_path / "data", state_dir=tmp_path / "state", backend="torch",
                               encoder_zh=str(tmp_path / "tiny"), models_dir=tmp_path / "runs", kbs=("chip-cdn",))
    return settings


def _settings_json(settings) -> str:
    return json.dumps({"data_root": str(settings.data_root), "state_dir": str(settings.state_dir), "backend": settings.backend,
                       "encoder_en": settings.encoder_en, "encoder_zh": settings.encoder_zh})


def test_entries_encoded_aside_are_what_the_build_finds_cached(setup) -> None:
    from medrank.service.build import Builder, encode_entries

    encode_entries(_settings_json(setup), "chip-cdn")
    b = Builder(setup, show_progress=False)
    enc = b.build_encoder("zh", track=False)
    calls: list[list[str]] = []
    inner = enc.encoder._encode
    enc.encoder._encode = lambda texts, kind, bs, prog: calls.append(list(texts)) or inner(texts, kind, bs, prog)
    kb = b.knowledge_base("chip-cdn")
    assert len(kb.concepts) == 4
    fresh = enc.encode(["霍乱", "足骨折,未特指", "蛔虫病", "高血压"], kind="passage")
    assert calls == [] and np.allclose(np.linalg.norm(fresh, axis=1), 1, atol=1e-5)


def test_the_side_process_runs_and_the_build_waits_for_it(setup) -> None:
    from medrank.service.build import Builder

    b = Builder(setup, show_progress=False)
    b.encode_aside("chip-cdn")
    proc, log_file = b._aside["encode-chip-cdn"]
    b.knowledge_base("chip-cdn")  # waits for the side process first
    assert "encode-chip-cdn" not in b._aside and proc.returncode == 0, log_file.read_text(encoding="utf-8")
    # a second build finds the knowledge base built: nothing to do aside
    again = Builder(setup, show_progress=False)
    again.encode_aside("chip-cdn")
    assert again._aside == {}


def test_nothing_is_encoded_aside_for_a_lexical_or_trained_base(setup, tmp_path: Path) -> None:
    from dataclasses import replace

    from medrank.service.build import Builder

    lexical = Builder(replace(setup, kb_methods={"chip-cdn": "bm25"}), show_progress=False)
    lexical.encode_aside("chip-cdn")
    trained_dir = tmp_path / "trained"
    trained_dir.mkdir()
    trained = Builder(replace(setup, model_paths={"symptoms-zh": trained_dir}), show_progress=False)
    trained.encode_aside("chip-cdn")
    assert lexical._aside == {} and trained._aside == {}


def test_the_build_gives_a_core_to_an_encode_aside_and_takes_it_back(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    import medrank.config
    from medrank.config import default_threads, requested_threads, set_threads
    from medrank.service.build import Builder

    monkeypatch.setattr(medrank.config, "_requested_threads", requested_threads())  # restored after the test
    before = requested_threads() or default_threads()
    set_threads(2)
    b = Builder(setup, show_progress=False)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        b._aside["encode-chip-cdn"] = (sleeper, setup.state_dir / "aside.log")
        b.share_cores()
        assert requested_threads() == 1
        b.share_cores()  # still running: unchanged
        assert requested_threads() == 1
    finally:
        sleeper.kill()
        sleeper.wait()
    b.share_cores()
    assert requested_threads() == 2
    set_threads(before)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_side_process_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    child = ("from medrank.service.build import follow_parent; follow_parent(); "
             "open(sys.argv[1], 'w').write('ready'); import time; time.sleep(120)")
    parent = ("import subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', 'import sys; ' + {child!r}, sys.argv[1]]); "
              "print(p.pid, flush=True); time.sleep(60)")
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", parent, str(ready)], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert ready.exists()
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with __import__("contextlib").suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    else:
        os.kill(pid, 9)
        pytest.fail("the side process outlived its parent")


def test_the_engines_are_tuned_aside_only_when_their_cache_lacks_them(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    import medrank.pipelines.history.inference as inference
    from medrank.service.build import Builder

    b = Builder(setup, show_progress=False)
    started: list[str] = []
    monkeypatch.setattr(b, "_start_aside", lambda what, *args: started.append(what))
    monkeypatch.setattr(inference, "engine_prepared", lambda lang, root: True)
    b.prepare_engines_aside()
    assert started == []  # a later start: both engines' files are cached
    monkeypatch.setattr(inference, "engine_prepared", lambda lang, root: lang == "en")
    b.prepare_engines_aside()
    assert started == ["inquiry-engines"]

    def unreadable(lang, root):
        raise FileNotFoundError("no ddxplus here")

    monkeypatch.setattr(inference, "engine_prepared", unreadable)
    b.prepare_engines_aside()  # the build reports missing data itself, at the differential step
    assert started == ["inquiry-engines"]
