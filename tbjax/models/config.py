"""Model configuration: the architecture read from an HF `config.json`, plus how we run it.

The HF file is the single source of truth for the architecture, so that a checkpoint loads without a
second description of itself. Runtime choices (dtypes, attention kernel, remat, scan) are ours and never
written back to the HF file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

import jax.numpy as jnp

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3", "qwen3_moe")
AttentionImpl = Literal["xla", "cudnn", "splash"]
RematPolicy = Literal["none", "full", "dots", "dots_no_batch"]


class UnsupportedModelError(ValueError):
    """The checkpoint describes an architecture tbjax does not implement."""


@dataclasses.dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters, normalised from HF's v4 (`rope_theta` + `rope_scaling`) and v5
    (`rope_parameters`) spellings."""

    theta: float = 10000.0
    kind: str = "default"  # default | linear | llama3 | yarn
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    attention_factor: float | None = None  # yarn; None = derived from factor (and mscale)
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How to run the architecture: our choices, not the checkpoint's."""

    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    attention_impl: AttentionImpl = "xla"
    remat: RematPolicy = "none"
    scan_layers: bool = False


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One Qwen decoder (Qwen2/2.5, Qwen3, Qwen3-MoE), everything the forward pass needs."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    tie_word_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    # Mixture of experts (num_experts == 0 means dense MLP everywhere).
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    moe_layers: tuple[bool, ...] = ()
    max_position_embeddings: int = 32768
    runtime: RuntimeConfig = RuntimeConfig()
    hf_config: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.runtime.scan_layers and len(set(self.moe_layers)) > 1:
            raise UnsupportedModelError(
                "scan_layers needs identical layers, but this config mixes dense and MoE layers "
                "(mlp_only_layers / decoder_sparse_step); set runtime.scan_layers=false."
            )

    @property
    def param_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.runtime.param_dtype)

    @property
    def compute_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.runtime.compute_dtype)

    def is_moe_layer(self, layer: int) -> bool:
        return bool(self.moe_layers) and self.moe_layers[layer]

    def with_runtime(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, runtime=dataclasses.replace(self.runtime, **changes))

    def num_params(self) -> int:
        """Parameter count from shapes alone (no allocation), for summaries and FLOP estimates."""
        attn = self.hidden_size * self.head_dim * (self.num_heads * 2 + self.num_kv_heads * 2)
        if self.qkv_bias:
            attn += self.head_dim * (self.num_heads + 2 * self.num_kv_heads)
        if self.qk_norm:
            attn += 2 * self.head_dim
        dense_mlp = 3 * self.hidden_size * self.intermediate_size
        moe_mlp = self.num_experts * (3 * self.hidden_size * self.moe_intermediate_size + self.hidden_size)
        mlps = sum(moe_mlp if self.is_moe_layer(i) else dense_mlp for i in range(self.num_layers))
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        norms = self.hidden_size * (2 * self.num_layers + 1)
        return self.num_layers * attn + mlps + embeddings + norms

    def flops_per_token(self, seq_len: int) -> float:
        """Forward FLOPs per token: 2 per active matmul weight plus causal attention scores and values
        (half the [seq, seq] matrix). Training is ~3x this."""
        active_mlp = self.intermediate_size
        if self.num_experts:
            active_mlp = self.num_experts_per_tok * self.moe_intermediate_size
        per_layer = 2 * self.hidden_size * self.head_dim * (2 * self.num_heads + 2 * self.num_kv_heads)
        per_layer += 2 * 3 * self.hidden_size * active_mlp
        per_layer += 2 * 2 * self.num_heads * self.head_dim * seq_len / 2
        return self.num_layers * per_layer + 2 * self.hidden_size * self.vocab_size

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], runtime: RuntimeConfig | None = None) -> ModelConfig:
        model_type = hf.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModelError(
                f"model_type {model_type!r} is not supported; tbjax implements {', '.join(SUPPORTED_MODEL_TYPES)}. "
                "Check the checkpoint's config.json, or add the architecture under tbjax/models/."
            )
        if hf.get("use_sliding_window"):
            raise UnsupportedModelError(
                "use_sliding_window=true is not supported (Qwen checkpoints ship it false); set it to false "
                "in config.json if the model was trained with full attention."
            )
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        missing = [key for key in required if key not in hf]
        if missing:
            raise UnsupportedModelError(
                f"config.json lacks {', '.join(missing)}: it is not a complete {model_type} config "
                "(was it cut short, or written for another model?)"
            )
        num_heads = hf["num_attention_heads"]
        num_layers = hf["num_hidden_layers"]
        num_experts = hf.get("num_experts", hf.get("num_local_experts", 0)) if model_type == "qwen3_moe" else 0
        moe_layers: tuple[bool, ...] = ()
        if num_experts:
            step = hf.get("decoder_sparse_step", 1)
            dense_only = set(hf.get("mlp_only_layers", []))
            moe_layers = tuple(i not in dense_only and (i + 1) % step == 0 for i in range(num_layers))
        return cls(
            model_type=model_type,
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=hf.get("num_key_value_heads", num_heads),
            head_dim=hf.get("head_dim") or hf["hidden_size"] // num_heads,
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            rope=_rope_from_hf(hf),
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            qkv_bias=model_type == "qwen2" or hf.get("attention_bias", False),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            num_experts=num_experts,
            num_experts_per_tok=hf.get("num_experts_per_tok", 0) if num_experts else 0,
            moe_intermediate_size=hf.get("moe_intermediate_size", 0) if num_experts else 0,
            norm_topk_prob=hf.get("norm_topk_prob", False),
            moe_layers=moe_layers,
            max_position_embeddings=hf.get("max_position_embeddings", 32768),
            runtime=runtime or RuntimeConfig(),
            hf_config=dict(hf),
        )

    @classmethod
    def from_pretrained(cls, path: str | Path, runtime: RuntimeConfig | None = None) -> ModelConfig:
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"{config_file} does not exist: point at an HF model directory with a config.json")
        return cls.from_hf_dict(json.loads(config_file.read_text()), runtime)


def _rope_from_hf(hf: dict[str, Any]) -> RopeConfig:
    params = dict(hf.get("rope_parameters") or {})
    scaling = hf.get("rope_scaling") or {}
    params = {**scaling, **params}
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    known = {"default", "linear", "llama3", "yarn"}
    if kind not in known:
        raise UnsupportedModelError(
            f"rope type {kind!r} is not supported; tbjax implements {', '.join(sorted(known))}."
        )
    original = params.get("original_max_position_embeddings", hf.get("max_position_embeddings"))
    factor = params.get("factor")
    if kind == "yarn" and factor is None:
        factor = hf["max_position_embeddings"] / original
    return RopeConfig(
        theta=float(theta),
        kind=kind,
        factor=float(factor or 1.0),
        original_max_position_embeddings=original,
        low_freq_factor=float(params.get("low_freq_factor", 1.0)),
        high_freq_factor=float(params.get("high_freq_factor", 4.0)),
        beta_fast=float(params.get("beta_fast") or 32.0),
        beta_slow=float(params.get("beta_slow") or 1.0),
        attention_factor=params.get("attention_factor"),
        mscale=params.get("mscale"),
        mscale_all_dim=params.get("mscale_all_dim"),
        truncate=params.get("truncate", True),
    )
