"""Writes a Qwen model as an HF directory that `transformers.AutoModelForCausalLM.from_pretrained` loads:
sharded safetensors with an index, config.json, generation_config.json and the tokenizer files.
A multimodal Qwen3.5 keeps its vision encoder and MTP head, copied unchanged from the checkpoint the model
was loaded from, so the directory is still a whole checkpoint of the architecture an engine serves.

Tensors are produced one HF tensor at a time (one layer of a scanned stack, one expert). One compiled program
per (parameter shape, sharding, layout, dtype) rearranges a stack entry into HF layout and casts it on the
devices, gathering it whole on every process; the stack index is its argument, so a model with more layers
compiles no more programs. The host copies each tensor once, straight into its place in a safetensors file
whose header was written first (`safetensors_writer`), while the devices compute the next ones; at most
`IN_FLIGHT_BYTES` wait for their copy, so host memory stays bounded by that, not by a shard. Every process
computes the same gathers (they are collectives); the driver writes, or with `writes=True` each process
writes its own copy (a host's replica, for servers on that host).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from tbjax.models.architecture import ModelConfig
from tbjax.models.hf.layout import UNMODELLED_PARTS, HfTransform, TensorLayout, hf_layouts
from tbjax.models.hf.safetensors_reader import INDEX_FILE, SINGLE_FILE, SafetensorsReader
from tbjax.models.hf.safetensors_writer import SafetensorsFile, TensorSpec
from tbjax.models.qwen import Qwen
from tbjax.parallel.distributed import is_driver
from tbjax.parallel.host_replica import local_replica
from tbjax.sections.lora import LoraError

TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "chat_template.jinja", "added_tokens.json",
)
DEFAULT_SHARD_BYTES = 4 * 1024**3
IN_FLIGHT_BYTES = 512 * 1024**2  # gathered tensors waiting for their host copy
COPY_THREADS = 2  # host copies into the files run beside the gathers (numpy releases the GIL while copying)
METADATA = {"format": "pt"}
Sink = Callable[[str, int, np.ndarray], None]  # (HF name, first row, values): where computed tensors go


@functools.cache
def _gather_program(sharding: jax.sharding.Sharding, transform: HfTransform, dtype: np.dtype) -> Callable:
    """The compiled rearrangement of one stack entry of a parameter (`index`: traced, one int per stack dim)
    into HF layout and `dtype`, whole on every device of a mesh-sharded parameter's mesh."""
    if isinstance(sharding, NamedSharding):
        out = NamedSharding(sharding.mesh, PartitionSpec())
    elif sharding.is_fully_addressable and len(sharding.device_set) == 1:
        out = sharding
    else:
        raise TypeError(f"a parameter spread over devices must be sharded over a mesh (NamedSharding), not "
                        f"{type(sharding).__name__}")

    def rearrange(array: jax.Array, index: tuple[jax.Array, ...]) -> jax.Array:
        return transform.to_hf(array[index] if index else array).astype(dtype)
    return jax.jit(rearrange, out_shardings=out)


def _hf_entries(model: Qwen, dtype: np.dtype, *, writes: bool = True,
                ) -> Iterator[tuple[TensorLayout, tuple[int, ...], jax.Array]]:
    """(layout, stack index, the entry in HF layout on a local device) for every stack entry of every
    parameter, in `hf_layouts` order, each dispatched as the previous is taken (the devices run ahead).

    A parameter this process holds whole (any parameter of a single process; a data-parallel replica in a
    multi-host job) is gathered over this process's devices alone, and only when it `writes`. One that other
    processes hold parts of is gathered over the whole job on every process, in the same order (a collective)."""
    params = nnx.to_flat_state(nnx.state(model, nnx.Param))
    flat = {tuple(getattr(p, "key", p) for p in path): var for path, var in params}
    for path, layout in hf_layouts(model.config).items():
        value = flat[path].get_value()
        local = local_replica(value)
        if local is not None and not writes:
            continue
        source = value if local is None else local
        program = _gather_program(source.sharding, layout.transform, dtype)
        for idx in np.ndindex(*layout.stack_shape):
            gathered = program(source, tuple(np.int32(i) for i in idx))
            if len(source.sharding.device_set) > 1:  # collectives: one program in flight at a time (XLA's CPU
                gathered.block_until_ready()  # collectives deadlocked with several); host copies still overlap
            yield layout, idx, gathered.addressable_data(0)


def hf_tensors(model: Qwen, dtype: np.dtype) -> Iterator[tuple[str, np.ndarray]]:
    """(HF name, tensor) for every weight of `model`, one at a time, in HF layout and `dtype`. The parts of a
    fused HF tensor are held until the last arrives, then returned as one."""
    parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    for layout, idx, entry in _hf_entries(model, dtype):
        name, tensor = layout.name(idx), np.asarray(entry)
        if layout.full_rows is None:
            yield name, tensor
            continue
        parts.setdefault(name, []).append((layout.row_offset, tensor))
        if sum(len(part) for _, part in parts[name]) == layout.full_rows:
            yield name, np.concatenate([part for _, part in sorted(parts.pop(name), key=lambda p: p[0])])


def hf_specs(model: Qwen, dtype: np.dtype) -> list[TensorSpec]:
    """The HF tensors `hf_tensors` gives, in its order (a fused tensor where its last part arrives), without
    computing any: what a file header needs ahead of the data."""
    layouts = hf_layouts(model.config)
    parts_left = collections.Counter(layout.name(idx) for layout in layouts.values() if layout.full_rows is not None
                                     for idx in np.ndindex(*layout.stack_shape))
    specs = []
    for layout in layouts.values():
        for idx in np.ndindex(*layout.stack_shape):
            name = layout.name(idx)
            if layout.full_rows is not None:
                parts_left[name] -= 1
                if parts_left[name]:
                    continue
            specs.append(TensorSpec(name, layout.file_shape, dtype))
    return specs


def fill_hf_tensors(model: Qwen, dtype: np.dtype, sink: Sink | None) -> None:
    """Computes every HF tensor of `model` and hands each (its rows, for a part of a fused tensor) to
    `sink(name, first_row, values)` on the copy threads; `sink` None (a process that writes nothing) only takes
    part in the gathers that need it."""
    waiting: collections.deque[tuple[Future[None], int]] = collections.deque()
    waiting_bytes = 0
    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="hf-copy") as copies:
        for layout, idx, entry in _hf_entries(model, dtype, writes=sink is not None):
            if sink is None:
                entry.block_until_ready()
                continue
            deliver = functools.partial(_deliver, sink, layout.name(idx), layout.row_offset, entry)
            waiting.append((copies.submit(deliver), entry.nbytes))
            waiting_bytes += entry.nbytes
            while waiting_bytes > IN_FLIGHT_BYTES:
                done, nbytes = waiting.popleft()
                done.result()
                waiting_bytes -= nbytes
        for done, _ in waiting:
            done.result()


def _deliver(sink: Sink, name: str, first_row: int, entry: jax.Array) -> None:
    sink(name, first_row, np.asarray(entry))  # the device-to-host copy, where there is one, is here


def unmodelled_specs(model: Qwen) -> list[TensorSpec]:
    """The source checkpoint's tensors of parts tbjax does not model (vision encoder, MTP head), as they are."""
    source = getattr(model, "source_dir", None)
    if not source or not Path(source).is_dir():
        return []
    reader = SafetensorsReader(source)
    return [TensorSpec(name, reader.shape(name), reader.dtype(name)) for name in sorted(reader.names())
            if name.startswith(tuple(UNMODELLED_PARTS))]


def _copy_unmodelled(model: Qwen, specs: list[TensorSpec], sink: Sink) -> None:
    if specs:
        reader = SafetensorsReader(getattr(model, "source_dir", ""))  # unmodelled_specs found it
        for spec in specs:
            sink(spec.name, 0, reader.read(spec.name, (slice(None),)))


def export_dtype(config: ModelConfig, dtype: str | None = None) -> np.dtype:
    """The dtype an export writes: `dtype`, else the checkpoint's (config.json), else the parameters'."""
    hf = config.hf_config
    name = dtype or hf.get("dtype") or hf.get("torch_dtype") or config.runtime.param_dtype
    return np.dtype(jax.numpy.dtype(name))


def save_pretrained(
    model: Qwen,
    out_dir: str | Path,
    *,
    dtype: str | None = None,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
    tokenizer_dir: str | Path | None = None,
    writes: bool | None = None,
) -> Path:
    """Writes `model` to `out_dir` in HF format. dtype defaults to the checkpoint's own (config.json). A model
    with LoRA adapters is refused: HF's weights have no place for them, and dropping them would save the base.
    Every process must call this (the gathers are collectives); `writes` says whether this one writes
    `out_dir` (default: the driver alone)."""
    if model.lora_spec is not None:
        raise LoraError("the model carries LoRA adapters, which an HF checkpoint cannot hold: merge them first "
                        "(tbjax.models.lora.merge_adapters) or save the adapter alone "
                        "(tbjax.models.hf.peft_adapter.save_adapter)")
    writes = is_driver() if writes is None else writes
    np_dtype = export_dtype(model.config, dtype)
    if not writes:
        fill_hf_tensors(model, np_dtype, None)
        return Path(out_dir)
    return write_hf_directory(model, out_dir, np_dtype, hf_specs(model, np_dtype),
                              lambda sink: fill_hf_tensors(model, np_dtype, sink), max_shard_bytes=max_shard_bytes,
                              tokenizer_dir=tokenizer_dir)


def write_hf_directory(model: Qwen, out_dir: str | Path, dtype: np.dtype, specs: list[TensorSpec],
                       produce: Callable[[Sink], None], *, max_shard_bytes: int = DEFAULT_SHARD_BYTES,
                       tokenizer_dir: str | Path | None = None, unmodelled: bool = True) -> Path:
    """An HF directory of `model`'s config, tokenizer and the tensors `specs` lists (and, with `unmodelled`, the
    source's unmodelled parts), whose values `produce(sink)` hands to the sink: each file's header is written
    first, then the values at their places as they come."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    extra = unmodelled_specs(model) if unmodelled else []
    shards = _shard(specs + extra, max_shard_bytes)
    names = [f"shard-{i:05d}.tmp" for i in range(len(shards))]
    files = [SafetensorsFile(out / name, shard, METADATA) for name, shard in zip(names, shards, strict=True)]
    holder = {spec.name: file for file, shard in zip(files, shards, strict=True) for spec in shard}

    def sink(name: str, first_row: int, values: np.ndarray) -> None:
        holder[name].write(name, values, first_row)
    try:
        produce(sink)
        _copy_unmodelled(model, extra, sink)
    finally:
        for file in files:
            file.close()
    weight_map = {spec.name: i for i, shard in enumerate(shards) for spec in shard}
    _finalise(out, names, weight_map, sum(spec.nbytes for shard in shards for spec in shard))
    _write_config(model, out, dtype)
    _copy_tokenizer(Path(tokenizer_dir or getattr(model, "source_dir", "") or out), out)
    return out


def _shard(specs: list[TensorSpec], max_shard_bytes: int) -> list[list[TensorSpec]]:
    """`specs` in order, cut into files of at most `max_shard_bytes` (a bigger tensor alone in its file)."""
    shards: list[list[TensorSpec]] = [[]]
    size = 0
    for spec in specs:
        if size and size + spec.nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(spec)
        size += spec.nbytes
    return shards


def _finalise(out: Path, files: list[str], weight_map: dict[str, int], total_bytes: int) -> None:
    """Renames temporary shards to HF names (one file: model.safetensors; else -0000i-of-0000n + index)."""
    if len(files) == 1:
        os.replace(out / files[0], out / SINGLE_FILE)
        (out / INDEX_FILE).unlink(missing_ok=True)
        return
    final = [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
    for tmp, name in zip(files, final, strict=True):
        os.replace(out / tmp, out / name)
    names = {name: final[shard] for name, shard in sorted(weight_map.items())}
    index = {"metadata": {"total_size": total_bytes}, "weight_map": names}
    (out / INDEX_FILE).write_text(json.dumps(index, indent=2))
    (out / SINGLE_FILE).unlink(missing_ok=True)


def _write_config(model: Qwen, out: Path, dtype: np.dtype) -> None:
    hf = dict(model.config.hf_config)
    hf["dtype"] = str(jax.numpy.dtype(dtype))
    hf.pop("torch_dtype", None)
    (out / "config.json").write_text(json.dumps(hf, indent=2, sort_keys=True))
    source = Path(getattr(model, "source_dir", "") or out) / "generation_config.json"
    if source.is_file() and source.parent != out:
        shutil.copyfile(source, out / "generation_config.json")
    elif not (out / "generation_config.json").is_file():
        generation = {k: hf[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if hf.get(k) is not None}
        (out / "generation_config.json").write_text(json.dumps(generation, indent=2))


def _copy_tokenizer(source: Path, out: Path) -> None:
    if source.resolve() == out.resolve():
        return
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)
