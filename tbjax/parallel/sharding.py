"""The one table that decides every sharding: logical axis names -> mesh axes.

Parameters carry logical axes (`logical_axes` metadata, set where they are created); activations name
theirs at the few places the model constrains them. A parameter dimension that does not divide the mesh
axes it maps to is an error naming the parameter and the fix: never silent replication, which is how a
27B model quietly stops fitting.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec
from rich.filesize import decimal

MeshAxes = tuple[str, ...]

DEFAULT_RULES: Mapping[str, MeshAxes] = {
    # parameters
    "vocab": ("tensor",),
    "embed": ("fsdp",),
    "q_heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "experts": (),
    "expert_mlp": ("tensor",),
    "router": (),
    "norm": (),
    "layers": (),
    "linear_k_heads": ("tensor",),  # Gated DeltaNet key heads; value heads follow in contiguous groups
    "linear_v_heads": ("tensor",),
    "conv_kernel": (),
    # activations
    "batch": ("data", "fsdp"),
    # Sequence parallelism between blocks: with tensor parallelism the residual stream (what full remat keeps
    # per layer) is split over the sequence instead of replicated, 1/tensor of the memory (Megatron-SP).
    "seq": ("tensor",),
    "act_embed": (),
}


class ShardingError(ValueError):
    """A dimension cannot be split over the mesh axes its logical axis maps to."""


@dataclasses.dataclass(frozen=True)
class ShardingRules:
    """Hashable (a tuple of pairs) because models keep it as static structure."""

    pairs: tuple[tuple[str, MeshAxes], ...] = tuple(DEFAULT_RULES.items())

    def mesh_axes(self, logical: str | None) -> MeshAxes:
        if logical is None:
            return ()
        table = dict(self.pairs)
        if logical not in table:
            raise ShardingError(f"logical axis {logical!r} has no sharding rule; add it to ShardingRules")
        return table[logical]

    def param_spec(self, name: str, shape: Sequence[int], logical: Sequence[str | None],
                   mesh: Mesh | AbstractMesh) -> PartitionSpec:
        """PartitionSpec for a parameter; raises ShardingError when a dimension does not divide."""
        entries = []
        for dim, (size, axis) in enumerate(zip(shape, logical, strict=True)):
            axes = tuple(a for a in self.mesh_axes(axis) if mesh.shape.get(a, 1) > 1)
            parts = math.prod(mesh.shape[a] for a in axes)
            if size % parts:
                raise ShardingError(
                    f"parameter {name} (shape {list(shape)}, logical axes {list(logical)}): dimension {dim} "
                    f"{axis!r} = {size} does not divide mesh axes {axes} of size {parts}. Fix: pick a mesh "
                    f"whose {'x'.join(axes)} size divides {size}, or map {axis!r} to other mesh axes in the "
                    "sharding rules."
                )
            entries.append(_spec_entry(axes))
        return PartitionSpec(*entries)

    def activation_spec(self, shape: Sequence[int], logical: Sequence[str | None],
                        mesh: Mesh | AbstractMesh) -> PartitionSpec:
        """PartitionSpec for an activation: mesh axes that do not divide (a batch of 1 while decoding)
        are left out, because activations are transient and must work at any batch size."""
        entries = []
        for size, axis in zip(shape, logical, strict=True):
            axes, parts = [], 1
            for a in self.mesh_axes(axis):
                if mesh.shape.get(a, 1) > 1 and size % (parts * mesh.shape[a]) == 0:
                    axes.append(a)
                    parts *= mesh.shape[a]
            entries.append(_spec_entry(tuple(axes)))
        return PartitionSpec(*entries)


def _spec_entry(axes: MeshAxes) -> str | tuple[str, ...] | None:
    return None if not axes else axes[0] if len(axes) == 1 else axes


def path_name(path: Sequence[object]) -> str:
    return ".".join(str(getattr(p, "key", p)) for p in path)


def param_shardings(abstract_state: nnx.State, mesh: Mesh | AbstractMesh, rules: ShardingRules) -> nnx.State:
    """The NamedSharding of every parameter of `abstract_state` (as returned by nnx.eval_shape)."""

    def sharding(path: tuple, var: nnx.Variable) -> NamedSharding:
        logical = var.get_metadata()["logical_axes"]
        return NamedSharding(mesh, rules.param_spec(path_name(path), var.shape, logical, mesh))

    return nnx.map_state(sharding, abstract_state)


def shard_activation(x: jax.Array, logical: Sequence[str | None], mesh: Mesh | AbstractMesh | None,
                     rules: ShardingRules) -> jax.Array:
    if mesh is None or mesh.size == 1:
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, rules.activation_spec(x.shape, logical, mesh)))


@dataclasses.dataclass(frozen=True)
class MemorySummary:
    total_bytes: int
    per_device_bytes: int
    unsharded_bytes: int  # parameters replicated on every device

    def describe(self) -> str:
        return (f"{decimal(self.total_bytes)} total, {decimal(self.per_device_bytes)} per device "
                f"({decimal(self.unsharded_bytes)} replicated on every device)")


def _summarise(leaves: Iterable[tuple[Sequence[int], np.dtype, jax.sharding.Sharding]]) -> MemorySummary:
    total = per_device = unsharded = 0
    for shape, dtype, sharding in leaves:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        shard_bytes = math.prod(sharding.shard_shape(tuple(shape))) * np.dtype(dtype).itemsize
        total += nbytes
        per_device += shard_bytes
        unsharded += nbytes if shard_bytes == nbytes and nbytes > 0 else 0
    return MemorySummary(total, per_device, unsharded)


def memory_summary(state: nnx.State) -> MemorySummary:
    """Bytes per device of a state of placed arrays."""
    return _summarise((leaf.shape, leaf.dtype, leaf.sharding) for leaf in jax.tree.leaves(state))
