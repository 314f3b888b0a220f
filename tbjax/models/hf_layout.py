"""Where each tbjax parameter lives in a Hugging Face checkpoint, and how its values are rearranged.

One table (`hf_layouts`) serves both import and export, so the two can never disagree. A parameter is a
stack (over layers when scanned, over experts for MoE) of HF tensors; each HF tensor maps to the
parameter's inner dims by an optional transpose (torch Linear stores [out, in]; we store [*in, *out]) and a
reshape that splits HF dims into ours (e.g. [heads * head_dim] -> [heads, head_dim]).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from tbjax.models.config import ModelConfig

ParamPath = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    names: np.ndarray  # HF tensor names, object array shaped like the parameter's stack dims
    inner_shape: tuple[int, ...]  # our shape of one HF tensor
    groups: tuple[int, ...]  # how many of our inner dims each HF dim splits into, in our order
    transposed: bool  # HF dims appear in reverse group order (torch Linear weights)

    @property
    def stack_shape(self) -> tuple[int, ...]:
        return self.names.shape

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self.stack_shape + self.inner_shape

    def _group_dims(self) -> list[tuple[int, ...]]:
        dims, start = [], 0
        for size in self.groups:
            dims.append(self.inner_shape[start:start + size])
            start += size
        return dims

    @property
    def hf_shape(self) -> tuple[int, ...]:
        shape = tuple(math.prod(d) for d in self._group_dims())
        return shape[::-1] if self.transposed else shape

    def from_hf(self, tensor: np.ndarray) -> np.ndarray:
        if tuple(tensor.shape) != self.hf_shape:
            raise ValueError(f"expected HF shape {self.hf_shape}, got {tuple(tensor.shape)}")
        return (tensor.T if self.transposed else tensor).reshape(self.inner_shape)

    def to_hf(self, inner: np.ndarray) -> np.ndarray:
        flat = inner.reshape(self.hf_shape[::-1] if self.transposed else self.hf_shape)
        return np.ascontiguousarray(flat.T if self.transposed else flat)

    def read_block(self, read: Callable[[str, tuple[slice, ...]], np.ndarray], name: str,
                   index: tuple[slice, ...]) -> np.ndarray:
        """Reads only the HF rows/columns that `index` (normalised slices over inner dims) needs.

        The first of our dims in each group selects a contiguous range of its HF dim; the remaining dims
        of the group are read whole and sliced in memory.
        """
        hf_slices, after, position = [], [], 0
        for dims in self._group_dims():
            first = index[position]
            rest = math.prod(dims[1:])
            hf_slices.append(slice(first.start * rest, first.stop * rest))
            after.append(slice(None))
            after.extend(index[position + 1:position + len(dims)])
            position += len(dims)
        block = read(name, tuple(hf_slices[::-1] if self.transposed else hf_slices))
        if self.transposed:
            block = block.T
        shape = []
        for dims, hf_slice in zip(self._group_dims(), hf_slices, strict=True):
            rest = math.prod(dims[1:])
            shape.extend(((hf_slice.stop - hf_slice.start) // rest, *dims[1:]))
        return block.reshape(shape)[tuple(after)]


def _names(pattern: str, *ranges: int) -> np.ndarray:
    """An object array of names filled from `pattern` over the index grid `ranges`."""
    grid = np.empty(ranges, dtype=object)
    for idx in np.ndindex(*ranges):
        grid[idx] = pattern.format(*idx)
    return grid


class BlockTensor(NamedTuple):
    path: ParamPath  # inside one decoder block
    suffix: str  # HF name after "model.layers.{i}.", with {e} for the expert index
    inner_shape: tuple[int, ...]
    groups: tuple[int, ...]
    transposed: bool
    experts: int = 0  # > 0: stacked over this many experts


def _block_entries(cfg: ModelConfig, moe: bool) -> list[BlockTensor]:
    d, hd, h, kv = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
    entries = [
        BlockTensor(("input_layernorm", "weight"), "input_layernorm.weight", (d,), (1,), False),
        BlockTensor(("post_attention_layernorm", "weight"), "post_attention_layernorm.weight", (d,), (1,), False),
        BlockTensor(("self_attn", "q_proj", "kernel"), "self_attn.q_proj.weight", (d, h, hd), (1, 2), True),
        BlockTensor(("self_attn", "k_proj", "kernel"), "self_attn.k_proj.weight", (d, kv, hd), (1, 2), True),
        BlockTensor(("self_attn", "v_proj", "kernel"), "self_attn.v_proj.weight", (d, kv, hd), (1, 2), True),
        BlockTensor(("self_attn", "o_proj", "kernel"), "self_attn.o_proj.weight", (h, hd, d), (2, 1), True),
    ]
    if cfg.qkv_bias:
        for proj, heads in (("q_proj", h), ("k_proj", kv), ("v_proj", kv)):
            entries.append(BlockTensor(("self_attn", proj, "bias"), f"self_attn.{proj}.bias", (heads, hd), (2,), False))
    if cfg.qk_norm:
        for norm in ("q_norm", "k_norm"):
            entries.append(BlockTensor(("self_attn", norm, "weight"), f"self_attn.{norm}.weight", (hd,), (1,), False))
    if moe:
        e, f = cfg.num_experts, cfg.moe_intermediate_size
        entries += [
            BlockTensor(("mlp", "gate", "kernel"), "mlp.gate.weight", (d, e), (1, 1), True),
            BlockTensor(("mlp", "experts", "gate_proj"), "mlp.experts.{e}.gate_proj.weight", (d, f), (1, 1), True, e),
            BlockTensor(("mlp", "experts", "up_proj"), "mlp.experts.{e}.up_proj.weight", (d, f), (1, 1), True, e),
            BlockTensor(("mlp", "experts", "down_proj"), "mlp.experts.{e}.down_proj.weight", (f, d), (1, 1), True, e),
        ]
    else:
        f = cfg.intermediate_size
        entries += [
            BlockTensor(("mlp", "gate_proj", "kernel"), "mlp.gate_proj.weight", (d, f), (1, 1), True),
            BlockTensor(("mlp", "up_proj", "kernel"), "mlp.up_proj.weight", (d, f), (1, 1), True),
            BlockTensor(("mlp", "down_proj", "kernel"), "mlp.down_proj.weight", (f, d), (1, 1), True),
        ]
    return entries


def hf_layouts(cfg: ModelConfig) -> dict[ParamPath, TensorLayout]:
    """Every parameter path of `Qwen(cfg)` -> its HF tensors and rearrangement."""
    d, v = cfg.hidden_size, cfg.vocab_size
    layouts = {
        ("embed_tokens",): TensorLayout(_names("model.embed_tokens.weight"), (v, d), (1, 1), False),
        ("norm", "weight"): TensorLayout(_names("model.norm.weight"), (d,), (1,), False),
    }
    if not cfg.tie_word_embeddings:
        layouts[("lm_head",)] = TensorLayout(_names("lm_head.weight"), (v, d), (1, 1), False)
    scanned = cfg.runtime.scan_layers
    for layer in range(1 if scanned else cfg.num_layers):
        for sub, suffix, inner, groups, transposed, experts in _block_entries(cfg, cfg.is_moe_layer(layer)):
            suffix = suffix.replace("{e}", "{1}" if scanned else "{0}")
            if scanned:
                pattern, ranges, path = "model.layers.{0}." + suffix, (cfg.num_layers,), ("layers", *sub)
            else:
                pattern, ranges, path = f"model.layers.{layer}." + suffix, (), ("layers", layer, *sub)
            if experts:
                ranges = (*ranges, experts)
            layouts[path] = TensorLayout(_names(pattern, *ranges), inner, groups, transposed)
    return layouts
