from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from medrank.training import Callback, Trainer, load_state, plot_history, save_state


def make_problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 4, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1
    return x, y


def make_trainer(tmp_path, epochs, callbacks=()):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = make_problem()

    def batches(epoch):
        perm = torch.randperm(len(x))  # uses the torch RNG, which checkpoints must restore
        return [(x[perm[i : i + 16]], y[perm[i : i + 16]]) for i in range(0, len(x), 16)]

    def loss_fn(batch):
        xb, yb = batch
        return torch.nn.functional.mse_loss(model(xb).squeeze(-1), yb)

    def evaluate(epoch):
        with torch.no_grad():
            return {"neg_mse": -float(torch.nn.functional.mse_loss(model(x).squeeze(-1), y))}

    return Trainer(
        model,
        loss_fn,
        batches,
        tmp_path,
        epochs=epochs,
        lr=0.05,
        steps_per_epoch=4,
        scheduler="linear",
        evaluate=evaluate,
        select_metric="neg_mse",
        callbacks=callbacks,
        show_progress=False,
    )


def test_loss_decreases_and_history_written(tmp_path):
    trainer = make_trainer(tmp_path, epochs=5)
    state = trainer.fit()
    hist = json.loads((tmp_path / "history.json").read_text())
    assert [h["epoch"] for h in hist] == [0, 1, 2, 3, 4, 5]
    assert hist[-1]["neg_mse"] > hist[0]["neg_mse"]
    assert state.best_epoch is not None and state.global_step == 20


def test_resume_matches_uninterrupted_run(tmp_path):
    full = make_trainer(tmp_path / "full", epochs=4)
    full.fit()
    # "interrupted" run: same config, killed after epoch 2; a fresh process resumes to 4
    class Interrupt(Callback):
        def on_epoch_end(self, trainer, epoch, metrics):
            trainer.stop_training = epoch == 2

    make_trainer(tmp_path / "cut", epochs=4, callbacks=[Interrupt()]).fit()
    resumed = make_trainer(tmp_path / "cut", epochs=4)
    resumed.fit(resume=True)
    for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert resumed.state.global_step == full.state.global_step


def test_checkpoints_are_safetensors_and_pruned(tmp_path):
    trainer = make_trainer(tmp_path, epochs=4)
    trainer.keep_checkpoints = 1
    trainer.fit()
    names = sorted(p.name for p in trainer.checkpoints())
    assert "epoch-4" in names and len(names) <= 2  # last + best
    ck = trainer.checkpoints()[-1]
    assert set(load_file(str(ck / "model.safetensors"))) == {"weight", "bias"}
    assert not list(ck.glob("*.pt")) and not list(ck.glob("*.bin"))


def test_callbacks_called_and_state_saved(tmp_path):
    class Recorder(Callback):
        def __init__(self):
            self.events, self.threshold = [], 0.0

        def on_epoch_begin(self, trainer, epoch):
            self.events.append(("begin", epoch))

        def on_epoch_end(self, trainer, epoch, metrics):
            self.events.append(("end", epoch))
            self.threshold = 0.1 * epoch

        def state_dict(self):
            return {"threshold": self.threshold}

        def load_state_dict(self, state):
            self.threshold = state.get("threshold", 0.0)

    rec = Recorder()
    make_trainer(tmp_path, epochs=2, callbacks=[rec]).fit()
    assert rec.events == [("begin", 1), ("end", 1), ("begin", 2), ("end", 2)]
    rec2 = Recorder()
    make_trainer(tmp_path, epochs=2, callbacks=[rec2]).fit(resume=True)
    assert rec2.threshold == pytest.approx(0.2)


def test_state_roundtrip_without_pickle(tmp_path):
    state = {"a": torch.arange(3), "nested": {1: [torch.ones(2), 0.5, float("inf")]}, "s": "x"}
    save_state(state, tmp_path, "st")
    back = load_state(tmp_path, "st")
    torch.testing.assert_close(back["a"], state["a"])
    torch.testing.assert_close(back["nested"][1][0], torch.ones(2))
    assert back["nested"][1][1:] == [0.5, float("inf")] and back["s"] == "x"


def test_non_finite_loss_raises(tmp_path):
    model = torch.nn.Linear(1, 1)
    trainer = Trainer(
        model, lambda b: model.weight.sum() * float("nan"), lambda e: [0], tmp_path, show_progress=False
    )
    with pytest.raises(FloatingPointError, match="non-finite"):
        trainer.fit()


def test_plot_history(tmp_path):
    plot_history({"a": [{"epoch": 0, "m": 0.1}, {"epoch": 1, "m": 0.3}]}, "m", tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_recipe_settings_passes_only_the_fields_a_config_has():
    from types import SimpleNamespace

    from medrank.training import recipe_settings

    cfg = SimpleNamespace(epochs=3, lr=1e-4, seed=7, temperature=0.05)
    assert recipe_settings(cfg) == {"epochs": 3, "lr": 1e-4, "seed": 7}
