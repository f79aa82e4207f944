"""One trainer with callbacks, per-epoch checkpoints and resume, shared by every pipeline."""

from medrank.training.trainer import (
    Callback,
    Trainer,
    TrainState,
    load_state,
    plot_history,
    recipe_settings,
    save_state,
)

__all__ = ["Callback", "TrainState", "Trainer", "load_state", "plot_history", "recipe_settings", "save_state"]
