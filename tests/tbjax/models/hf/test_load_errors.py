"""Bad checkpoints fail early with an error naming the problem and the fix."""

import json
import shutil

import pytest

from tbjax.models import CheckpointError, UnsupportedModelError, from_pretrained, save_pretrained


def test_missing_safetensors_shard_is_named(tiny_dir, tmp_path):
    sharded = save_pretrained(from_pretrained(tiny_dir("qwen3")), tmp_path / "sharded", max_shard_bytes=64 * 1024)
    victim = sorted(sharded.glob("model-*.safetensors"))[1]
    victim.unlink()
    with pytest.raises(CheckpointError, match=f"{victim.name}.*missing"):
        from_pretrained(sharded)


def test_unsupported_model_type_is_named(tiny_dir, tmp_path):
    path = tmp_path / "llama"
    shutil.copytree(tiny_dir("qwen3"), path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(UnsupportedModelError, match="'llama' is not supported.*qwen2, qwen3, qwen3_moe"):
        from_pretrained(path)


def test_config_that_does_not_match_weights(tiny_dir, tmp_path):
    path = tmp_path / "wrong"
    shutil.copytree(tiny_dir("qwen3"), path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    with pytest.raises(CheckpointError, match=r"mlp.gate_proj.weight has shape \[128, 64\].*\[96, 64\]"):
        from_pretrained(path)


def test_incomplete_config_and_missing_weights(tiny_dir, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": 8}))
    with pytest.raises(UnsupportedModelError, match="lacks vocab_size, intermediate_size"):
        from_pretrained(tmp_path)
    shutil.copyfile(tiny_dir("qwen3") / "config.json", tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="neither model.safetensors nor model.safetensors.index.json"):
        from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_pretrained(tmp_path / "nowhere")
