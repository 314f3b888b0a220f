"""Moving the trainer's (or an engine's) arrays between device memory and pinned host memory.

In colocated mode the trainer and the rollout servers take turns on the same GPUs, so between phases the
parameters and optimizer state must leave device memory entirely. Each array keeps its sharding and only
changes memory kind (`pinned_host` <-> the device's own), so the way back restores exactly the layout the
compiled update expects. The source buffers are deleted as soon as the copy is complete: a copy that left
the original alive would free nothing. (Donating across memory kinds is not implemented in jax 0.10:
`device_put(..., donate=True)` raises, hence the explicit delete.)

Backends without a pinned host memory keep the arrays where they are, and say so once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import jax

log = logging.getLogger(__name__)
HOST_MEMORY = "pinned_host"
Tree = TypeVar("Tree")


def host_memory_kind(devices: Sequence[Any]) -> str | None:
    """`pinned_host` when every device can address it (GPU, TPU and, in jax 0.10.2, CPU), else None."""
    kinds = [{memory.kind for memory in device.addressable_memories()} for device in devices]
    return HOST_MEMORY if kinds and all(HOST_MEMORY in k for k in kinds) else None


class HostOffload:
    """Moves pytrees of jax Arrays off and back onto `devices` (default: this process's devices)."""

    def __init__(self, devices: Sequence[Any] | None = None) -> None:
        devices = list(devices) if devices is not None else jax.local_devices()
        self.host_kind = host_memory_kind(devices)
        self.device_kind = devices[0].default_memory().kind
        if self.host_kind is None:
            log.info("%s devices have no %s memory: offload is a no-op, arrays stay in %s memory",
                     devices[0].platform, HOST_MEMORY, self.device_kind)

    @property
    def supported(self) -> bool:
        return self.host_kind is not None

    def to_host(self, tree: Tree, *, free: bool = True) -> Tree:
        """Every array leaf in pinned host memory (same sharding); the device copies are deleted unless
        `free=False` (for a caller that may share them: its dropped references free them once unshared)."""
        return tree if self.host_kind is None else move(tree, self.host_kind, free=free)

    def to_device(self, tree: Tree, *, free: bool = True) -> Tree:
        """Every array leaf back in device memory (same sharding); the host copies deleted unless `free=False`."""
        return move(tree, self.device_kind, free=free)


def move(tree: Tree, memory_kind: str, *, free: bool = True) -> Tree:
    """`tree` with each jax Array leaf copied to `memory_kind` under its own sharding and (with `free`) the
    source deleted. Leaves already there, and leaves that are not jax Arrays, are returned as they are.
    Blocks until the copies are complete, so the freed memory is free when this returns."""
    leaves, treedef = jax.tree.flatten(tree)
    sources: dict[int, jax.Array] = {}  # by identity: a buffer shared by two leaves is moved once
    for leaf in leaves:
        if isinstance(leaf, jax.Array) and leaf.sharding.memory_kind != memory_kind:
            sources[id(leaf)] = leaf
    if not sources:
        return tree
    arrays = list(sources.values())
    copies = jax.block_until_ready(
        jax.device_put(arrays, [a.sharding.with_memory_kind(memory_kind) for a in arrays]))
    moved = dict(zip(sources, copies, strict=True))
    for array in arrays if free else ():
        array.delete()
    return jax.tree.unflatten(treedef, [moved.get(id(leaf), leaf) for leaf in leaves])
