"""Writes a Qwen model as an HF directory that `transformers.AutoModelForCausalLM.from_pretrained` loads:
sharded safetensors with an index, config.json, generation_config.json and the tokenizer files.
A multimodal Qwen3.5 keeps its vision encoder and MTP head, copied unchanged from the checkpoint the model
was loaded from, so the directory is still a whole checkpoint of the architecture an engine serves.

Tensors are produced one HF tensor at a time (one layer of a scanned stack, one expert), gathered to the
host replicated, and written in shards of at most `max_shard_bytes`, so host memory stays bounded by one
shard. Every process computes the same gathers; only process 0 writes.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from safetensors.numpy import save_file

from tbjax.models.hf.layout import UNMODELLED_PARTS, hf_layouts
from tbjax.models.hf.safetensors_reader import INDEX_FILE, SINGLE_FILE, SafetensorsReader
from tbjax.models.qwen import Qwen
from tbjax.parallel.distributed import is_driver
from tbjax.sections.lora import LoraError

TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "chat_template.jinja", "added_tokens.json",
)
DEFAULT_SHARD_BYTES = 4 * 1024**3


def _host_copy(array: jax.Array, index: tuple[int, ...]) -> np.ndarray:
    """array[index] as a numpy array on every process (replicated gather of just that slice)."""
    if array.is_fully_addressable:
        return np.asarray(jax.device_get(array[index] if index else array))
    if not isinstance(array.sharding, NamedSharding):
        raise TypeError(f"a parameter spread over processes must be sharded over a mesh (NamedSharding), not "
                        f"{type(array.sharding).__name__}")
    replicated = NamedSharding(array.sharding.mesh, PartitionSpec())
    picked = jax.jit(lambda a: a[index] if index else a, out_shardings=replicated)(array)
    return np.asarray(picked.addressable_data(0))


def hf_tensors(model: Qwen, dtype: np.dtype) -> Iterator[tuple[str, np.ndarray]]:
    """(HF name, tensor) for every weight of `model`, one at a time, in HF layout and `dtype`. The parts of a
    fused HF tensor are held until the last arrives, then written as one."""
    params = nnx.to_flat_state(nnx.state(model, nnx.Param))
    flat = {tuple(getattr(p, "key", p) for p in path): var for path, var in params}
    parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    for path, layout in hf_layouts(model.config).items():
        value = flat[path].get_value()
        for idx in np.ndindex(*layout.stack_shape):
            name, tensor = layout.name(idx), layout.to_hf(_host_copy(value, idx)).astype(dtype)
            if layout.full_rows is None:
                yield name, tensor
                continue
            parts.setdefault(name, []).append((layout.row_offset, tensor))
            if sum(len(part) for _, part in parts[name]) == layout.full_rows:
                yield name, np.concatenate([part for _, part in sorted(parts.pop(name), key=lambda p: p[0])])


def unmodelled_tensors(model: Qwen) -> Iterator[tuple[str, np.ndarray]]:
    """The source checkpoint's tensors of parts tbjax does not model (vision encoder, MTP head), unchanged."""
    source = getattr(model, "source_dir", None)
    if not source or not Path(source).is_dir():
        return
    reader = SafetensorsReader(source)
    for name in sorted(reader.names()):
        if name.startswith(tuple(UNMODELLED_PARTS)):
            yield name, reader.read(name, (slice(None),))


def _export_dtype(model: Qwen, dtype: str | None) -> np.dtype:
    hf = model.config.hf_config
    name = dtype or hf.get("dtype") or hf.get("torch_dtype") or model.config.runtime.param_dtype
    return np.dtype(jax.numpy.dtype(name))


def save_pretrained(
    model: Qwen,
    out_dir: str | Path,
    *,
    dtype: str | None = None,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
    tokenizer_dir: str | Path | None = None,
) -> Path:
    """Writes `model` to `out_dir` in HF format. dtype defaults to the checkpoint's own (config.json). A model
    with LoRA adapters is refused: HF's weights have no place for them, and dropping them would save the base."""
    if model.lora_spec is not None:
        raise LoraError("the model carries LoRA adapters, which an HF checkpoint cannot hold: merge them first "
                        "(tbjax.models.lora.merge_adapters) or save the adapter alone "
                        "(tbjax.models.hf.peft_adapter.save_adapter)")
    out = Path(out_dir)
    writer = is_driver()
    np_dtype = _export_dtype(model, dtype)
    if writer:
        out.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, np.ndarray]] = [{}]
    files: list[str] = []
    pending_bytes = 0

    def flush() -> None:
        nonlocal pending_bytes
        if writer and shards[-1]:
            name = f"shard-{len(files):05d}.tmp"
            save_file(shards[-1], str(out / name), metadata={"format": "pt"})
            files.append(name)
        shards[-1], pending_bytes = {}, 0

    weight_map: dict[str, int] = {}
    total_bytes = 0
    tensors = hf_tensors(model, np_dtype)
    if writer:
        tensors = itertools.chain(tensors, unmodelled_tensors(model))
    for name, tensor in tensors:
        if pending_bytes and pending_bytes + tensor.nbytes > max_shard_bytes:
            flush()
        shards[-1][name] = tensor
        weight_map[name] = len(files)
        pending_bytes += tensor.nbytes
        total_bytes += tensor.nbytes
    flush()
    if writer:
        _finalise(out, files, weight_map, total_bytes)
        _write_config(model, out, np_dtype)
        _copy_tokenizer(Path(tokenizer_dir or getattr(model, "source_dir", "") or out), out)
    return out


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
