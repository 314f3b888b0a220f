"""Rollout backends: what serves a run's episodes, chosen once from `rollout.engine` (protocol.py says the
contract). Each backend is the module `<engine>_backend` of this package, so adding one is a file here and its
name in tbjax.sections.rollout.ENGINES."""

from __future__ import annotations

import importlib
from pathlib import Path

from tbjax.config import Config
from tbjax.trainer.backends.protocol import BackendBuilder, RolloutBackend
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

__all__ = ["RolloutBackend", "build_backend"]


def build_backend(config: Config, trainer: GRPOTrainer, params: Params, step: int, model_dir: Path) -> RolloutBackend:
    """The configured backend of a run starting (or resuming) at `step`; every process calls it."""
    builder: BackendBuilder = importlib.import_module(f"{__name__}.{config.rollout.engine}_backend").build
    return builder(config, trainer, params, step, model_dir)
