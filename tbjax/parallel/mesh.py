"""Device meshes from `--mesh` specs.

Every mesh has the three named axes (`data`, `fsdp`, `tensor`) so the sharding rules can always name
them; a spec fills their sizes. `AxB` (hosts x local devices) defaults to data x fsdp: replicas across
hosts, FSDP inside a host, because the slow inter-node network should only carry gradient reductions and
3 divides none of a 27-32B Qwen's widths. `layout=` renames which axes the spec's numbers fill.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AbstractMesh, AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor")
DEFAULT_LAYOUTS = {1: ("fsdp",), 2: ("data", "fsdp"), 3: ("data", "fsdp", "tensor")}
log = logging.getLogger(__name__)


class MeshError(ValueError):
    """A mesh spec that is malformed or does not match the devices."""


class MeshDevice(Protocol):
    """What placing a mesh reads of a jax.Device (a class JAX's type information leaves unknown)."""

    @property
    def platform(self) -> str: ...

    @property
    def process_index(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class MeshSpec:
    sizes: Mapping[str, int]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in MESH_AXES)

    @property
    def num_devices(self) -> int:
        return int(np.prod(self.shape))

    def describe(self) -> str:
        return " x ".join(f"{a}={self.sizes[a]}" for a in MESH_AXES)

    def abstract(self) -> AbstractMesh:
        """The mesh's shape without devices: enough for sharding plans and memory estimates anywhere."""
        return AbstractMesh(self.shape, MESH_AXES)


def parse_mesh_spec(text: str, layout: Sequence[str] | None = None) -> MeshSpec:
    """'3x8' -> data=3, fsdp=8, tensor=1 (or the axes `layout` names, in order)."""
    try:
        numbers = [int(part) for part in text.lower().split("x")]
    except ValueError:
        raise MeshError(f"mesh spec {text!r} is not like '8', '3x8' or '2x4x2' (sizes joined by 'x')") from None
    if not numbers or any(n < 1 for n in numbers):
        raise MeshError(f"mesh spec {text!r} needs positive sizes, e.g. '3x8'")
    axes = tuple(layout) if layout else DEFAULT_LAYOUTS.get(len(numbers))
    if axes is None or len(axes) != len(numbers):
        raise MeshError(f"mesh spec {text!r} has {len(numbers)} sizes but the layout names {axes}; "
                        f"give a layout with one of {MESH_AXES} per size")
    unknown = set(axes) - set(MESH_AXES)
    if unknown or len(set(axes)) != len(axes):
        raise MeshError(f"mesh layout {axes} must name distinct axes from {MESH_AXES}")
    sizes: dict[str, int] = dict.fromkeys(MESH_AXES, 1)
    sizes.update(zip(axes, numbers, strict=True))
    return MeshSpec(sizes)


def make_mesh(spec: MeshSpec, devices: Sequence[MeshDevice] | None = None) -> Mesh:
    """A Mesh over all (global) devices; with several processes the leading axes span hosts."""
    devices = list(devices if devices is not None else jax.devices())
    if spec.num_devices != len(devices):
        raise MeshError(
            f"mesh {spec.describe()} needs {spec.num_devices} devices but {len(devices)} are available "
            f"({jax.process_count()} process(es) x {jax.local_device_count()} local {devices[0].platform} devices). "
            "Fix: pass a --mesh whose sizes multiply to the device count, or start the matching processes."
        )
    processes = sorted({d.process_index for d in devices})
    if len(processes) == 1:
        grid = mesh_utils.create_device_mesh(spec.shape, devices)
    else:
        grid = _host_major_grid(spec, devices, len(processes))
    return Mesh(grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def _host_major_grid(spec: MeshSpec, devices: Sequence[MeshDevice], num_processes: int) -> np.ndarray:
    """Hosts along the leading axes, each host's devices along the trailing ones (ICI inside a host)."""
    per_host = len(devices) // num_processes
    local_shape, remaining = [], per_host
    for size in reversed(spec.shape):
        take = np.gcd(size, remaining)
        local_shape.insert(0, take)
        remaining //= take
    if remaining != 1:
        raise MeshError(f"mesh {spec.describe()} cannot place {per_host} devices of one host on its trailing axes")
    dcn_shape = tuple(total // local for total, local in zip(spec.shape, local_shape, strict=True))
    return mesh_utils.create_hybrid_device_mesh(
        tuple(local_shape), dcn_shape, devices, process_is_granule=True
    )
