"""Orbax checkpoints of a training run: the train state (params, optimizer state, step), the data
iterator's position and a JSON record (step, config fingerprint, task manifest hash, RNG seed).

Saves are asynchronous (the next step's rollouts overlap the write) and every process writes its own
shards. Orbax finalises a step by renaming its temporary directory, so a checkpoint killed mid-write is
never listed, and resume picks the newest complete one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from tbjax.train_step import TrainState

log = logging.getLogger(__name__)


class ResumeError(ValueError):
    """A checkpoint that must not be resumed as is (its run had another config)."""


class Checkpointer:
    def __init__(self, directory: str | Path, *, save_every: int, keep: int):
        self.save_every = save_every
        self.manager = ocp.CheckpointManager(
            Path(directory).absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=True),
            item_names=("state", "data", "record"),
        )

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def due(self, step: int, final: bool) -> bool:
        return final or step % self.save_every == 0

    def save(self, step: int, state: TrainState, data_state: dict[str, Any], record: dict[str, Any]) -> None:
        self.manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), data=ocp.args.JsonSave(data_state),
            record=ocp.args.JsonSave({**record, "step": step})))

    def restore(self, step: int, target: TrainState, fingerprint: str, allow_change: bool
                ) -> tuple[TrainState, dict[str, Any], dict[str, Any]]:
        """Restores onto `target`'s shardings (a TrainState of arrays or ShapeDtypeStructs with shardings)."""
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        restored = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), data=ocp.args.JsonRestore(), record=ocp.args.JsonRestore()))
        record = restored.record
        if record.get("fingerprint") != fingerprint:
            message = (f"checkpoint step {step} was written by a run with config fingerprint "
                       f"{record.get('fingerprint')}, this run's is {fingerprint}")
            if not allow_change:
                raise ResumeError(f"{message}; resume with the same config, start a new run.name, or pass "
                                  "train.allow_config_change=true to continue anyway")
            log.warning("%s; continuing because train.allow_config_change is set", message)
        return restored.state, restored.data, record

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()
