"""What the training loop moves between processes in a multi-host run.

Only process 0 (the driver) runs rollouts: it owns the engine, the episodes and the group scheduler. The
other processes only train, so each step they receive from it the packed batch, or its decision to skip
the update, and the scheduler's draw count (which every process writes into its checkpoints). With one
process every function here is a no-op pass-through.

The embedded JaxEngine cannot span processes, so in a multi-process run it lives on process 0 and serves a
process-local, single-device copy of the parameters gathered from the global mesh after each update. That
gather puts the whole model in every host's memory: fine for the tiny and test models the embedded engine
is for; large models are served by SGLang, which loads the published HF directory instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tbjax.models import Qwen
from tbjax.models.hf.importer import abstract_model
from tbjax.models.lora import adapters_spec, add_adapters
from tbjax.parallel.distributed import broadcast_from_driver, gather_to_every_process, is_driver
from tbjax.trainer.packing import FIELDS, HEAD_INDEX, STALE, PackedBatch
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

FLOAT_FIELDS = ("behaviour_logprobs", "advantages", "weights")


def share_batch(packed: PackedBatch | None, draws: int) -> tuple[PackedBatch | None, int]:
    """Process 0's packed batch (None: skip the update) and scheduler draw count, on every process.

    Two broadcasts: a header (the batch's shape and scalars), then arrays of that shape, because every
    process must enter a broadcast with arrays of the source's shape. The driver keeps its own batch (the
    broadcast copies are bitwise equal to it).
    """
    if jax.process_count() == 1:
        return packed, draws
    shape = packed.shape if packed is not None else (0, 0, 0)
    head = packed.arrays[HEAD_INDEX].shape if packed is not None else (0, 0, 0)
    counts = (packed.episodes, packed.trained_tokens) if packed is not None else (0, 0)
    header = broadcast_from_driver({
        "ints": np.asarray([draws, packed is not None, *shape, *head, *counts,
                            packed is not None and STALE in packed.arrays], np.int32),
        "denominator": np.float32(packed.denominator if packed is not None else 0.0)})
    draws, present, *rest = (int(x) for x in header["ints"])
    if not present:
        return None, draws
    shape, head, (episodes, trained, stale) = tuple(rest[:3]), tuple(rest[3:6]), rest[6:]
    fields = (*FIELDS, STALE) if stale else FIELDS
    arrays = packed.arrays if packed is not None else {
        **{name: np.zeros(shape, np.float32 if name in FLOAT_FIELDS else np.int32) for name in fields},
        HEAD_INDEX: np.zeros(head, np.int32)}
    arrays = broadcast_from_driver(arrays)
    if is_driver():
        return packed, draws
    return PackedBatch(arrays, float(header["denominator"]), episodes, trained), draws


def engine_model(trainer: GRPOTrainer, params: Params, *, copy: bool = False) -> Qwen | None:
    """The model the embedded engine serves: the trainer's own view with one process (`copy`: a copy of its
    arrays, for an engine that serves while the next update donates the trainer's buffers); with several, a
    single-device copy on the driver (None elsewhere). Every process must call it: the gather is collective."""
    view = trainer.model_for(params)
    if jax.process_count() == 1:
        if copy:
            graphdef, state = nnx.split(view)
            return nnx.merge(graphdef, jax.tree.map(jnp.copy, state))
        return view
    trained, frozen = jax.tree.map(jnp.asarray, gather_to_every_process((params, trainer.frozen)))
    if not is_driver():
        return None
    graphdef, state = abstract_model(view.config)
    nnx.replace_by_pure_dict(state, frozen if trainer.lora else trained)
    model = nnx.merge(graphdef, state)
    if trainer.lora:  # the same adapters on the copy, with the trained values
        add_adapters(model, adapters_spec(view))
        adapters = nnx.state(model, nnx.LoRAParam)
        nnx.replace_by_pure_dict(adapters, trained)
        nnx.update(model, adapters)
    return model
