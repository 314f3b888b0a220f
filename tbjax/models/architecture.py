"""Model configuration: the architecture read from an HF `config.json`, plus how we run it.

The HF file is the single source of truth for the architecture, so that a checkpoint loads without a
second description of itself. Runtime choices (dtypes, attention kernel, remat, scan) are ours and never
written back to the HF file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from tbjax.sections.model import RuntimeConfig

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3", "qwen3_moe", "qwen3_5_text", "qwen3_5")
HYBRID_MODEL_TYPES = ("qwen3_5_text", "qwen3_5")
LAYER_TYPES = ("full_attention", "linear_attention")


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
class ModelConfig:
    """One Qwen decoder (Qwen2/2.5, Qwen3, Qwen3-MoE, the Qwen3.5/3.6 hybrid), everything the forward pass
    needs."""

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
    # Qwen3.5/3.6 hybrid: per-layer token mixer (empty = full attention everywhere), Gated DeltaNet sizes,
    # sigmoid-gated attention output, RMSNorm scaled by (1 + weight), rotary on a leading share of head_dim.
    layer_types: tuple[str, ...] = ()
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    attn_output_gate: bool = False
    norm_zero_centered: bool = False
    partial_rotary_factor: float = 1.0
    hf_prefix: str = "model."  # where the text model's tensors live in the checkpoint
    runtime: RuntimeConfig = RuntimeConfig()
    hf_config: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.runtime.scan_layers and len(set(self.moe_layers)) > 1:
            raise UnsupportedModelError(
                "scan_layers needs identical layers, but this config mixes dense and MoE layers "
                "(mlp_only_layers / decoder_sparse_step); set runtime.scan_layers=false."
            )
        chunk = self.runtime.linear_chunk_size
        if chunk < 1 or chunk & (chunk - 1):
            raise UnsupportedModelError(f"runtime.linear_chunk_size={chunk} must be a power of two (e.g. 64)")
        if self.runtime.scan_layers and self.linear_layers:
            raise UnsupportedModelError(
                "scan_layers is not implemented for models with linear_attention layers (layer_types: Qwen3.5 "
                "hybrids); set runtime.scan_layers=false."
            )

    @property
    def param_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.runtime.param_dtype)

    @property
    def compute_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.runtime.compute_dtype)

    def is_moe_layer(self, layer: int) -> bool:
        return bool(self.moe_layers) and self.moe_layers[layer]

    def is_linear_layer(self, layer: int) -> bool:
        """True where the token mixer is Gated DeltaNet instead of softmax attention."""
        return bool(self.layer_types) and self.layer_types[layer] == "linear_attention"

    @property
    def linear_layers(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.num_layers) if self.is_linear_layer(i))

    @property
    def full_attention_layers(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.num_layers) if not self.is_linear_layer(i))

    @property
    def rotary_dim(self) -> int:
        """How many leading dims of each head rotate (Qwen3.5: a quarter); the rest pass through."""
        return int(self.head_dim * self.partial_rotary_factor)

    def with_runtime(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, runtime=dataclasses.replace(self.runtime, **changes))

    def num_params(self) -> int:
        """Parameter count from shapes alone (no allocation), for summaries and FLOP estimates."""
        q_width = 2 if self.attn_output_gate else 1
        attn = self.hidden_size * self.head_dim * (self.num_heads * (q_width + 1) + self.num_kv_heads * 2)
        if self.qkv_bias:
            attn += self.head_dim * (self.num_heads + 2 * self.num_kv_heads)
        if self.qk_norm:
            attn += 2 * self.head_dim
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        linear = (self.hidden_size * (2 * key_dim + 3 * value_dim + 2 * self.linear_num_value_heads)
                  + self.linear_conv_kernel * (2 * key_dim + value_dim) + 2 * self.linear_num_value_heads
                  + self.linear_value_head_dim)
        mixers = sum(linear if self.is_linear_layer(i) else attn for i in range(self.num_layers))
        dense_mlp = 3 * self.hidden_size * self.intermediate_size
        moe_mlp = self.num_experts * (3 * self.hidden_size * self.moe_intermediate_size + self.hidden_size)
        mlps = sum(moe_mlp if self.is_moe_layer(i) else dense_mlp for i in range(self.num_layers))
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        norms = self.hidden_size * (2 * self.num_layers + 1)
        return mixers + mlps + embeddings + norms

    def flops_per_token(self, seq_len: int) -> float:
        """Forward FLOPs per token: 2 per active matmul weight plus causal attention scores and values
        (half the [seq, seq] matrix); a Gated DeltaNet layer reads and writes its [key, value] state per
        head instead of attending (the within-chunk terms are small beside it). Training is ~3x this."""
        active_mlp = self.intermediate_size
        if self.num_experts:
            active_mlp = self.num_experts_per_tok * self.moe_intermediate_size
        mlp = 2 * 3 * self.hidden_size * active_mlp
        q_width = 2 if self.attn_output_gate else 1
        attn = 2 * self.hidden_size * self.head_dim * ((q_width + 1) * self.num_heads + 2 * self.num_kv_heads)
        attn += 2 * 2 * self.num_heads * self.head_dim * seq_len / 2
        key_dim = self.linear_num_key_heads * self.linear_key_head_dim
        value_dim = self.linear_num_value_heads * self.linear_value_head_dim
        linear = 2 * self.hidden_size * (2 * key_dim + 3 * value_dim)
        linear += 2 * 3 * self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        mixers = sum(linear if self.is_linear_layer(i) else attn for i in range(self.num_layers))
        return mixers + self.num_layers * mlp + 2 * self.hidden_size * self.vocab_size

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], runtime: RuntimeConfig | None = None) -> ModelConfig:
        model_type = hf.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModelError(
                f"model_type {model_type!r} is not supported; tbjax implements {', '.join(SUPPORTED_MODEL_TYPES)}. "
                "Check the checkpoint's config.json, or add the architecture under tbjax/models/."
            )
        text = _text_config(hf)
        if text.get("use_sliding_window"):
            raise UnsupportedModelError(
                "use_sliding_window=true is not supported (Qwen checkpoints ship it false); set it to false "
                "in config.json if the model was trained with full attention."
            )
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        missing = [key for key in required if key not in text]
        if missing:
            raise UnsupportedModelError(
                f"config.json lacks {', '.join(missing)}: it is not a complete {model_type} config "
                "(was it cut short, or written for another model?)"
            )
        num_heads = text["num_attention_heads"]
        num_layers = text["num_hidden_layers"]
        num_experts = text.get("num_experts", text.get("num_local_experts", 0)) if model_type == "qwen3_moe" else 0
        moe_layers: tuple[bool, ...] = ()
        if num_experts:
            step = text.get("decoder_sparse_step", 1)
            dense_only = set(text.get("mlp_only_layers", []))
            moe_layers = tuple(i not in dense_only and (i + 1) % step == 0 for i in range(num_layers))
        hybrid = _hybrid_fields(text, num_layers) if model_type in HYBRID_MODEL_TYPES else {}
        return cls(
            model_type=model_type,
            vocab_size=text["vocab_size"],
            hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=text.get("num_key_value_heads", num_heads),
            head_dim=text.get("head_dim") or text["hidden_size"] // num_heads,
            rms_norm_eps=text.get("rms_norm_eps", 1e-6),
            rope=_rope_from_hf(text),
            # a multimodal checkpoint ties (or not) at its top level, as transformers reads it
            tie_word_embeddings=hf.get("tie_word_embeddings", False),
            qkv_bias=model_type == "qwen2" or text.get("attention_bias", False),
            qk_norm=model_type != "qwen2",
            num_experts=num_experts,
            num_experts_per_tok=text.get("num_experts_per_tok", 0) if num_experts else 0,
            moe_intermediate_size=text.get("moe_intermediate_size", 0) if num_experts else 0,
            norm_topk_prob=text.get("norm_topk_prob", False),
            moe_layers=moe_layers,
            max_position_embeddings=text.get("max_position_embeddings", 32768),
            **hybrid,
            hf_prefix="model.language_model." if model_type == "qwen3_5" else "model.",
            runtime=runtime or RuntimeConfig(),
            hf_config=dict(hf),
        )

    @classmethod
    def from_pretrained(cls, path: str | Path, runtime: RuntimeConfig | None = None) -> ModelConfig:
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"{config_file} does not exist: point at an HF model directory with a config.json")
        return cls.from_hf_dict(json.loads(config_file.read_text()), runtime)


def _text_config(hf: dict[str, Any]) -> dict[str, Any]:
    """The text decoder's part of config.json: nested under `text_config` in multimodal Qwen3.5 checkpoints."""
    if hf["model_type"] != "qwen3_5":
        return hf
    text = hf.get("text_config")
    if not isinstance(text, dict) or text.get("model_type", "qwen3_5_text") != "qwen3_5_text":
        raise UnsupportedModelError(
            "a qwen3_5 config.json needs a text_config of model_type qwen3_5_text (the language model tbjax "
            "loads); this one has none or another kind - is it a Qwen3.5 MoE or a vision-only config?"
        )
    return text


def _hybrid_fields(text: dict[str, Any], num_layers: int) -> dict[str, Any]:
    """The Qwen3.5/3.6 fields of ModelConfig, with transformers' defaults where config.json is silent."""
    if text.get("attn_output_gate", True) is not True:
        raise UnsupportedModelError(
            "attn_output_gate=false: transformers' qwen3_5 always gates attention output, so this checkpoint is "
            "another architecture; remove the field or set it to true if the weights do have the gate."
        )
    if text.get("num_experts"):
        raise UnsupportedModelError(
            "num_experts is set: that is a Qwen3.5 MoE checkpoint (model_type qwen3_5_moe), which tbjax does not "
            "implement; use a dense Qwen3.5/3.6 checkpoint."
        )
    interval = text.get("full_attention_interval", 4)
    layer_types = tuple(text.get("layer_types") or (
        "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(num_layers)))
    unknown = sorted(set(layer_types) - set(LAYER_TYPES))
    if unknown or len(layer_types) != num_layers:
        raise UnsupportedModelError(
            f"layer_types must list {num_layers} entries (num_hidden_layers) from {', '.join(LAYER_TYPES)}; got "
            f"{len(layer_types)} entries{' with ' + ', '.join(unknown) if unknown else ''}. Fix config.json."
        )
    key_heads = text.get("linear_num_key_heads", 16)
    value_heads = text.get("linear_num_value_heads", 32)
    if value_heads % key_heads:
        raise UnsupportedModelError(
            f"linear_num_value_heads={value_heads} is not a multiple of linear_num_key_heads={key_heads}: each "
            "Gated DeltaNet key head serves a whole group of value heads. Fix config.json."
        )
    return {
        "layer_types": layer_types,
        "linear_num_key_heads": key_heads,
        "linear_num_value_heads": value_heads,
        "linear_key_head_dim": text.get("linear_key_head_dim", 128),
        "linear_value_head_dim": text.get("linear_value_head_dim", 128),
        "linear_conv_kernel": text.get("linear_conv_kernel_dim", 4),
        "attn_output_gate": True,
        "norm_zero_centered": True,
        "partial_rotary_factor": float(_rope_params(text).get("partial_rotary_factor",
                                                                text.get("partial_rotary_factor", 0.25))),
    }


def _rope_params(hf: dict[str, Any]) -> dict[str, Any]:
    """HF's v4 `rope_scaling` and v5 `rope_parameters` spellings merged (v5 wins)."""
    return {**(hf.get("rope_scaling") or {}), **(hf.get("rope_parameters") or {})}


def _rope_from_hf(hf: dict[str, Any]) -> RopeConfig:
    params = _rope_params(hf)
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
