"""Tiny Qwen architectures (HF config dicts) for tests and the laptop default, and a Flax-only way to
materialise one as an HF directory (no torch needed):

    python -m tbjax.assets.tiny OUT [--arch qwen3-demo] [--seed 0]   # a random tiny Qwen with its tokenizer
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from flax import nnx

from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer

_COMMON: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
}

# Qwen3.5 hybrid text model: 3 Gated DeltaNet layers to 1 gated full-attention layer, partial rotary.
_HYBRID_TEXT: dict[str, Any] = {
    **_COMMON, "model_type": "qwen3_5_text", "num_hidden_layers": 4, "head_dim": 32, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.25},
}

# Each exercises something the parity tests must cover: head_dim != hidden/heads, tied embeddings,
# q/k/v bias, MoE routing with renormalised top-k, mixed dense/MoE layers, rope scaling, the Qwen3.5 hybrid
# (and, nested in a multimodal checkpoint with a vision tower, uneven head counts: 3 query heads on 1 kv
# head, 3 value heads on 1 key head with key_dim != value_dim).
TINY_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen3": {**_COMMON, "model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": False,
              "rope_theta": 1_000_000.0},
    "qwen3-tied": {**_COMMON, "model_type": "qwen3", "head_dim": 16, "tie_word_embeddings": True},
    "qwen2": {**_COMMON, "model_type": "qwen2", "tie_word_embeddings": True, "rope_theta": 10000.0},
    "qwen3-moe": {**_COMMON, "model_type": "qwen3_moe", "head_dim": 16, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": True,
                  "tie_word_embeddings": False},
    "qwen3-moe-mixed": {**_COMMON, "model_type": "qwen3_moe", "head_dim": 16, "num_experts": 4,
                        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "mlp_only_layers": [1],
                        "num_hidden_layers": 3, "tie_word_embeddings": False},
    "qwen3-yarn": {**_COMMON, "model_type": "qwen3", "head_dim": 16, "tie_word_embeddings": False,
                   "max_position_embeddings": 256,
                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}},
    "qwen3-llama3-rope": {**_COMMON, "model_type": "qwen3", "head_dim": 16, "tie_word_embeddings": False,
                          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
    "qwen3_5": {**_HYBRID_TEXT, "tie_word_embeddings": False},
    "qwen3_5-vl": {
        "model_type": "qwen3_5", "tie_word_embeddings": True,
        "text_config": {**_HYBRID_TEXT, "tie_word_embeddings": True, "num_hidden_layers": 3,
                        "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 16, "linear_num_key_heads": 1,
                        "linear_num_value_heads": 3, "linear_key_head_dim": 8, "linear_value_head_dim": 24,
                        "layer_types": ["linear_attention", "full_attention", "linear_attention"]},
        "vision_config": {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                          "out_hidden_size": 64, "patch_size": 4},
    },
}


# Policies sized to learn on a laptop CPU (the default pipeline's warm start), not for parity tests.
DEMO_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen3-demo": {**_COMMON, "model_type": "qwen3", "hidden_size": 128, "intermediate_size": 384,
                   "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                   "max_position_embeddings": 8192, "tie_word_embeddings": True, "rope_theta": 100_000.0},
    "qwen3-demo-wide": {**_COMMON, "model_type": "qwen3", "hidden_size": 256, "intermediate_size": 768,
                        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                        "max_position_embeddings": 8192, "tie_word_embeddings": True, "rope_theta": 100_000.0},
}
# Tiny Qwen3 that sglang-jax serves: its attention kernels need head_dim 128 (tests/rollout/engines/test_sglang_jax.py).
SERVING_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen3-hd128": {**_COMMON, "model_type": "qwen3", "head_dim": 128, "tie_word_embeddings": False,
                    "rope_theta": 1_000_000.0},
}
ARCHITECTURES = {**TINY_ARCHITECTURES, **DEMO_ARCHITECTURES, **SERVING_ARCHITECTURES}


def padded_vocab(tokenizer_size: int, multiple: int = 128) -> int:
    """Model vocab rounded up (as Qwen does) so the embedding shards evenly over mesh axes."""
    return multiple * math.ceil(tokenizer_size / multiple)


def hf_config(name: str, tokenizer_size: int) -> dict[str, Any]:
    """The architecture with the vocabulary and special ids filled in (in the text part of a multimodal one)."""
    if name not in ARCHITECTURES:
        raise KeyError(f"unknown tiny architecture {name!r}; choose from {sorted(ARCHITECTURES)}")
    tokens = {"vocab_size": padded_vocab(tokenizer_size), "bos_token_id": None, "eos_token_id": 2, "pad_token_id": 0}
    arch = ARCHITECTURES[name]
    if "text_config" in arch:
        return {**arch, "text_config": {**arch["text_config"], **tokens}}
    return {**arch, **tokens}


def make_flax_checkpoint(out_dir: str | Path, name: str = "qwen3", seed: int = 0) -> Path:
    """A random tiny Qwen initialised by tbjax itself and written in HF format with its tokenizer."""
    from tbjax.models import ModelConfig, Qwen, save_pretrained

    out = Path(out_dir)
    tokenizer = train_tokenizer()
    save_tokenizer(tokenizer, out)
    cfg = ModelConfig.from_hf_dict({**hf_config(name, len(tokenizer)), "dtype": "float32"})
    model = Qwen(cfg, nnx.Rngs(seed))
    save_pretrained(model, out, tokenizer_dir=out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tbjax.assets.tiny", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the HF directory to write")
    parser.add_argument("--arch", default="qwen3-demo", choices=sorted(ARCHITECTURES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"wrote {make_flax_checkpoint(args.out, args.arch, args.seed)}")


if __name__ == "__main__":
    main()
