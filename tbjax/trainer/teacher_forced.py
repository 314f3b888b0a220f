"""The trainer's teacher-forced log-probs (of given tokens under given parameters, without gradients): the
trainer's side of the engine-vs-trainer comparisons (trainer.mismatch over a step's batch, trainer.weight_probe over
a fixed probe sequence). The update's own forward pass and vocabulary head (tbjax.trainer.update), on its
shardings, so what is compared is what the update computes.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from tbjax.trainer.logprobs import trained_logprobs
from tbjax.trainer.packing import HEAD_INDEX
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

# What a teacher-forced pass reads of a packed batch (tbjax.trainer.packing.FIELDS and HEAD_INDEX)
TEACHER_FORCED_FIELDS = ("tokens", "positions", "segments", "targets", HEAD_INDEX)


def trainer_logprobs(trainer: GRPOTrainer, params: Params, frozen: Params, micro: dict[str, jax.Array],
                     temperature: float) -> jax.Array:
    """One micro-batch's packed arrays (TEACHER_FORCED_FIELDS; [rows, len], HEAD_INDEX [shards, head_tokens]) ->
    log p(target) at `temperature` [rows, len] float32, zero at positions HEAD_INDEX does not list. Traced
    inside the caller's jit, which takes the trainer's `frozen` base weights as an argument."""
    model = trainer.model_for(params, frozen)
    hidden = model.hidden_states(micro["tokens"], micro["positions"], micro["segments"])
    table = (model.embed_tokens if model.lm_head is None else model.lm_head)[...]
    return trained_logprobs(hidden, table, micro["targets"], micro[HEAD_INDEX], temperature,
                            trainer.logprob_chunk)[0]


def replicated(trainer: GRPOTrainer) -> NamedSharding | None:
    """Where a teacher-forced pass puts its (small) results: whole on every device, so that every process of a
    multi-host run can read them."""
    return None if trainer.mesh is None else NamedSharding(trainer.mesh, PartitionSpec())


def batch_on_mesh(trainer: GRPOTrainer, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """[micro_batches, rows, ...] arrays placed as the update places them (rows over the mesh's batch axes)."""
    if trainer.batch_sharding is None:
        return arrays
    return {k: jax.device_put(v, trainer.batch_sharding) for k, v in arrays.items()}
