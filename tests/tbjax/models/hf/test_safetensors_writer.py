"""The in-place safetensors writer and the export built on it: safetensors' own `save_file`'s header and data,
the data aligned, whatever the order and threads the tensors arrive in, and one compiled gather per parameter
shape, not one per tensor."""

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from tbjax.models import ModelConfig, Qwen, RuntimeConfig, from_pretrained, save_pretrained
from tbjax.models.hf import exporter
from tbjax.models.hf.safetensors_reader import INDEX_FILE, SINGLE_FILE
from tbjax.models.hf.safetensors_writer import (
    DATA_ALIGNMENT,
    DTYPE_NAMES,
    HEADER_LENGTH_BYTES,
    SafetensorsFile,
    TensorSpec,
)
from tests.tbjax.models.support import ALL_ARCHS
from tests.tbjax.publish_support import count_compiles


def assert_save_files_own_but_aligned(ours: Path, theirs: Path) -> None:
    """`ours` holds `theirs`'s header (as JSON) and data bytes, and its data starts aligned."""
    files = []
    for path in (ours, theirs):
        raw = path.read_bytes()
        length = int.from_bytes(raw[:HEADER_LENGTH_BYTES], "little")
        files.append((HEADER_LENGTH_BYTES + length, json.loads(raw[HEADER_LENGTH_BYTES:][:length]), raw))
    (our_start, our_header, our_raw), (their_start, their_header, their_raw) = files
    assert our_header == their_header
    assert our_raw[our_start:] == their_raw[their_start:]
    assert our_start % DATA_ALIGNMENT == 0


def random_tensors(seed: int) -> dict[str, np.ndarray]:
    """Tensors of every dtype safetensors names, with names that sort differently from their dtypes."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for i, dtype in enumerate(DTYPE_NAMES):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=i % 3 + 1))
        values = rng.standard_normal(shape) * 4 if dtype.kind in "fV" or dtype == ml_dtypes.bfloat16 else \
            rng.integers(0, 2 if dtype == np.bool_ else 100, shape)
        tensors[f"{chr(ord('z') - i)}.tensor{i}"] = np.asarray(values).astype(dtype)
    tensors["a.scalar"] = np.asarray(3.5, np.float32)
    return tensors


@pytest.mark.parametrize("seed", [0, 1])
def test_files_hold_safetensors_own_bytes_whatever_the_write_order(tmp_path, seed) -> None:
    tensors = random_tensors(seed)
    save_file(tensors, str(tmp_path / "theirs.safetensors"), metadata={"format": "pt"})
    ours = SafetensorsFile(tmp_path / "ours.safetensors", [TensorSpec(n, t.shape, t.dtype) for n, t in tensors.items()],
                           {"format": "pt"})
    names = list(tensors)
    random.Random(seed).shuffle(names)
    with ThreadPoolExecutor(2) as threads:  # and from two threads at once
        list(threads.map(lambda name: ours.write(name, tensors[name]), names))
    ours.close()
    assert_save_files_own_but_aligned(tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors")


def test_safetensors_own_reader_reads_the_aligned_files(tmp_path) -> None:
    tensors = {name: values for name, values in random_tensors(0).items()
               if values.dtype.type.__module__ == "numpy"}  # the dtypes safetensors.numpy reads
    ours = SafetensorsFile(tmp_path / "ours.safetensors", [TensorSpec(n, t.shape, t.dtype) for n, t in tensors.items()],
                           {"format": "pt"})
    for name, values in tensors.items():
        ours.write(name, values)
    ours.close()
    read = load_file(str(tmp_path / "ours.safetensors"))
    assert read.keys() == tensors.keys()
    for name, values in tensors.items():
        np.testing.assert_array_equal(read[name], values, strict=True)


def test_a_fused_tensor_is_written_part_by_part(tmp_path) -> None:
    whole = np.arange(24, dtype=np.float32).reshape(6, 4)
    save_file({"fused": whole}, str(tmp_path / "theirs.safetensors"))
    ours = SafetensorsFile(tmp_path / "ours.safetensors", [TensorSpec("fused", (6, 4), np.dtype(np.float32))], {})
    ours.write("fused", whole[4:], first_row=4)
    ours.write("fused", whole[:4])
    ours.close()
    assert_save_files_own_but_aligned(tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors")


def test_a_tensor_that_does_not_fit_its_header_is_refused(tmp_path) -> None:
    file = SafetensorsFile(tmp_path / "x.safetensors", [TensorSpec("w", (2, 3), np.dtype(np.float32))], {})
    with pytest.raises(ValueError, match=r"w: float64\[2, 3\] from row 0 does not fit the header's float32\[2, 3\]"):
        file.write("w", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="from row 1 does not fit"):
        file.write("w", np.zeros((2, 3), np.float32), first_row=1)
    file.close()


@pytest.mark.parametrize(("arch", "dtype"), [(arch, "bfloat16") for arch in ALL_ARCHS] + [("qwen3_5-vl", "float32")])
def test_an_export_equals_safetensors_own_files_of_the_same_tensors(tiny_dir, tmp_path, arch, dtype) -> None:
    """Every architecture (fused Gated DeltaNet tensors, experts, a vision encoder copied unchanged) in shards
    small enough to split it: each shard holds save_file's header and data of the tensors it lists."""
    model = from_pretrained(tiny_dir(arch))
    out = save_pretrained(model, tmp_path / "export", dtype=dtype, max_shard_bytes=64 * 1024)
    tensors = dict(exporter.hf_tensors(model, np.dtype(jax.numpy.dtype(dtype))))
    files = json.loads((out / INDEX_FILE).read_text())["weight_map"] if (out / INDEX_FILE).is_file() else \
        dict.fromkeys(tensors, SINGLE_FILE)
    source = exporter.SafetensorsReader(tiny_dir(arch))
    for file in sorted(set(files.values())):
        listed = {name: tensors[name] if name in tensors else source.read(name, (slice(None),))
                  for name, holder in files.items() if holder == file}
        save_file(listed, str(tmp_path / "theirs.safetensors"), metadata={"format": "pt"})
        assert_save_files_own_but_aligned(out / file, tmp_path / "theirs.safetensors")


@pytest.mark.parametrize("scan", [False, True])
def test_twice_the_layers_compile_no_more_programs(tmp_path, scan) -> None:
    def export(layers: int) -> int:
        config = ModelConfig.from_hf_dict({
            "model_type": "qwen3", "vocab_size": 256, "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
            "tie_word_embeddings": False, "rope_theta": 1e6, "rms_norm_eps": 1e-6, "max_position_embeddings": 64,
        }, RuntimeConfig(param_dtype="float32", compute_dtype="float32", scan_layers=scan))
        model = Qwen(config, nnx.Rngs(0))
        return count_compiles(lambda: save_pretrained(model, tmp_path / f"{layers}", dtype="bfloat16"))
    small, large = export(2), export(4)
    assert large <= small
    assert 0 < small <= 16  # one per distinct (shape, sharding, layout): 11 kinds of tensor in a Qwen3 layer
