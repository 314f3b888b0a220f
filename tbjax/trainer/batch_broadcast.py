"""The step's batch, broadcast from the driver to every process of a multi-host run.

Only process 0 (the driver) runs rollouts: it owns the engine, the episodes and the group scheduler. The
other processes only train, so each step they receive from it the packed batch, or its decision to skip
the update, and the scheduler's draw count (which every process writes into its checkpoints). With one
process `share_batch` is a pass-through. (How the engine gets its weights: tbjax.trainer.backends.)
"""

from __future__ import annotations

import jax
import numpy as np

from tbjax.parallel.distributed import broadcast_from_driver, is_driver
from tbjax.trainer.packing import FIELDS, HEAD_INDEX, STALE, PackedBatch

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
