"""New weights written into the parameters the engine serves, in place: a publish builds no second model
(`from_pretrained` held about five copies of every tensor on the way).

Pre-flight (`open_checked`), before any parameter changes: config.json's sizes and parsed architecture are the
served model's, every HF tensor a served parameter needs is there with its shape, and every safetensors file
is complete and holds dtypes safetensors knows. A failure is a WeightsError naming the problem and its fix, and the
engine serves on exactly as before.

The load (`write_weights`) goes parameter by parameter and stack entry by stack entry (a scanned model's
layers and MoE experts are stacked on a parameter's leading dims). Each HF tensor's bytes, a view of its
memory-mapped file (mapped_checkpoint.py), go to the parameter's devices in HF layout; one compiled program
rearranges them (`HfTransform.from_hf`), casts them to the parameter's dtype and writes them over the entry,
donating the old parameter so that the result takes its buffer. The stack index is an argument of that
program, so every parameter of one shape, sharding, rearrangement and dtypes shares it, however many layers
there are. A fused HF tensor (Gated DeltaNet's in_proj_qkv and conv1d) fills several parameters, each from its
own rows. Extra device memory at any moment: `IN_FLIGHT_BYTES` of HF tensors, or one tensor if it is larger (on
each device of the parameter's mesh). On CPU a tensor that lies 64-byte aligned in its file (safetensors_writer
aligns them) is not even copied: the program reads it from the mapped file.

The same program says whether the entry it wrote is finite. Those answers are read `IN_FLIGHT_BYTES` behind the
dispatch (`EntryWrites`), so the host maps, transfers and dispatches the next tensors while the devices write
the earlier ones, and at most that many bytes of HF tensors wait on the devices. When tensor k holds NaN or Inf,
or a read fails, tensors up to k (and a few after it) are written already: the engine then writes back what it
served before (served_weights.py), or refuses requests until a load succeeds.

A file truncated in place while it is mapped would fault the process (SIGBUS) rather than raise; publishers
write each version into a new directory and never rewrite a file that may be loading.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Collection, Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from tbjax.engine.mapped_checkpoint import MappedCheckpoint
from tbjax.engine.weight_checks import (
    DIVERGED,
    WeightsError,
    refuse_other_architecture,
    refuse_other_sizes,
    unreadable,
)
from tbjax.models.architecture import ModelConfig
from tbjax.models.hf.importer import check_shapes
from tbjax.models.hf.layout import HfTransform, ParamPath, TensorLayout, hf_layouts
from tbjax.parallel.sharding import path_name

IN_FLIGHT_BYTES = 256 * 1024**2  # HF tensors dispatched to the devices whose write is not yet confirmed


@dataclasses.dataclass(frozen=True)
class CheckedDirectory:
    """A directory that passed the pre-flight: its mapped tensors, and which of them each served parameter takes."""

    directory: Path
    tensors: MappedCheckpoint
    layouts: dict[ParamPath, TensorLayout]


def open_checked(hf_dir: str | Path, served: ModelConfig) -> CheckedDirectory:
    """`hf_dir` checked against the served model (the module docstring's pre-flight); WeightsError if refused."""
    directory = Path(hf_dir)
    try:
        refuse_other_sizes(directory, served)
        refuse_other_architecture(directory, ModelConfig.from_pretrained(directory, served.runtime), served)
        layouts = hf_layouts(served)
        tensors = MappedCheckpoint(directory)
        check_shapes(tensors, layouts)
    except (WeightsError, MemoryError):
        raise
    except Exception as error:  # the directory is outside input: any reader's failure means it is unreadable
        raise unreadable(directory, error) from error
    return CheckedDirectory(directory, tensors, layouts)


def write_weights(state: nnx.State, checked: CheckedDirectory, only: Collection[str] | None = None) -> None:
    """Writes `checked`'s tensors (those named in `only`, if given: a delta's) into the served parameters of
    `state`, in place (their Variables take the new arrays; the old ones are donated). WeightsError at the first
    entry that is not finite (the module docstring says which others are written by then)."""
    writes = EntryWrites(checked.directory)
    for entry in served_entries(state, checked.layouts, only):
        layout, param = entry.layout, entry.variable.get_value()
        host = checked.tensors.rows(entry.name, layout.row_offset, layout.row_offset + layout.hf_shape[0])
        updated, finite = _write_entry(param, jax.device_put(host, replicated(param.sharding)), entry.traced_index,
                                       transform=layout.transform, sharding=param.sharding)
        writes.store(entry, updated, finite, host.nbytes)
    writes.confirm_all()


@dataclasses.dataclass(frozen=True)
class ServedEntry:
    """One stack entry of a served parameter, which one HF tensor (or a range of its rows) fills."""

    path: ParamPath
    layout: TensorLayout
    index: tuple[int, ...]
    variable: nnx.Variable

    @property
    def name(self) -> str:
        return self.layout.name(self.index)

    @property
    def traced_index(self) -> tuple[np.int32, ...]:
        """The index as the write programs take it (an argument, so one program serves every entry)."""
        return tuple(np.int32(i) for i in self.index)


class EntryWrites:
    """The entries a load has dispatched: each written parameter takes its Variable's place at once, and whether
    the entry it wrote is finite is read once `IN_FLIGHT_BYTES` more have been dispatched (or at the end), so
    the host never waits on the entry it just dispatched."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._unconfirmed: collections.deque[tuple[ServedEntry, jax.Array, int]] = collections.deque()
        self._unconfirmed_bytes = 0

    def store(self, entry: ServedEntry, updated: jax.Array, finite: jax.Array, nbytes: int) -> None:
        """`updated` (a program's output) becomes `entry`'s parameter; `finite` (its answer) is checked later.
        WeightsError if an earlier entry's answer, read now, is that it is not finite."""
        entry.variable.set_value(updated)
        self._unconfirmed.append((entry, finite, nbytes))
        self._unconfirmed_bytes += nbytes
        while self._unconfirmed_bytes > IN_FLIGHT_BYTES:
            self._confirm_oldest()

    def confirm_all(self) -> None:
        """Waits for every dispatched write; WeightsError at the first entry that is not finite."""
        while self._unconfirmed:
            self._confirm_oldest()

    def _confirm_oldest(self) -> None:
        entry, finite, nbytes = self._unconfirmed.popleft()
        self._unconfirmed_bytes -= nbytes
        if not finite:
            raise WeightsError(f"{self.source}: parameters hold NaN or Inf (tensor {entry.name}, for "
                               f"{path_name(entry.path)}). {DIVERGED}")


def served_entries(state: nnx.State, layouts: dict[ParamPath, TensorLayout],
                   only: Collection[str] | None = None) -> Iterator[ServedEntry]:
    """Every stack entry of the served parameters in `state` (those whose HF tensor `only` names, if given), in
    `hf_layouts` order."""
    variables = dict(nnx.to_flat_state(state))
    for path, layout in layouts.items():
        for index in np.ndindex(*layout.stack_shape):
            if only is None or layout.name(index) in only:
                yield ServedEntry(path, layout, index, variables[path])


@functools.partial(jax.jit, donate_argnums=0, static_argnames=("transform", "sharding"))
def _write_entry(param: jax.Array, hf: jax.Array, index: tuple[jax.Array, ...], *, transform: HfTransform,
                 sharding: Sharding) -> tuple[jax.Array, jax.Array]:
    """`param` (donated) with its stack entry at `index` (() for an unstacked parameter) set to the HF tensor `hf`
    rearranged and cast to its dtype, laid out by `sharding`; and whether that entry is finite."""
    entry = transform.from_hf(hf).astype(param.dtype)
    stacked = entry.reshape((1,) * len(index) + entry.shape)
    updated = lax.dynamic_update_slice(param, stacked, (*index, *(0,) * entry.ndim))
    return lax.with_sharding_constraint(updated, sharding), jnp.all(jnp.isfinite(entry))


def replicated(sharding: Sharding) -> Sharding:
    """A whole copy on every device of `sharding`: where an HF tensor waits to be rearranged into a parameter."""
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, PartitionSpec(), memory_kind=sharding.memory_kind)
    if isinstance(sharding, SingleDeviceSharding):
        return sharding
    raise TypeError(f"the engine's parameters are laid out by a {type(sharding).__name__}; in-place loading "
                    "knows NamedSharding and SingleDeviceSharding")
