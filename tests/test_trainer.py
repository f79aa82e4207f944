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
    assert state.global_step == 20
    best = max((h for h in hist if h["epoch"] > 0), key=lambda h: h["neg_mse"])
    assert state.best_epoch == best["epoch"] and state.best_metric == pytest.approx(best["neg_mse"])


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
    assert names == sorted({"epoch-4", f"epoch-{trainer.state.best_epoch}"})  # last + best
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


def test_no_resume_clears_the_old_checkpoints(tmp_path):
    make_trainer(tmp_path, epochs=3).fit()
    assert (tmp_path / "checkpoints" / "epoch-3").exists()
    make_trainer(tmp_path, epochs=1).fit(resume=False)
    # only the new run's checkpoint: a later resume must not pick up the old epoch 3
    assert [p.name for p in make_trainer(tmp_path, epochs=1).checkpoints()] == ["epoch-1"]


def test_resume_says_where_it_continues(tmp_path, capsys):
    make_trainer(tmp_path, epochs=2).fit()
    capsys.readouterr()
    make_trainer(tmp_path, epochs=2).fit(resume=True)
    err = capsys.readouterr().err
    assert "resuming from" in err and "nothing left to train" in err
    make_trainer(tmp_path, epochs=3).fit(resume=True)
    err = capsys.readouterr().err
    assert "epoch 2 of 3 done; continuing with epoch 3" in err


def test_interrupt_says_how_to_resume(tmp_path, capsys):
    trainer = make_trainer(tmp_path, epochs=3)
    calls = {"n": 0}
    inner = trainer.loss_fn

    def loss_fn(batch):
        calls["n"] += 1
        if calls["n"] == 6:  # during epoch 2, after epoch 1 was checkpointed
            raise KeyboardInterrupt
        return inner(batch)

    trainer.loss_fn = loss_fn
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    err = capsys.readouterr().err
    assert "interrupted during epoch 2: epoch 1 is checkpointed" in err and "run the same command to resume" in err


@pytest.mark.parametrize("kwargs, message", [
    ({"epochs": "3"}, "epochs must be an integer"), ({"epochs": 0}, "epochs must be an integer >= 1"),
    ({"max_steps_per_epoch": -5}, "max_steps_per_epoch"), ({"lr": "1e-3"}, "lr must be a positive number"),
    ({"lr": float("nan")}, "lr must be"), ({"warmup_ratio": 2}, "warmup_ratio"),
])
def test_bad_settings_are_refused(tmp_path, kwargs, message):
    model = torch.nn.Linear(1, 1)
    with pytest.raises(ValueError, match=message):
        Trainer(model, lambda b: model.weight.sum(), lambda e: [0], tmp_path, show_progress=False, **kwargs)


def test_load_best_restores_the_selected_epoch(tmp_path):
    trainer = make_trainer(tmp_path, epochs=3)
    trainer.fit()
    best = trainer.state.best_epoch
    hist = json.loads((tmp_path / "history.json").read_text())
    assert best == max((h for h in hist if h["epoch"] > 0), key=lambda h: h["neg_mse"])["epoch"]
    with torch.no_grad():
        trainer.model.weight.zero_()
    assert trainer.load_best() == best
    saved = load_file(str(tmp_path / "checkpoints" / f"epoch-{best}" / "model.safetensors"))
    torch.testing.assert_close(trainer.model.weight, saved["weight"])


def test_generator_state_continues_the_stream_on_resume(tmp_path):
    import numpy as np

    from medrank.training import GeneratorState

    def run(folder, epochs, resume, stop_after=None):
        rng = np.random.default_rng(7)
        drawn = []

        class Stop(Callback):
            def on_epoch_end(self, trainer, epoch, metrics):
                trainer.stop_training = epoch == stop_after

        model = torch.nn.Linear(1, 1)

        def loss_fn(batch):
            drawn.append(int(rng.integers(1_000_000)))
            return (model.weight.sum() - 1) ** 2

        Trainer(model, loss_fn, lambda e: [0, 1], folder, epochs=epochs, show_progress=False,
                callbacks=[GeneratorState(rng), Stop()]).fit(resume=resume)
        return drawn

    full = run(tmp_path / "full", 3, False)
    first = run(tmp_path / "cut", 3, False, stop_after=1)
    rest = run(tmp_path / "cut", 3, True)
    assert first + rest == full


def test_check_run_config_refuses_changed_checkpointed_runs(tmp_path):
    from medrank.training import check_run_config

    check_run_config(tmp_path, {"lr": 0.1, "threads": 1}, resume=True)
    check_run_config(tmp_path, {"lr": 0.5}, resume=True)  # no checkpoint yet: a failed start does not block
    make_trainer(tmp_path, epochs=1).fit()
    check_run_config(tmp_path, {"lr": 0.5, "threads": 2, "added_later": 1}, resume=True)  # ignored / new keys
    with pytest.raises(ValueError, match=r"different config \(lr\).*--no-resume"):
        check_run_config(tmp_path, {"lr": 0.05}, resume=True)
    check_run_config(tmp_path, {"lr": 0.05}, resume=False)
    assert json.loads((tmp_path / "config.json").read_text()) == {"lr": 0.05}


def test_check_config_types():
    from medrank.config import check_config_types, check_dataclass_config
    from medrank.pipelines.procedures.config import ProcedureConfig

    defaults = {"epochs": 3, "lr": 0.1, "name": "x", "flag": True, "train": {"patience": 2}, "limit": None,
                "time_budget_minutes": 30}
    check_config_types({"lr": 1, "limit": "anything", "time_budget_minutes": 7.5, "epochs": None}, defaults)
    for bad, message in [({"epochs": "3"}, "epochs must be an integer, got '3'"), ({"epochs": 2.5}, "integer"),
                         ({"epochs": True}, "integer"), ({"lr": "1e-3"}, "YAML reads 1e-3 as text"),
                         ({"flag": 1}, "flag must be a bool"), ({"train": {"patience": "2"}}, r"cfg\.train: patience")]:
        with pytest.raises(ValueError, match=message):
            check_config_types(bad, defaults, "cfg")
    with pytest.raises(ValueError, match="threads must be an integer or null"):
        check_dataclass_config(ProcedureConfig, {"threads": "2"}, "procedures config")
    check_dataclass_config(ProcedureConfig, {"threads": None, "epochs": 2}, "procedures config")


def test_check_run_config_refuses_a_folder_of_someone_elses_files(tmp_path):
    from medrank.training import check_run_config

    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds no medrank run"):
        check_run_config(mine, {"lr": 0.1}, resume=True)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        check_run_config(tmp_path / "afile", {"lr": 0.1}, resume=True)
    check_run_config(tmp_path / "new" / "run", {"lr": 0.1}, resume=True)  # new folders are made


def test_resume_of_an_early_stopped_run_says_nothing_is_left(tmp_path, capsys):
    class StopAfterOne(Callback):
        def on_train_begin(self, trainer):
            trainer.stop_training = trainer.state.epoch >= 1  # as a restored early stop does

        def on_epoch_end(self, trainer, epoch, metrics):
            trainer.stop_training = True

    make_trainer(tmp_path, epochs=3, callbacks=[StopAfterOne()]).fit()
    capsys.readouterr()
    trainer = make_trainer(tmp_path, epochs=3, callbacks=[StopAfterOne()])
    trainer.fit(resume=True)
    assert "it had stopped early: nothing left to train" in capsys.readouterr().err
    assert trainer.state.epoch == 1


def test_interrupt_during_evaluation_is_reported_too(tmp_path, capsys):
    trainer = make_trainer(tmp_path, epochs=2)
    trainer.evaluate_fn = lambda epoch: (_ for _ in ()).throw(KeyboardInterrupt) if epoch == 2 else {"neg_mse": 0.0}
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert "interrupted during epoch 2: epoch 1 is checkpointed" in capsys.readouterr().err


def test_changed_nested_config_keys_are_named(tmp_path):
    from medrank.training import check_run_config

    check_run_config(tmp_path, {"train": {"epochs": 3, "lr": 0.1}}, resume=True)
    make_trainer(tmp_path, epochs=1).fit()
    with pytest.raises(ValueError, match=r"\(train\.epochs\)"):
        check_run_config(tmp_path, {"train": {"epochs": 5, "lr": 0.1}}, resume=True)


def _scripted_trainer(tmp_path, values, **kwargs):
    """A trainer whose evaluate returns ``values[epoch]`` as "m" (epoch 0 = the untrained model)."""
    model = torch.nn.Linear(1, 1)
    return Trainer(model, lambda b: (model.weight.sum() - 1) ** 2, lambda e: [0], tmp_path,
                   epochs=len(values) - 1, evaluate=lambda epoch: {"m": values[epoch]}, select_metric="m",
                   show_progress=False, **kwargs)


def test_best_epoch_ties_keep_the_earlier_epoch_and_its_checkpoint_survives(tmp_path):
    # epoch 0 (untrained) is never selected; epochs 1..4 score 0.1, 0.5, 0.3, 0.5: the tie goes to epoch 2
    trainer = _scripted_trainer(tmp_path, [0.9, 0.1, 0.5, 0.3, 0.5], keep_checkpoints=1)
    state = trainer.fit()
    assert state.best_epoch == 2 and state.best_metric == 0.5
    assert [p.name for p in trainer.checkpoints()] == ["epoch-2", "epoch-4"]  # the last one + the best one
    saved = json.loads((tmp_path / "checkpoints" / "epoch-4" / "trainer_state.json").read_text())
    assert saved["best_epoch"] == 2
    assert trainer.load_best() == 2
    # keep_checkpoints=0 still keeps the best epoch
    trainer = _scripted_trainer(tmp_path / "none", [0.0, 0.2, 0.7, 0.1], keep_checkpoints=0)
    trainer.fit()
    assert trainer.state.best_epoch == 2 and [p.name for p in trainer.checkpoints()] == ["epoch-2"]


@pytest.mark.parametrize("scheduler", ["linear", "cosine"])
def test_warmup_then_decay_learning_rates_per_step(tmp_path, scheduler):
    import math

    model = torch.nn.Linear(1, 1)
    lrs = []
    trainer = None

    def loss_fn(batch):
        lrs.append(trainer.optimizer.param_groups[0]["lr"])  # the rate this step's update uses
        return (model.weight.sum() - 1) ** 2

    # 5 steps per epoch × 2 epochs = 10 steps, warm-up int(10 × 0.3) = 3 steps
    trainer = Trainer(model, loss_fn, lambda e: [0] * 5, tmp_path, epochs=2, lr=0.1, scheduler=scheduler,
                      warmup_ratio=0.3, steps_per_epoch=5, show_progress=False)
    trainer.fit()
    warm = [0.1 * (s + 1) / 3 for s in range(3)]
    progress = [(s - 3) / 7 for s in range(3, 10)]
    if scheduler == "linear":
        decay = [0.1 * (1 - p) for p in progress]
    else:
        decay = [0.1 * 0.5 * (1 + math.cos(math.pi * p)) for p in progress]
    assert lrs == pytest.approx(warm + decay, abs=1e-12)
    assert lrs[:4] == pytest.approx([0.1 / 3, 0.2 / 3, 0.1, 0.1], abs=1e-12)


@pytest.mark.parametrize("max_grad_norm, expected", [(1.0, 1.0), (None, 50.0), (100.0, 50.0)])
def test_gradients_are_clipped_to_max_grad_norm(tmp_path, max_grad_norm, expected):
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    x = torch.tensor([[30.0, 40.0]])  # loss = -w·x: gradient (-30, -40), norm 50

    class GradNorm(Callback):
        def __init__(self):
            self.norms = []

        def on_step_end(self, trainer, step, loss):  # after optimizer.step: the gradients the update used
            self.norms.append(float(model.weight.grad.norm()))

    rec = GradNorm()
    Trainer(model, lambda b: -model(x).sum(), lambda e: [0, 1], tmp_path, epochs=1, lr=1e-3, scheduler="constant",
            max_grad_norm=max_grad_norm, callbacks=[rec], show_progress=False).fit()
    assert rec.norms == pytest.approx([expected, expected], rel=1e-5)


def test_bf16_autocast_runs_the_forward_in_bfloat16_and_keeps_float32_weights(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = make_problem()
    seen = []

    def loss_fn(batch):
        out = model(batch[0]).squeeze(-1)
        seen.append(out.dtype)
        return torch.nn.functional.mse_loss(out.float(), batch[1])

    trainer = Trainer(model, loss_fn, lambda epoch: [(x, y)] * 4, tmp_path, epochs=2, lr=0.05, steps_per_epoch=4,
                      show_progress=False, autocast="bf16")
    trainer.fit()
    assert seen and set(seen) == {torch.bfloat16}  # the linear layer ran in bfloat16
    assert model.weight.dtype == torch.float32 and model.weight.grad.dtype == torch.float32
    torch.manual_seed(0)
    untrained = torch.nn.Linear(4, 1)  # the same initial weights
    with torch.no_grad():
        final = float(torch.nn.functional.mse_loss(model(x).squeeze(-1), y))
        first = float(torch.nn.functional.mse_loss(untrained(x).squeeze(-1), y))
    assert final < first  # it still learns
    with pytest.raises(ValueError, match="autocast must be null or 'bf16'"):
        Trainer(model, loss_fn, lambda epoch: [], tmp_path / "b", autocast="fp16")


def test_frozen_bottom_states_stay_float32_under_autocast(tiny_encoder):
    from medrank.models import BiEncoder

    bi = BiEncoder(tiny_encoder, train_layers=1)  # 1 of the tiny model's 2 blocks frozen
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        bi.fill_cache(["fever", "cough at night"], "query")
    prompt = tiny_encoder._prompt("query")
    with torch.no_grad():
        reference = bi.frozen_states(dict(tiny_encoder.tokenizer([prompt + "fever"], return_tensors="pt")))
    cached, _ = bi._cache_for("query").gather(["fever"], torch.device("cpu"))
    assert cached.dtype == torch.float32
    # float32 up to the last bit batch padding moves (~1e-7); a bfloat16 bottom is off by ~1e-4 here
    torch.testing.assert_close(cached[0, : reference.shape[1]], reference[0], rtol=1e-6, atol=1e-6)
