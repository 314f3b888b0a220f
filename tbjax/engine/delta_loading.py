"""A published delta (tbjax.models.hf.delta) applied in place to the served parameters.

A delta holds what changed since the version before it (`delta.json`: `previous`, a directory beside it). The
engine applies one only on that version: it must be serving the directory `previous` names, or the delta is
refused before anything changes (a WeightsError naming the version to load whole). The pre-flight also checks
config.json against the served model, that every tensor it names is one of the model's with the model's shape,
and, for an `elements` delta, that its indices lie inside their tensors.

- `tensors`: the changed tensors are written as a whole load writes them (weight_loading.write_weights, for the
  stack entries the delta holds).
- `elements`: each changed stack entry is rearranged to HF layout on the devices, its changed elements set
  (the values cast to the parameter's dtype, as a whole load casts them), rearranged back and written over the
  entry, the old parameter donated. Index lists are padded to a power of two (the padding dropped), so the
  programs compiled stay few however many elements change.

Both end exactly where loading the whole version would: the tests compare the parameters bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from jax.sharding import Sharding
from safetensors.numpy import load_file

from tbjax.engine.mapped_checkpoint import MappedCheckpoint
from tbjax.engine.weight_checks import WeightsError, refuse_other_architecture, refuse_other_sizes, unreadable
from tbjax.engine.weight_loading import CheckedDirectory, EntryWrites, replicated, served_entries, write_weights
from tbjax.models.architecture import ModelConfig
from tbjax.models.hf.delta import ELEMENTS_FILE
from tbjax.models.hf.layout import HfTransform, ParamPath, TensorLayout, hf_layouts
from tbjax.models.hf.versions import DELTA_FILE


@dataclasses.dataclass(frozen=True)
class CheckedDelta:
    """A delta that passed the pre-flight."""

    directory: Path
    granularity: Literal["tensors", "elements"]
    names: frozenset[str]  # the HF tensors it changes
    layouts: dict[ParamPath, TensorLayout]
    tensors: MappedCheckpoint | None  # `tensors`: the changed tensors
    elements: dict[str, tuple[np.ndarray, np.ndarray]]  # `elements`: name -> (flat indices, values)


def is_delta(hf_dir: str | Path) -> bool:
    return (Path(hf_dir) / DELTA_FILE).is_file()


def open_delta(hf_dir: str | Path, served: ModelConfig, serving: Path | None) -> CheckedDelta:
    """`hf_dir`'s delta checked against the served model and the directory it serves (`serving`); WeightsError
    when refused."""
    directory = Path(hf_dir)
    try:
        record = json.loads((directory / DELTA_FILE).read_text())
        previous = directory.parent / str(record["previous"])
        granularity = record["granularity"]
        names = frozenset(str(n) for n in record["tensors"])
    except Exception as error:  # outside input: a delta.json that does not read is unreadable weights
        raise unreadable(directory, error) from error
    if serving is None or serving.resolve() != previous.resolve():
        raise WeightsError(f"{directory} is a delta on {previous}, but this engine serves "
                           f"{serving or 'weights built in code'}; load a whole version first (the newest one the "
                           f"delta's chain starts from: {record.get('base')})")
    if granularity not in ("tensors", "elements"):
        raise WeightsError(f"{directory}: delta granularity {granularity!r} is neither 'tensors' nor 'elements'")
    try:
        refuse_other_sizes(directory, served)
        refuse_other_architecture(directory, ModelConfig.from_pretrained(directory, served.runtime), served)
        layouts = hf_layouts(served)
        shapes = {layout.name(i): layout.file_shape for layout in layouts.values()
                  for i in np.ndindex(*layout.stack_shape)}
        unknown = sorted(names - shapes.keys())
        if unknown:
            raise WeightsError(f"{directory}: the delta changes tensors the served model does not have "
                               f"({', '.join(unknown[:4])}); it belongs to another model")
        tensors = MappedCheckpoint(directory) if granularity == "tensors" else None
        elements = {} if tensors is not None else _read_elements(directory, names, shapes)
        if tensors is not None:
            _refuse_other_tensors(tensors, names, shapes)
    except (WeightsError, MemoryError):
        raise
    except Exception as error:
        raise unreadable(directory, error) from error
    return CheckedDelta(directory, granularity, names, layouts, tensors, elements)


def _refuse_other_tensors(tensors: MappedCheckpoint, names: frozenset[str], shapes: dict[str, tuple[int, ...]]) -> None:
    if tensors.names() != names:
        raise WeightsError(f"{tensors.directory}: its files hold {len(tensors.names())} tensors where delta.json "
                           f"names {len(names)}; publish it again")
    for name in sorted(names):
        if tensors.shape(name) != shapes[name]:
            raise WeightsError(f"{tensors.directory}: tensor {name} has shape {list(tensors.shape(name))}, the "
                               f"served model's is {list(shapes[name])}")


def _read_elements(directory: Path, names: frozenset[str],
                   shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    stored = load_file(str(directory / ELEMENTS_FILE))
    elements = {}
    for name in sorted(names):
        indices, values = stored.get(f"{name}.indices"), stored.get(f"{name}.values")
        if indices is None or values is None or indices.ndim != 1 or indices.shape != values.shape:
            raise WeightsError(f"{directory}: {ELEMENTS_FILE} lacks matching {name}.indices and {name}.values")
        if indices.dtype.kind not in "iu" or values.dtype.kind not in "fV":
            raise WeightsError(f"{directory}: {name}'s indices must be integers and its values floats, not "
                               f"{indices.dtype} and {values.dtype}")
        size = math.prod(shapes[name])
        if len(indices) and (indices.min() < 0 or indices.max() >= size):
            raise WeightsError(f"{directory}: {name}'s indices reach outside its {size} elements")
        elements[name] = (indices.astype(np.int64), values)
    return elements


def write_delta(state: nnx.State, checked: CheckedDelta) -> None:
    """Applies `checked` to the served parameters in `state`, in place. WeightsError at the first changed entry
    that is not finite (weight_loading's docstring says which others are written by then)."""
    if checked.tensors is not None:
        write_weights(state, CheckedDirectory(checked.directory, checked.tensors, checked.layouts), checked.names)
        return
    writes = EntryWrites(checked.directory)
    for entry in served_entries(state, checked.layouts, checked.names):
        indices, values = _part(checked.elements[entry.name], entry.layout)
        param = entry.variable.get_value()
        where = replicated(param.sharding)
        updated, finite = _scatter_entry(param, jax.device_put(indices, where), jax.device_put(values, where),
                                         entry.traced_index, transform=entry.layout.transform, sharding=param.sharding)
        writes.store(entry, updated, finite, indices.nbytes + values.nbytes)
    writes.confirm_all()


def _part(change: tuple[np.ndarray, np.ndarray], layout: TensorLayout) -> tuple[np.ndarray, np.ndarray]:
    """The changes that fall in `layout`'s rows of its HF tensor (all of it, unless fused), indexed within those
    rows and padded to a power of two with an index past the end (dropped by the scatter)."""
    indices, values = change
    row = math.prod(layout.hf_shape[1:])
    low, high = layout.row_offset * row, (layout.row_offset + layout.hf_shape[0]) * row
    mine = (indices >= low) & (indices < high)
    indices, values = indices[mine] - low, values[mine]
    padded = 1 << max(len(indices) - 1, 0).bit_length()
    size = high - low
    return (np.concatenate([indices, np.full(padded - len(indices), size)]).astype(np.int64),
            np.concatenate([values, np.zeros(padded - len(values), values.dtype)]))


@functools.partial(jax.jit, donate_argnums=0, static_argnames=("transform", "sharding"))
def _scatter_entry(param: jax.Array, indices: jax.Array, values: jax.Array, index: tuple[jax.Array, ...], *,
                   transform: HfTransform, sharding: Sharding) -> tuple[jax.Array, jax.Array]:
    """`param` (donated) with the elements `indices` (flat, in HF layout) of its stack entry at `index` set to
    `values` cast to its dtype; and whether those values are finite."""
    entry = param[index] if index else param
    hf = transform.to_hf(entry)
    changed = hf.reshape(-1).at[indices].set(values.astype(param.dtype), mode="drop").reshape(hf.shape)
    new_entry = transform.from_hf(changed)
    stacked = new_entry.reshape((1,) * len(index) + new_entry.shape)
    updated = lax.dynamic_update_slice(param, stacked, (*index, *(0,) * new_entry.ndim))
    return lax.with_sharding_constraint(updated, sharding), jnp.all(jnp.isfinite(values))
