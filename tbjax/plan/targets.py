"""The machines `python -m tbjax.compile` plans for, parsed from `--target`:

- `tpu:v5p-64` (a Cloud TPU slice by its name; v5p names count TensorCores, two per chip) or
  `tpu:v5p:2x2x6` (an explicit chip topology): compiled ahead of time without a TPU, through libtpu's
  topology descriptions, so the memory figures and out-of-memory errors are the TPU compiler's own.
- `cpu:3x8`: this host's CPU devices (forced to the count). It compiles the real programs, but XLA's CPU
  memory figures say nothing about an accelerator's, so there is no budget to check.
- `gpu-estimate[:h100|h200|a100]`: XLA cannot compile for a GPU it does not have, so this is an analytic
  estimate (tbjax.plan.memory) against the GPU's memory, and says so.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

GIB = 2**30

# Memory per device that libtpu 0.0.42.1's compiler makes available ("available HBM" in its
# RESOURCE_EXHAUSTED message), and how a slice name counts its chips.
TPU_GENERATIONS: dict[str, tuple[float, int, int]] = {  # name: (GiB per chip, slice-name units per chip, dims)
    "v5p": (95.74, 2, 3),
    "v5e": (15.75, 1, 2),
    "v6e": (31.25, 1, 2),
}
GPU_MEMORY_GB: dict[str, int] = {"h100": 80, "h200": 141, "a100": 80}


class TargetError(ValueError):
    """A --target that cannot be parsed or built; the message names the accepted forms."""


@dataclasses.dataclass(frozen=True)
class Target:
    kind: Literal["tpu", "cpu", "gpu-estimate"]
    text: str
    devices: int
    memory_bytes: int | None  # per device; None: no budget (CPU)
    topology: tuple[int, ...] = ()  # TPU chip grid
    generation: str = ""

    @property
    def compiles(self) -> bool:
        return self.kind != "gpu-estimate"

    @property
    def topology_name(self) -> str:
        return f"{self.generation}:{'x'.join(map(str, self.topology))}"

    def describe(self) -> str:
        budget = f", {self.memory_bytes / 1e9:.1f} GB per device" if self.memory_bytes else ""
        where = f" ({self.topology_name})" if self.kind == "tpu" else ""
        return f"{self.text}{where}: {self.devices} devices{budget}"


def parse_target(text: str) -> Target:
    kind, _, rest = text.partition(":")
    if kind == "tpu":
        return _tpu_target(text, rest)
    if kind == "cpu":
        try:
            sizes = [int(n) for n in rest.split("x")]
        except ValueError:
            sizes = []
        if not sizes or min(sizes) < 1:
            raise TargetError(f"--target {text!r}: give the CPU device grid, e.g. cpu:3x8 (24 devices)")
        return Target("cpu", text, math.prod(sizes), None)
    if kind == "gpu-estimate":
        gpu = rest or "h100"
        if gpu not in GPU_MEMORY_GB:
            raise TargetError(f"--target {text!r}: unknown GPU {gpu!r}; choose from {', '.join(GPU_MEMORY_GB)}")
        return Target("gpu-estimate", text, 0, GPU_MEMORY_GB[gpu] * 10**9, generation=gpu)
    raise TargetError(f"--target {text!r} is not one of tpu:v5p-64, tpu:v5p:2x2x6, cpu:3x8, gpu-estimate[:h100]")


def _tpu_target(text: str, rest: str) -> Target:
    generation, sep, shape = rest.partition(":")
    count = ""  # the size in a slice name (tpu:v5p-64)
    if not sep:
        generation, _, count = rest.partition("-")
    if generation not in TPU_GENERATIONS:
        raise TargetError(f"--target {text!r}: TPU generation {generation!r} is not one of "
                          f"{', '.join(TPU_GENERATIONS)} (e.g. tpu:v5p-64 or tpu:v5p:2x2x6)")
    gib, units_per_chip, dims = TPU_GENERATIONS[generation]
    try:
        topology = tuple(int(n) for n in shape.split("x")) if sep else _slice_topology(int(count) // units_per_chip,
                                                                                         dims)
    except ValueError:
        topology = ()
    if len(topology) != dims or min(topology) < 1:
        raise TargetError(f"--target {text!r}: give a {generation} slice name of at least 4 chips, a power of two "
                          f"(tpu:{generation}-{32 * units_per_chip}), or its {dims}-D chip topology "
                          f"(tpu:{generation}:{'x'.join(['2'] * dims)})")
    return Target("tpu", text, math.prod(topology), int(gib * GIB), topology, generation)


def _slice_topology(chips: int, dims: int) -> tuple[int, ...]:
    """The chip grid Cloud TPU gives a slice of `chips` (a power of two): from 2x2(x1), double the last of
    the smallest sides (v5p-64 = 32 chips -> 2x4x4; v5e-32 -> 4x8)."""
    if chips < 4 or chips & (chips - 1):
        raise ValueError(f"{chips} chips")
    grid = [2, 2] + [1] * (dims - 2)
    while math.prod(grid) < chips:
        smallest = min(grid)
        grid[max(i for i, n in enumerate(grid) if n == smallest)] *= 2
    return tuple(grid)


def tpu_devices(target: Target) -> list:
    """TPU devices of the target's topology, for a Mesh to compile against (needs libtpu, not a TPU)."""
    from jax.experimental import topologies

    bounds = (min(2, target.topology[0]), min(2, target.topology[1]), 1)  # 4 chips per host
    description = topologies.get_topology_desc(
        platform="tpu", topology_name=target.topology_name, chip_config_name="default",
        chips_per_host_bounds=bounds, num_slices=1, wrap=(False,) * 3)
    return list(description.devices)
