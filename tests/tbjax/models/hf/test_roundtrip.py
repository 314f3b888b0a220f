"""HF -> tbjax -> save_pretrained -> transformers: identical logits and identical tensor names, shapes
and dtypes to the original files."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from safetensors import safe_open

from tbjax.models import RuntimeConfig, from_pretrained, save_pretrained
from tbjax.models.hf.safetensors_reader import SafetensorsReader
from tests.tbjax.models.support import ALL_ARCHS


def tensor_signature(path) -> dict[str, tuple]:
    reader = SafetensorsReader(path)
    signature = {}
    for name in reader.names():
        with safe_open(path / reader.weight_map[name], "np") as f:
            view = f.get_slice(name)
            signature[name] = (tuple(view.get_shape()), view.get_dtype())
    return signature


def hf_logits(path, ids) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.float().numpy()


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_round_trip_is_exact(tiny_dir, tmp_path, arch):
    source = tiny_dir(arch)
    out = save_pretrained(from_pretrained(source), tmp_path / "export")
    assert tensor_signature(out) == tensor_signature(source)
    ids = np.random.default_rng(0).integers(0, 518, size=(2, 24))
    np.testing.assert_allclose(hf_logits(out, ids), hf_logits(source, ids), atol=1e-5, rtol=0)
    exported_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert exported_tokenizer.chat_template == transformers.AutoTokenizer.from_pretrained(source).chat_template


def test_scanned_model_exports_per_layer_tensors_in_shards(tiny_dir, tmp_path):
    source = tiny_dir("qwen3-moe")
    model = from_pretrained(source, runtime=RuntimeConfig(scan_layers=True))
    out = save_pretrained(model, tmp_path / "export", max_shard_bytes=64 * 1024)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 3
    assert not (out / "model.safetensors").exists()
    assert tensor_signature(out) == tensor_signature(source)
    ids = np.random.default_rng(1).integers(0, 518, size=(1, 16))
    np.testing.assert_allclose(hf_logits(out, ids), hf_logits(source, ids), atol=1e-5, rtol=0)
    # and the sharded directory loads back into tbjax with the same logits
    reloaded = from_pretrained(out)(jnp.asarray(ids, jnp.int32))
    np.testing.assert_allclose(reloaded, hf_logits(source, ids), atol=1e-4, rtol=0)


def test_bfloat16_checkpoint_keeps_its_dtype(tiny_dir, tmp_path):
    source = tiny_dir("qwen3", "bfloat16")
    out = save_pretrained(from_pretrained(source), tmp_path / "export")  # loaded as float32
    assert tensor_signature(out) == tensor_signature(source)
    assert {dtype for _, dtype in tensor_signature(out).values()} == {"BF16"}
    with safe_open(source / "model.safetensors", "np") as a, safe_open(out / "model.safetensors", "np") as b:
        for name in a.keys():
            np.testing.assert_array_equal(a.get_tensor(name), b.get_tensor(name))
