"""config.json in transformers 4's spelling (for sglang-jax): the same model to transformers 5 and to tbjax."""

import json

import pytest
import transformers

from tbjax.models import ModelConfig
from tbjax.models.hf.config_v4 import transformers4_config, write_transformers4_config

SHAPE = {"model_type": "qwen3", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128}


@pytest.mark.parametrize("rope", [
    {"rope_type": "default", "rope_theta": 1_000_000.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512, "rope_theta": 10_000.0},
])
def test_transformers5_config_becomes_top_level_rope_theta_and_scaling(rope):
    v5 = {**SHAPE, "rope_parameters": rope, "dtype": "float32", "max_position_embeddings": 2048}
    v4 = transformers4_config(v5)
    assert "rope_parameters" not in v4 and v4["rope_theta"] == rope["rope_theta"]
    assert v4.get("rope_scaling") == ({k: v for k, v in rope.items() if k != "rope_theta"}
                                      if rope["rope_type"] != "default" else None)
    assert (v4["architectures"], v4["torch_dtype"]) == (["Qwen3ForCausalLM"], "float32")
    # transformers 5 reads the v4 spelling back into the same rotary settings, and so does tbjax
    assert transformers.Qwen3Config(**v4).rope_parameters == rope
    assert ModelConfig.from_hf_dict(v4).rope == ModelConfig.from_hf_dict(v5).rope


def test_rewrites_config_json_in_place_keeping_everything_else(tmp_path):
    v4_already = {**SHAPE, "rope_theta": 10_000.0, "architectures": ["Qwen3ForCausalLM"], "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(v4_already))
    write_transformers4_config(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text()) == v4_already
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
