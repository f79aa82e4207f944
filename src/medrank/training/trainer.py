"""One trainer for every medrank model: epochs, callbacks, checkpoints, resume.

The trainer knows nothing about tasks. A task supplies

* ``model`` — a ``torch.nn.Module`` holding every trainable parameter,
* ``batches(epoch)`` — an iterable of batches for that epoch (re-created each
  epoch, so hard-negative mining or re-shuffling can run between epochs),
* ``loss_fn(batch) -> Tensor`` — the training loss of one batch,
* ``evaluate(epoch) -> dict[str, float]`` (optional) — validation metrics,

and may add :class:`Callback` objects (mining at ``on_epoch_begin``,
threshold calibration at ``on_epoch_end`` …).

Checkpoints are written at the end of every epoch as a directory (atomic
rename) holding the model weights (safetensors), the optimizer and scheduler
state (tensors in safetensors, structure in JSON — never pickle), the RNG
states and the metric history. ``fit(resume=True)`` continues after the last
complete checkpoint, so an interrupted run loses at most one epoch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from medrank.records import is_integer
from medrank.utils.io import atomic_dir, atomic_write_json

log = logging.getLogger(__name__)


class Callback:
    """Hooks called by :class:`Trainer`; override what you need."""

    def on_train_begin(self, trainer: Trainer) -> None: ...

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None: ...

    def on_step_end(self, trainer: Trainer, step: int, loss: float) -> None: ...

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None: ...

    def on_train_end(self, trainer: Trainer) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state saved with each checkpoint (e.g. a calibrated threshold)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    global_step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    best_metric: float | None = None
    best_epoch: int | None = None


# -- tensor-only (de)serialisation of optimizer / scheduler state -----------------------------------


def _split_state(obj: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    """Replace tensors inside a nested dict/list with ``{"__tensor__": key}`` references."""
    if isinstance(obj, torch.Tensor):
        key = prefix or "t"
        tensors[key] = obj.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        return {
            "__dict__": [[_key_to_json(k), _split_state(v, f"{prefix}.{k}", tensors)] for k, v in obj.items()]
        }
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_split_state(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    return obj


def _key_to_json(k: Any) -> Any:
    return k if isinstance(k, (str, int, float, bool)) or k is None else str(k)


def _join_state(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__dict__" in obj:
            return {k: _join_state(v, tensors) for k, v in obj["__dict__"]}
        if "__list__" in obj:
            return [_join_state(v, tensors) for v in obj["__list__"]]
        if "__float__" in obj:
            return float(obj["__float__"])
    return obj


def save_state(state: dict[str, Any], directory: Path, name: str) -> None:
    tensors: dict[str, torch.Tensor] = {}
    structure = _split_state(state, name, tensors)
    if tensors:
        save_file(tensors, str(directory / f"{name}.safetensors"))
    (directory / f"{name}.json").write_text(json.dumps(structure), encoding="utf-8")


def load_state(directory: Path, name: str) -> dict[str, Any]:
    structure = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    tpath = directory / f"{name}.safetensors"
    tensors = load_file(str(tpath)) if tpath.exists() else {}
    return _join_state(structure, tensors)


# -- the trainer ------------------------------------------------------------------------------------


#: the recipe settings a pipeline config passes to :class:`Trainer` unchanged (same names on both sides)
RECIPE_FIELDS = ("epochs", "lr", "weight_decay", "scheduler", "warmup_ratio", "max_steps_per_epoch",
                 "keep_checkpoints", "seed", "show_progress", "autocast")


def recipe_settings(config: Any) -> dict[str, Any]:
    """``{name: config.name}`` for the :data:`RECIPE_FIELDS` a config object has, as Trainer keywords."""
    return {name: getattr(config, name) for name in RECIPE_FIELDS if hasattr(config, name)}


class Trainer:
    """Epoch-based training loop with callbacks, per-epoch checkpoints and resume.

    Args:
        model: module whose parameters are trained and checkpointed.
        loss_fn: ``batch -> scalar loss``.
        batches: ``epoch -> iterable of batches`` (called at the start of each epoch).
        output_dir: where ``checkpoints/``, ``history.json`` and plots go.
        optimizer: defaults to AdamW(lr, weight_decay) over trainable parameters.
        scheduler: ``"linear"`` (warm-up then linear decay), ``"cosine"``,
            ``"constant"`` or ``"exponential"`` (``gamma`` per epoch).
        evaluate: ``epoch -> metrics``; ``select_metric`` names the one that picks the best epoch.
        steps_per_epoch: needed for step-based schedules when ``batches`` has no length.
        max_steps_per_epoch: cap (CPU recipes).
        keep_checkpoints: how many epoch checkpoints to keep (the best one is always kept).
        autocast: ``"bf16"`` runs ``loss_fn`` (the forward pass) under ``torch.autocast`` in bfloat16 on the
            model's device; weights, optimizer state and the backward's accumulation stay float32. On a CPU
            with AMX (Intel Sapphire Rapids and later) bf16 matrix products run several times faster than
            float32; elsewhere they may be slower. ``None`` (default): float32 throughout.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable[[Any], torch.Tensor],
        batches: Callable[[int], Iterable[Any]],
        output_dir: str | Path,
        *,
        epochs: int = 1,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        optimizer: torch.optim.Optimizer | None = None,
        scheduler: str = "linear",
        warmup_ratio: float = 0.1,
        gamma: float = 0.975,
        steps_per_epoch: int | None = None,
        max_steps_per_epoch: int | None = None,
        max_grad_norm: float | None = 1.0,
        evaluate: Callable[[int], dict[str, float]] | None = None,
        select_metric: str | None = None,
        callbacks: Iterable[Callback] = (),
        keep_checkpoints: int = 2,
        seed: int = 13,
        show_progress: bool = True,
        model_saver: Callable[[torch.nn.Module, Path], None] | None = None,
        autocast: str | None = None,
    ) -> None:
        if autocast not in (None, "bf16"):
            raise ValueError(f"autocast must be null or 'bf16', got {autocast!r}")
        _check_int("epochs", epochs, 1)
        if max_steps_per_epoch is not None:
            _check_int("max_steps_per_epoch", max_steps_per_epoch, 1)
        _check_int("keep_checkpoints", keep_checkpoints, 0)
        if optimizer is None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if isinstance(warmup_ratio, bool) or not isinstance(warmup_ratio, (int, float)) or not 0 <= warmup_ratio <= 1:
            raise ValueError(f"warmup_ratio must be a number in [0, 1], got {warmup_ratio!r}")
        self.model = model
        self.loss_fn = loss_fn
        self.batches = batches
        self.output_dir = Path(output_dir)
        self.epochs = epochs
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        self.optimizer = optimizer or torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
        self.steps_per_epoch = steps_per_epoch
        self.max_steps_per_epoch = max_steps_per_epoch
        self.scheduler_name = scheduler
        self.warmup_ratio = warmup_ratio
        self.gamma = gamma
        self.scheduler = self._make_scheduler()
        self.max_grad_norm = max_grad_norm
        self.evaluate_fn = evaluate
        self.select_metric = select_metric
        self.callbacks = list(callbacks)
        self.keep_checkpoints = keep_checkpoints
        self.seed = seed
        self.show_progress = show_progress
        self.model_saver = model_saver
        self.autocast = autocast
        self.state = TrainState()
        self.stop_training = False

    def _autocast(self) -> Any:
        if self.autocast is None:
            return contextlib.nullcontext()
        device = next((p.device.type for p in self.model.parameters()), "cpu")
        return torch.autocast(device_type=device, dtype=torch.bfloat16)

    # -- schedules --------------------------------------------------------------------------
    def _make_scheduler(self) -> torch.optim.lr_scheduler.LRScheduler | None:
        name = self.scheduler_name
        if name == "constant":
            return None
        if name == "exponential":
            return None  # stepped per epoch in fit()
        if name not in ("linear", "cosine"):
            raise ValueError(f"scheduler must be linear, cosine, constant or exponential, got {name!r}")
        per_epoch = self.steps_per_epoch
        if self.max_steps_per_epoch:
            per_epoch = min(per_epoch or self.max_steps_per_epoch, self.max_steps_per_epoch)
        if not per_epoch:
            return None
        total = max(1, per_epoch * self.epochs)
        warmup = int(total * self.warmup_ratio)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / max(1, warmup)
            progress = (step - warmup) / max(1, total - warmup)
            if name == "linear":
                return max(0.0, 1.0 - progress)
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_root(self) -> Path:
        """``<output_dir>/checkpoints``: one ``epoch-N`` folder per kept epoch."""
        return self.output_dir / "checkpoints"

    def checkpoints(self) -> list[Path]:
        """The complete checkpoints (those with ``trainer_state.json``), oldest epoch first."""
        if not self.checkpoint_root.exists():
            return []
        done = [p for p in self.checkpoint_root.glob("epoch-*") if (p / "trainer_state.json").exists()]
        return sorted(done, key=lambda p: int(p.name.split("-")[1]))

    def save_checkpoint(self, epoch: int) -> Path:
        """Write model, optimizer, scheduler, RNG and callback state of ``epoch`` atomically; prune to ``keep_checkpoints``."""
        target = self.checkpoint_root / f"epoch-{epoch}"
        with atomic_dir(target) as tmp:
            if self.model_saver is not None:
                self.model_saver(self.model, tmp / "model")
            save_file(
                {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()},
                str(tmp / "model.safetensors"),
            )
            save_state(self.optimizer.state_dict(), tmp, "optimizer")
            if self.scheduler is not None:
                save_state(self.scheduler.state_dict(), tmp, "scheduler")
            save_file({"torch": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
            np_state = np.random.get_state()
            (tmp / "rng.json").write_text(
                json.dumps(
                    {
                        "python": _jsonable(random.getstate()),
                        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
                    }
                )
            )
            callbacks = {type(c).__name__ + f"#{i}": c.state_dict() for i, c in enumerate(self.callbacks)}
            (tmp / "trainer_state.json").write_text(
                json.dumps(
                    {
                        "epoch": self.state.epoch,
                        "global_step": self.state.global_step,
                        "history": self.state.history,
                        "best_metric": self.state.best_metric,
                        "best_epoch": self.state.best_epoch,
                        "callbacks": callbacks,
                    },
                    ensure_ascii=False,
                    indent=1,
                )
            )
        self._prune()
        return target

    def _prune(self) -> None:
        ckpts = self.checkpoints()
        keep = set(ckpts[-self.keep_checkpoints :]) if self.keep_checkpoints > 0 else set()
        if self.state.best_epoch is not None:
            keep.add(self.checkpoint_root / f"epoch-{self.state.best_epoch}")
        import shutil

        for p in ckpts:
            if p not in keep:
                shutil.rmtree(p, ignore_errors=True)

    def load_checkpoint(self, path: Path) -> None:
        """Restore everything :meth:`save_checkpoint` wrote (the run then continues after that epoch)."""
        self.model.load_state_dict(load_file(str(path / "model.safetensors")))
        self.optimizer.load_state_dict(load_state(path, "optimizer"))
        if self.scheduler is not None and (path / "scheduler.json").exists():
            self.scheduler.load_state_dict(load_state(path, "scheduler"))
        torch.set_rng_state(load_file(str(path / "rng.safetensors"))["torch"])
        rng = json.loads((path / "rng.json").read_text())
        random.setstate(_tupled(rng["python"]))
        n = rng["numpy"]
        np.random.set_state((n[0], np.array(n[1], dtype=np.uint32), *n[2:]))
        st = json.loads((path / "trainer_state.json").read_text())
        self.state = TrainState(st["epoch"], st["global_step"], st["history"], st["best_metric"], st["best_epoch"])
        for i, c in enumerate(self.callbacks):
            c.load_state_dict(st.get("callbacks", {}).get(type(c).__name__ + f"#{i}", {}))

    # -- the loop ----------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> TrainState:
        """Train for ``epochs`` epochs (continuing from the last checkpoint when ``resume``)."""
        from medrank.config import seed_everything

        self.output_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(self.seed)
        resumed_from = None
        if resume and self.checkpoints():
            resumed_from = self.checkpoints()[-1]
            self.load_checkpoint(resumed_from)
        elif not resume and self.checkpoint_root.exists():
            # a fresh start must not leave the old run's checkpoints for a later resume to pick up
            import shutil

            shutil.rmtree(self.checkpoint_root)
        for c in self.callbacks:
            c.on_train_begin(self)
        if resumed_from is not None:
            # said where a person sees it (stderr), not only in the log: a rerun that trains nothing is a surprise
            if self.state.epoch >= self.epochs:
                done = "nothing left to train"
            elif self.stop_training:
                done = "it had stopped early: nothing left to train"
            else:
                done = f"continuing with epoch {self.state.epoch + 1}"
            _say(f"resuming from {resumed_from} (epoch {self.state.epoch} of {self.epochs} done; {done}); "
                 "--no-resume starts over")
        try:
            if self.state.epoch == 0 and self.evaluate_fn is not None and not self.state.history:
                # epoch 0 = the untrained model, the first point of every learning curve
                self._record(0, self.evaluate_fn(0), train_loss=None, seconds=0.0)
            for epoch in range(self.state.epoch + 1, self.epochs + 1):
                if self.stop_training:
                    break
                self._run_epoch(epoch)
        except KeyboardInterrupt:
            kept = self.checkpoints()
            where = f"epoch {kept[-1].name.split('-')[1]} is checkpointed in {self.checkpoint_root}" if kept else "no epoch was checkpointed yet"
            _say(f"interrupted during epoch {self.state.epoch + 1}: {where}; run the same command to resume")
            raise
        for c in self.callbacks:
            c.on_train_end(self)
        return self.state

    def _run_epoch(self, epoch: int) -> None:
        """Train, evaluate, record and checkpoint one epoch."""
        for c in self.callbacks:
            c.on_epoch_begin(self, epoch)
        t0 = time.perf_counter()
        mean_loss = self._train_epoch(epoch)
        if self.scheduler_name == "exponential":
            for g in self.optimizer.param_groups:
                g["lr"] *= self.gamma
        metrics = self.evaluate_fn(epoch) if self.evaluate_fn is not None else {}
        self.state.epoch = epoch
        self._record(epoch, metrics, train_loss=mean_loss, seconds=time.perf_counter() - t0)
        for c in self.callbacks:
            c.on_epoch_end(self, epoch, metrics)
        self.save_checkpoint(epoch)

    def load_best(self) -> int | None:
        """Load the best epoch's weights (by ``select_metric``) into the model; returns that epoch, or None."""
        best = self.state.best_epoch
        if best is None:
            return None
        path = self.checkpoint_root / f"epoch-{best}" / "model.safetensors"
        if not path.exists():
            return None
        self.model.load_state_dict(load_file(str(path)))
        return best

    def _record(self, epoch: int, metrics: dict[str, float], train_loss: float | None, seconds: float) -> None:
        row = {"epoch": epoch, "train_loss": train_loss, "seconds": round(seconds, 2), **metrics}
        self.state.history = [h for h in self.state.history if h["epoch"] != epoch] + [row]
        if self.select_metric and self.select_metric in metrics and epoch > 0:
            value = float(metrics[self.select_metric])
            if self.state.best_metric is None or value > self.state.best_metric:
                self.state.best_metric, self.state.best_epoch = value, epoch
        atomic_write_json(self.output_dir / "history.json", self.state.history)

    def _train_epoch(self, epoch: int) -> float | None:
        self.model.train()
        batches = self.batches(epoch)
        total = None
        try:
            total = len(batches)  # type: ignore[arg-type]
        except TypeError:
            pass
        if self.max_steps_per_epoch and total:
            total = min(total, self.max_steps_per_epoch)
        losses: list[float] = []
        bar = tqdm(batches, total=total, desc=f"epoch {epoch}/{self.epochs}", disable=not self.show_progress)
        for i, batch in enumerate(bar):
            if self.max_steps_per_epoch and i >= self.max_steps_per_epoch:
                break
            with self._autocast():
                loss = self.loss_fn(batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite loss {loss.item()} at epoch {epoch}, step {i}")
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(
                    [p for g in self.optimizer.param_groups for p in g["params"]], self.max_grad_norm
                )
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            self.state.global_step += 1
            losses.append(float(loss.item()))
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
            for c in self.callbacks:
                c.on_step_end(self, self.state.global_step, losses[-1])
        self.model.eval()
        return float(np.mean(losses)) if losses else None  # no batch: null in history.json, not NaN


#: config keys that change how a run is executed or described, not what it learns
RUN_CONFIG_IGNORED = frozenset({"show_progress", "threads", "output_dir", "data_root", "cache_dir", "save_model",
                                "description", "name", "data", "data_dir", "eval_val"})


def check_run_config(output_dir: str | Path, config: dict[str, Any], resume: bool,
                     ignore: Iterable[str] = ()) -> None:
    """Refuse to resume checkpoints made with another config; then record ``config`` as ``config.json``.

    A non-empty folder without ``config.json`` or ``checkpoints/`` is someone's own folder: refused, so a
    run's files never land among them.

    A run folder's checkpoints belong to the config that made them: resuming them under a changed learning rate
    or architecture would train with the old optimizer state (or fail to load the weights) while
    ``config.json`` claimed the new settings. Keys in :data:`RUN_CONFIG_IGNORED` and ``ignore`` may change, and
    keys absent from the saved config (added by a newer medrank, with their defaults) are not compared.
    """
    output_dir = Path(output_dir)
    saved = output_dir / "config.json"
    if output_dir.exists() and not output_dir.is_dir():
        raise FileExistsError(f"{output_dir} is a file; the output directory must be a folder")
    if output_dir.is_dir() and not saved.exists() and not (output_dir / "checkpoints").exists() and any(output_dir.iterdir()):
        # every medrank run writes config.json first: anything else there is somebody's files
        raise FileExistsError(f"{output_dir} is not empty and holds no medrank run (no config.json); "
                              "give an empty or new folder as the output directory")
    checkpointed = any(output_dir.glob("checkpoints/epoch-*/trainer_state.json")) or any(
        output_dir.glob("*/checkpoints/epoch-*/trainer_state.json"))
    now = json.loads(json.dumps(config, default=str))  # tuples → lists, paths → strings, as saved
    if resume and checkpointed and saved.exists():
        try:
            before = json.loads(saved.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = None
        if isinstance(before, dict):
            skip = RUN_CONFIG_IGNORED | set(ignore)
            changed = []
            for k in sorted(set(before) & set(now)):
                if k in skip or before[k] == now[k]:
                    continue
                if isinstance(before[k], dict) and isinstance(now[k], dict):  # name the nested field: train.epochs
                    changed += [f"{k}.{sub}" for sub in sorted(set(before[k]) & set(now[k])) if before[k][sub] != now[k][sub]]
                else:
                    changed.append(k)
            if changed:
                raise ValueError(f"{output_dir} holds checkpoints of a run with a different config ({', '.join(changed)}); "
                                 "use another output directory, or --no-resume to start over there")
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(saved, now)


def _check_int(name: str, value: Any, low: int) -> None:
    if not is_integer(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _say(message: str) -> None:
    """A line for the person running the training (stderr, like the progress bars), and the log."""
    import sys

    log.info(message)
    print(message, file=sys.stderr, flush=True)


class GeneratorState(Callback):
    """Checkpoints a ``numpy.random.Generator`` that a task draws from while training (negatives, shuffles),
    so a resumed run continues its stream instead of replaying it from the seed."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def state_dict(self) -> dict[str, Any]:
        return {"bit_generator": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("bit_generator"):
            self.rng.bit_generator.state = state["bit_generator"]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, tuple):
        return [_jsonable(o) for o in obj]
    return obj


def _tupled(obj: Any) -> Any:
    if isinstance(obj, list):
        return tuple(_tupled(o) for o in obj)
    return obj


def plot_history(
    histories: dict[str, list[dict[str, Any]]], metric: str, path: str | Path, title: str | None = None
) -> None:
    """One line per model of ``metric`` per epoch (the Bi-HardNCE paper's Figure 4), saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for name, history in histories.items():
        pts = [(h["epoch"], h[metric]) for h in history if metric in h and h[metric] is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(title or metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
