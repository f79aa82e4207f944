"""One trainer with callbacks, per-epoch checkpoints and resume, shared by every pipeline."""

from medrank.training.args import TrainingArgs
from medrank.training.trainer import (
    Callback,
    GeneratorState,
    Trainer,
    TrainState,
    check_run_config,
    load_state,
    plot_history,
    recipe_settings,
    save_state,
)

__all__ = ["Callback", "GeneratorState", "TrainState", "Trainer", "TrainingArgs", "check_run_config", "load_state", "plot_history", "recipe_settings", "save_state"]
