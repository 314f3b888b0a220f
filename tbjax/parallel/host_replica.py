"""A process's own copy of a parameter: in the data x fsdp layouts every host holds a whole replica, sharded over
its own devices, so it can read the parameter without any traffic to other hosts.

`local_replica` re-labels the shards this process holds as an array over its own devices (a sub-mesh of the
job's mesh with the same axis names), so computations on it (an export's gathers) are collectives among
those devices only: no cross-host transfer, and no lock step with the other processes.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding


def local_replica(value: jax.Array) -> jax.Array | None:
    """`value` over this process's devices alone when they hold all of it, else None (other processes hold
    parts of it that this one lacks). A fully addressable array is its own replica."""
    if value.is_fully_addressable:
        return value
    sharding = value.sharding
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"a parameter spread over processes must be sharded over a mesh (NamedSharding), not "
                        f"{type(sharding).__name__}")
    local_mesh = _process_mesh(sharding.mesh)
    if local_mesh is None or not _covers(value):
        return None
    # every mesh axis the spec shards over lies whole within this process's block, so the spec places each
    # shard on the same device of the sub-mesh as of the whole mesh
    return jax.make_array_from_single_device_arrays(
        value.shape, NamedSharding(local_mesh, sharding.spec), [shard.data for shard in value.addressable_shards])


def _covers(value: jax.Array) -> bool:
    """Whether this process's shards hold every element (the distinct blocks of a mesh sharding do not overlap,
    so their sizes add up to the whole exactly when they cover it)."""
    blocks = {tuple(s.indices(n)[:2] for s, n in zip(shard.index, value.shape, strict=True))
              for shard in value.addressable_shards}
    return sum(math.prod(stop - start for start, stop in block) for block in blocks) == math.prod(value.shape)


@functools.cache
def _process_mesh(mesh: Mesh) -> Mesh | None:
    """The block of `mesh` that this process's devices form, as a mesh of the same axis names; None when they
    do not form one block."""
    mine = np.vectorize(lambda device: device.process_index == jax.process_index())(mesh.devices)
    where = np.argwhere(mine)
    if not len(where):
        return None
    block = tuple(slice(low, high + 1) for low, high in zip(where.min(0), where.max(0), strict=True))
    if not mine[block].all():
        return None
    return Mesh(mesh.devices[block], mesh.axis_names)
