"""The passage and similar-question recipes as TrainingArgs dataclasses: the shipped configs keep their settings,
saved configs read back, bad keys and types are refused, and the TrainingArgs fields reach the trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medrank.pipelines.passages.config import CDVConfig, NeuralRerankerConfig, PassageCrossEncoderConfig
from medrank.pipelines.similar.config import SimilarConfig, resolve_config
from medrank.registry import read_config
from medrank.training import TrainingArgs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "configs" / "passages").glob("*.json")) + sorted((ROOT / "configs" / "similar").rglob("*.yaml"))
#: each shipped config's settings as the code before the dataclasses resolved them: the passage trainers'
#: ``{**DEFAULTS, **config}`` without ``task`` (``model`` set by the DSSM / KNRM task) and similar's
#: ``resolve_config``. A deliberate change to a shipped config changes its entry here too.
BEFORE: dict[str, dict[str, Any]] = json.loads((ROOT / "tests" / "fixtures" / "shipped_config_settings.json").read_text())
PASSAGE_RECIPES = {"cdv": CDVConfig, "passage-cross-encoder": PassageCrossEncoderConfig,
                   "passage-dssm": NeuralRerankerConfig, "passage-knrm": NeuralRerankerConfig}
#: keys renamed by the dataclasses
RENAMED = {"batch_docs": "batch_size", "queries_per_batch": "batch_size"}
#: keys the old code did not read from the config, with the value it used: the Trainer's scheduler it hard-coded,
#: the Trainer's default warm-up (used by "linear" only), data_root read with ``.get`` (absent = None), and no
#: thread setting in similar (None leaves the process's threads as they are)
ADDED = {
    "cdv": {"scheduler": "exponential", "warmup_ratio": 0.1, "data_root": None},
    "passage-cross-encoder": {"scheduler": "linear", "warmup_ratio": 0.1, "data_root": None},
    "passage-dssm": {"scheduler": "constant", "warmup_ratio": 0.1, "data_root": None},
    "passage-knrm": {"scheduler": "constant", "warmup_ratio": 0.1, "data_root": None},
    "similar": {"threads": None},
}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _resolve(path: Path) -> tuple[str, dict[str, Any]]:
    """(task, the settings the new code runs with) for one shipped config, JSON-normalised as saved."""
    config = read_config(path)
    task = config["task"]
    if task == "similar":
        settings = resolve_config(config)
    else:
        raw = {k: v for k, v in config.items() if k != "task"}
        if task in ("passage-dssm", "passage-knrm"):
            raw["model"] = task.split("-")[1]  # what the task's trainer sets
        settings = PASSAGE_RECIPES[task].from_dict(raw).to_dict()
    return task, json.loads(json.dumps(settings))


def test_every_shipped_config_has_its_former_settings_recorded() -> None:
    assert {_rel(p) for p in SHIPPED} == set(BEFORE)
    assert len(SHIPPED) >= 25


@pytest.mark.parametrize("path", SHIPPED, ids=_rel)
def test_shipped_config_loads_to_the_same_settings_as_before(path: Path) -> None:
    task, now = _resolve(path)
    before = {RENAMED.get(k, k): v for k, v in BEFORE[_rel(path)].items()}
    assert {k: now[k] for k in before} == before
    assert {k: v for k, v in now.items() if k not in before} == ADDED[task]


@pytest.mark.parametrize("path", SHIPPED, ids=_rel)
def test_saved_config_of_a_new_run_reads_back(path: Path) -> None:
    task, saved = _resolve(path)
    if task == "similar":
        assert resolve_config(saved) == saved
    else:
        assert PASSAGE_RECIPES[task].from_dict(saved).to_dict() == saved


def test_recipes_are_training_args() -> None:
    for cls in (CDVConfig, NeuralRerankerConfig, PassageCrossEncoderConfig, SimilarConfig):
        assert issubclass(cls, TrainingArgs)


def test_passage_config_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown cdv config keys: \['lstm_hiden'\]"):
        CDVConfig.from_dict({"lstm_hiden": 8})
    with pytest.raises(ValueError, match="cdv config: epochs must be an integer, got '3'"):
        CDVConfig.from_dict({"epochs": "3"})
    with pytest.raises(ValueError, match="cdv config: feature_cache must be a str or null, got 3"):
        CDVConfig.from_dict({"feature_cache": 3})
    with pytest.raises(ValueError, match="give batch_size only"):
        CDVConfig.from_dict({"batch_docs": 8, "batch_size": 8})
    with pytest.raises(ValueError, match=r"unknown cdv config keys: \['queries_per_batch'\]"):
        CDVConfig.from_dict({"queries_per_batch": 8})  # the re-rankers' old name, not CDV's
    with pytest.raises(ValueError, match="scheduler must be one of"):
        NeuralRerankerConfig.from_dict({"scheduler": "step"})
    with pytest.raises(ValueError, match="model must be dssm or knrm, got 'bm25'"):
        NeuralRerankerConfig.from_dict({"model": "bm25"})
    with pytest.raises(ValueError, match="label_encoder must be minilm or glove"):
        CDVConfig.from_dict({"label_encoder": "bert"})
    assert CDVConfig.from_dict({"batch_docs": 8}).batch_size == 8
    assert PassageCrossEncoderConfig.from_dict({"queries_per_batch": 2}).batch_size == 2


def test_similar_config_errors_and_layout() -> None:
    with pytest.raises(ValueError, match=r"unknown config keys \['epochs'\]"):
        resolve_config({"epochs": 3})  # a train: setting at the top
    with pytest.raises(ValueError, match=r"unknown keys \['seed'\] under 'train'"):
        resolve_config({"train": {"seed": 3}})  # the seed is a top-level key
    with pytest.raises(ValueError, match="config key 'transfer' must be a mapping, got list"):
        resolve_config({"transfer": [1]})
    with pytest.raises(ValueError, match="similar config.train: epochs must be an integer, got 2.5"):
        resolve_config({"train": {"epochs": 2.5}})
    with pytest.raises(ValueError, match="similar config.word2vec: dim must be an integer, got '100'"):
        resolve_config({"word2vec": {"dim": "100"}})
    with pytest.raises(ValueError, match="similar config: threads must be an integer or null, got 'all'"):
        resolve_config({"threads": "all"})
    cfg = SimilarConfig.from_dict({"seed": 7, "train": {"epochs": 3, "lr": 0.01}, "transfer": {"epochs": 5}})
    assert (cfg.seed, cfg.epochs, cfg.lr, cfg.transfer.epochs, cfg.transfer.lr) == (7, 3, 0.01, 5, 0.001)
    out = cfg.to_dict()
    assert out["train"]["epochs"] == 3 and "epochs" not in out and out["transfer"]["epochs"] == 5


class _Stop(Exception):
    """Raised by the recording trainer: the test has what it needs."""


@pytest.fixture
def trainer_kwargs(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keywords the next ``medrank.training.Trainer(...)`` gets (the run stops there)."""
    seen: dict[str, Any] = {}

    class RecordingTrainer:
        def __init__(self, model: Any, loss_fn: Any, batches: Any, output_dir: Any, **kwargs: Any) -> None:
            seen.update(kwargs)
            raise _Stop

    monkeypatch.setattr("medrank.training.Trainer", RecordingTrainer)
    return seen


@pytest.fixture
def medquad(tmp_path: Path) -> Path:
    from tests.test_medquad import make_medquad_root
    from tests.test_passages import _grow

    root = make_medquad_root(tmp_path)
    _grow(root)
    return root


def test_cdv_recipe_reaches_the_trainer(medquad: Path, tiny_encoder, tmp_path: Path, trainer_kwargs: dict) -> None:
    from medrank.pipelines.passages.cdv import train_cdv

    tiny_encoder.save(tmp_path / "enc")
    cfg = {"data_root": str(medquad), "encoder": str(tmp_path / "enc"), "use_glove": False,
           "feature_cache": str(tmp_path / "features"), "lstm_hidden": 4, "discourse_dim": 4, "label_dim": 4,
           "valid_fraction": 0.3, "batch_docs": 3}
    with pytest.raises(_Stop):
        train_cdv(cfg, tmp_path / "a", resume=False)
    assert trainer_kwargs["scheduler"] == "exponential" and trainer_kwargs["gamma"] == 0.975
    assert trainer_kwargs["optimizer"].defaults["lr"] == 1e-3 and trainer_kwargs["optimizer"].defaults["weight_decay"] == 0
    n_train = trainer_kwargs["steps_per_epoch"] * 3
    assert n_train - 3 < len(load_train_documents(medquad)) <= n_train
    trainer_kwargs.clear()
    with pytest.raises(_Stop):
        train_cdv({**cfg, "scheduler": "linear", "warmup_ratio": 0.25, "epochs": 2}, tmp_path / "b", resume=False)
    assert (trainer_kwargs["scheduler"], trainer_kwargs["warmup_ratio"], trainer_kwargs["epochs"]) == ("linear", 0.25, 2)


def load_train_documents(root: Path) -> list:
    from medrank.data.medquad import load_medquad_documents, split_documents

    return split_documents(load_medquad_documents(root, 2), 0.3, 13)[0]


def test_reranker_recipes_reach_the_trainer(medquad: Path, tmp_path: Path, trainer_kwargs: dict, monkeypatch) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from medrank.pipelines.passages import cross_encoder
    from medrank.pipelines.passages.neural import train_neural
    from tests.conftest import make_tiny_bert

    with pytest.raises(_Stop):
        train_neural({"model": "dssm", "data_root": str(medquad), "buckets": 64, "valid_fraction": 0.3}, tmp_path / "d",
                     resume=False)
    assert (trainer_kwargs["scheduler"], trainer_kwargs["weight_decay"], trainer_kwargs["lr"]) == ("constant", 0.0, 1e-3)
    trainer_kwargs.clear()
    with pytest.raises(_Stop):
        train_neural({"model": "dssm", "data_root": str(medquad), "buckets": 64, "valid_fraction": 0.3,
                      "scheduler": "cosine", "warmup_ratio": 0.0, "seed": 5}, tmp_path / "e", resume=False)
    assert (trainer_kwargs["scheduler"], trainer_kwargs["warmup_ratio"], trainer_kwargs["seed"]) == ("cosine", 0.0, 5)

    _, tok = make_tiny_bert()
    model = BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=1))
    monkeypatch.setattr(cross_encoder, "load_pair_classifier", lambda base: (model, tok))
    trainer_kwargs.clear()
    with pytest.raises(_Stop):
        cross_encoder.train_cross_encoder({"data_root": str(medquad), "valid_fraction": 0.3, "queries_per_batch": 2},
                                          tmp_path / "c", resume=False)
    assert (trainer_kwargs["scheduler"], trainer_kwargs["warmup_ratio"], trainer_kwargs["lr"]) == ("linear", 0.1, 3e-5)
    assert "weight_decay" not in trainer_kwargs  # the Trainer's AdamW default (0.01), as before


def test_similar_threads_are_applied_only_when_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from medrank.pipelines.similar import experiment

    calls: list[int] = []
    monkeypatch.setattr(experiment, "set_run_threads", lambda n: calls.append(n))

    def stop(seed: int) -> None:
        raise _Stop

    monkeypatch.setattr(experiment, "seed_everything", stop)
    with pytest.raises(_Stop):
        experiment.run_experiment({"threads": 1}, tmp_path / "a")
    with pytest.raises(_Stop):
        experiment.run_experiment({}, tmp_path / "b")
    assert calls == [1]
