"""Loads an HF Qwen directory straight onto target shardings.

The model is built abstractly (`nnx.eval_shape`, no allocation); each parameter is then created with
`jax.make_array_from_callback`, whose callback reads from safetensors only the slice that one device
holds. Host memory stays bounded by one tensor, and each process reads only what its devices own.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from tbjax.models.architecture import ModelConfig
from tbjax.models.hf.layout import UNMODELLED_PARTS, TensorLayout, hf_layouts
from tbjax.models.hf.safetensors_reader import CheckpointError, SafetensorsReader
from tbjax.models.qwen import Qwen
from tbjax.parallel.mesh import MESH_AXES
from tbjax.parallel.sharding import ShardingRules, path_name
from tbjax.sections.model import RuntimeConfig

log = logging.getLogger(__name__)


def abstract_model(cfg: ModelConfig, mesh: Mesh | None = None,
                   rules: ShardingRules | None = None) -> tuple[nnx.GraphDef, nnx.State]:
    return nnx.split(nnx.eval_shape(lambda: Qwen(cfg, nnx.Rngs(0), mesh=mesh, rules=rules)))


def single_device_mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), MESH_AXES)


def _read_param(
    reader: SafetensorsReader, layout: TensorLayout, dtype: np.dtype, index: tuple[slice, ...] | None
) -> np.ndarray:
    """One device's block of a parameter: its stack entries, each read as a slice of one HF tensor. `index` is
    the block's, as jax.make_array_from_callback passes it (always one: its type allows None)."""
    if index is None:
        raise ValueError(f"jax asked for a block of {layout.names.flat[0]} without its index")
    full = tuple(s if isinstance(s, slice) else slice(None) for s in index)
    bounds = [slice(*s.indices(n)[:2]) for s, n in zip(full, layout.param_shape, strict=True)]
    stack_dims = len(layout.stack_shape)
    stack_ranges = [range(b.start, b.stop) for b in bounds[:stack_dims]]
    blocks = []
    for offsets in np.ndindex(*[len(r) for r in stack_ranges]):
        name = layout.name(tuple(r[i] for r, i in zip(stack_ranges, offsets, strict=True)))
        blocks.append(layout.read_block(reader.read, name, tuple(bounds[stack_dims:])).astype(dtype))
    shape = [len(r) for r in stack_ranges] + [b.stop - b.start for b in bounds[stack_dims:]]
    return np.stack(blocks).reshape(shape) if stack_dims else blocks[0]


def check_shapes(reader: SafetensorsReader, layouts: dict[tuple, TensorLayout]) -> None:
    """Fails before any allocation when a tensor is missing or has the wrong shape for config.json."""
    for path, layout in layouts.items():
        for name in {layout.name(idx) for idx in np.ndindex(*layout.stack_shape)}:
            shape = reader.shape(name)
            if shape != layout.file_shape:
                raise CheckpointError(
                    f"{reader.directory}: tensor {name} has shape {list(shape)} but config.json implies "
                    f"{list(layout.file_shape)} for {path_name(path)}; config and weights do not belong together."
                )


def _log_unused(unused: set[str]) -> None:
    """Says which checkpoint tensors stay unused: a multimodal Qwen3.5's vision encoder and MTP head by name
    (tbjax trains the language model only), anything else as a count and an example."""
    for prefix, part in UNMODELLED_PARTS.items():
        names = {n for n in unused if n.startswith(prefix)}
        if names:
            log.info("ignoring the %s: %d tensors under %s (tbjax loads the language model only)",
                     part, len(names), prefix)
            unused -= names
    if unused:
        log.info("ignoring %d checkpoint tensors tbjax does not use (e.g. %s)", len(unused), sorted(unused)[0])


def from_pretrained(
    path: str | Path,
    *,
    dtype: str = "float32",
    mesh: Mesh | None = None,
    runtime: RuntimeConfig | None = None,
    rules: ShardingRules | None = None,
) -> Qwen:
    """An HF Qwen directory -> a Qwen model whose parameters are sharded over `mesh` (one device if None).

    `dtype` sets parameter and compute dtypes unless `runtime` is given.
    """
    runtime = runtime or RuntimeConfig(param_dtype=dtype, compute_dtype=dtype)
    cfg = ModelConfig.from_pretrained(path, runtime)
    reader = SafetensorsReader(path)
    layouts = hf_layouts(cfg)
    check_shapes(reader, layouts)
    rules = rules or ShardingRules()
    graphdef, abstract_state = abstract_model(cfg, mesh, rules)
    mesh = mesh or single_device_mesh()
    _log_unused(reader.names() - {n for lay in layouts.values() for n in lay.names.flat})

    def load(path: tuple, var: nnx.Variable) -> jax.Array:
        layout = layouts[tuple(getattr(p, "key", p) for p in path)]
        logical = var.get_metadata()["logical_axes"]
        sharding = NamedSharding(mesh, rules.param_spec(path_name(path), var.shape, logical, mesh))
        return jax.make_array_from_callback(
            layout.param_shape, sharding, lambda index: _read_param(reader, layout, np.dtype(var.dtype), index)
        )

    state = nnx.map_state(load, abstract_state)
    model = nnx.merge(graphdef, state)
    model.source_dir = str(path)
    return model

