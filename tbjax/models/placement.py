"""A policy placed on a mesh, and the check that the mesh divides it.

The check reads shapes alone (no devices, no allocation, no compile) wherever a mesh is built from a config,
so a layout that cannot shard the model fails in seconds, naming the parameter, the dimension, the mesh axis
and a layout of the same devices that works, instead of after loading the checkpoint or minutes into a
compile. `load_policy` is the one way a run loads an HF directory onto its checked mesh (`load_served_policy`
the way a server process loads it as a run did).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from flax import nnx
from jax.sharding import Mesh

from tbjax.config import Config
from tbjax.models import ModelConfig, Qwen, from_pretrained
from tbjax.models.hf.importer import abstract_model
from tbjax.parallel.mesh import MESH_AXES, MeshSpec, make_mesh, parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules, param_shardings


def check_mesh_divides(model_config: ModelConfig, spec: MeshSpec, rules: ShardingRules) -> None:
    """Raises ShardingError (parameter, dimension, mesh axis, suggested layout) when a parameter of the model
    does not divide the mesh axes its logical axes map to."""
    _, abstract = abstract_model(model_config)
    try:
        param_shardings(abstract, spec.abstract(), rules)
    except ShardingError as error:
        better = suggest_layout(abstract, spec.num_devices, rules)
        hint = (f" Suggested layout for these {spec.num_devices} devices: {mesh_flags(better)} "
                f"({better.describe()})." if better else
                f" No layout of {spec.num_devices} devices divides every parameter; change the device count.")
        raise ShardingError(f"{error}{hint}") from None


def suggest_layout(abstract: nnx.State, devices: int, rules: ShardingRules) -> MeshSpec | None:
    """The layout of `devices` that divides every parameter and shards them the most (fsdp x tensor), with the
    least tensor parallelism among those (its collectives sit on every layer's critical path); the remaining
    factor is data parallelism (replicas, e.g. across hosts whose count divides nothing)."""
    candidates = []
    for fsdp, tensor in itertools.product(_divisors(devices), repeat=2):
        if devices % (fsdp * tensor) == 0:
            sizes = {"data": devices // (fsdp * tensor), "fsdp": fsdp, "tensor": tensor}
            candidates.append(MeshSpec(sizes))
    candidates.sort(key=lambda s: (-s.sizes["fsdp"] * s.sizes["tensor"], s.sizes["tensor"]))
    for spec in candidates:
        try:
            param_shardings(abstract, spec.abstract(), rules)
        except ShardingError:
            continue
        return spec
    return None


def mesh_flags(spec: MeshSpec) -> str:
    """A MeshSpec as the command-line flags that make it, e.g. '--mesh 3x8 mesh.layout=[data,tensor]' (the
    layout always spelled out: a config's own layout would otherwise reinterpret the sizes)."""
    axes = [a for a in MESH_AXES if spec.sizes[a] > 1] or ["fsdp"]
    return f"--mesh {'x'.join(str(spec.sizes[a]) for a in axes)} mesh.layout=[{','.join(axes)}]"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def checked_mesh(shape: str, layout: Sequence[str] | None, model_config: ModelConfig) -> Mesh:
    """The config's mesh over this job's devices, after checking that it divides the model."""
    spec = parse_mesh_spec(shape, layout)
    check_mesh_divides(model_config, spec, ShardingRules())
    return make_mesh(spec)


def load_policy(path: Path, config: Config) -> Qwen:
    """The HF directory `path` as the run configures it (dtypes, attention, remat, scan), sharded on the
    configured mesh once the mesh is checked against the model's shapes."""
    runtime = config.model.runtime()
    mesh = checked_mesh(config.mesh.shape, config.mesh.layout, ModelConfig.from_pretrained(path, runtime))
    return from_pretrained(path, mesh=mesh, runtime=runtime)


def load_served_policy(path: Path, config: Config) -> Qwen:
    """`load_policy` for a server process (`tbjax.serve --run-config`), which may see more devices than the run
    had (a host's every GPU, a test's forced CPU devices): a run on a one-device mesh is served on this process's
    first device; any larger mesh must match this process's devices, as it matched the run's."""
    if math.prod(parse_mesh_spec(config.mesh.shape, config.mesh.layout).shape) == 1:
        return from_pretrained(path, runtime=config.model.runtime())
    return load_policy(path, config)
