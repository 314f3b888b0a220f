"""Where each tbjax parameter lives in a Hugging Face checkpoint, and how its values are rearranged.

One table (`hf_layouts`) serves both import and export, so the two can never disagree. A parameter is a
stack (over layers when scanned, over experts for MoE) of HF tensors; each HF tensor maps to the
parameter's inner dims by an optional transpose (torch Linear stores [out, in]; we store [*in, *out]) and a
reshape that splits HF dims into ours (e.g. [heads * head_dim] -> [heads, head_dim]). A fused HF tensor
(Gated DeltaNet's in_proj_qkv and conv1d) is several parameters, each a range of the tensor's first dim,
so that each can be sharded by its own heads; export concatenates them back.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tbjax.models.architecture import ModelConfig

ParamPath = tuple[str | int, ...]
Array = Any  # a numpy or a jax array: the rearrangements use methods both have
# Parts of a Qwen3.5 checkpoint tbjax does not model: loading skips them, export copies them unchanged.
UNMODELLED_PARTS = {"model.visual.": "vision encoder", "mtp.": "multi-token prediction head"}


@dataclasses.dataclass(frozen=True)
class HfTransform:
    """How one stack entry of a parameter (our inner shape) becomes its HF tensor (its rows, for a part of a
    fused tensor) and back: a reshape and, for torch Linear weights, a transpose. Hashable, so compiled
    gathers and scatters take it as a static argument and every parameter of the same shapes shares one
    program; the methods run on numpy and jax arrays alike."""

    inner_shape: tuple[int, ...]
    hf_shape: tuple[int, ...]
    transposed: bool

    def to_hf(self, inner: Array) -> Array:
        flat = inner.reshape(self.hf_shape[::-1] if self.transposed else self.hf_shape)
        return flat.T if self.transposed else flat

    def from_hf(self, hf: Array) -> Array:
        return (hf.T if self.transposed else hf).reshape(self.inner_shape)


@dataclasses.dataclass(frozen=True)
class TensorLayout:
    names: np.ndarray  # HF tensor names, object array shaped like the parameter's stack dims
    inner_shape: tuple[int, ...]  # our shape of one HF tensor
    groups: tuple[int, ...]  # how many of our inner dims each HF dim splits into (0: a dim of size 1), our order
    transposed: bool  # HF dims appear in reverse group order (torch Linear weights)
    row_offset: int = 0  # a part of a fused tensor: its rows start here in the HF tensor's first dim,
    full_rows: int | None = None  # which has this many rows (None: the tensor is this parameter alone)

    @property
    def stack_shape(self) -> tuple[int, ...]:
        return self.names.shape

    def name(self, index: tuple[int, ...]) -> str:
        """The HF tensor name of the stack entry at `index` (() for an unstacked parameter)."""
        return str(self.names[index])

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
        """The HF shape of this parameter's values (of its rows, for a part of a fused tensor)."""
        shape = tuple(math.prod(d) for d in self._group_dims())
        return shape[::-1] if self.transposed else shape

    @property
    def file_shape(self) -> tuple[int, ...]:
        """The shape of the whole HF tensor in the checkpoint."""
        shape = self.hf_shape
        return shape if self.full_rows is None else (self.full_rows, *shape[1:])

    @property
    def transform(self) -> HfTransform:
        return HfTransform(self.inner_shape, self.hf_shape, self.transposed)

    def to_hf(self, inner: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.transform.to_hf(inner))

    def read_block(self, read: Callable[[str, tuple[slice, ...]], np.ndarray], name: str,
                   index: tuple[slice, ...]) -> np.ndarray:
        """Reads only the HF rows/columns that `index` (normalised slices over inner dims) needs.

        The first of our dims in each group selects a contiguous range of its HF dim; the remaining dims
        of the group are read whole and sliced in memory.
        """
        hf_slices, after, position = [], [], 0
        for dims in self._group_dims():
            if not dims:  # an HF dim of size 1 that we drop
                hf_slices.append(slice(0, 1))
                continue
            first = index[position]
            rest = math.prod(dims[1:])
            hf_slices.append(slice(first.start * rest, first.stop * rest))
            after.append(slice(None))
            after.extend(index[position + 1:position + len(dims)])
            position += len(dims)
        file_slices = hf_slices[::-1] if self.transposed else list(hf_slices)
        file_slices[0] = slice(file_slices[0].start + self.row_offset, file_slices[0].stop + self.row_offset)
        block = read(name, tuple(file_slices))
        if self.transposed:
            block = block.T
        shape = []
        for dims, hf_slice in zip(self._group_dims(), hf_slices, strict=True):
            if dims:
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
    row_offset: int = 0  # see TensorLayout
    full_rows: int | None = None


def _attention_entries(cfg: ModelConfig) -> list[BlockTensor]:
    d, hd, h, kv = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
    q_width = 2 * hd if cfg.attn_output_gate else hd  # gated: [query | gate] per head
    entries = [
        BlockTensor(("self_attn", "q_proj", "kernel"), "self_attn.q_proj.weight", (d, h, q_width), (1, 2), True),
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
    return entries


def _linear_attention_entries(cfg: ModelConfig) -> list[BlockTensor]:
    """Gated DeltaNet: q, k and v are row ranges of HF's fused in_proj_qkv [q | k | v] and of its depthwise
    conv1d weight [channels, 1, kernel]."""
    d, kernel = cfg.hidden_size, cfg.linear_conv_kernel
    nk, nv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                      cfg.linear_value_head_dim)
    fused = 2 * nk * dk + nv * dv
    entries = []
    for part, (heads, dim, offset) in zip("qkv", ((nk, dk, 0), (nk, dk, nk * dk), (nv, dv, 2 * nk * dk)), strict=True):
        entries += [
            BlockTensor(("linear_attn", f"in_proj_{part}", "kernel"), "linear_attn.in_proj_qkv.weight",
                        (d, heads, dim), (1, 2), True, row_offset=offset, full_rows=fused),
            BlockTensor(("linear_attn", f"conv_{part}"), "linear_attn.conv1d.weight", (kernel, heads, dim), (1, 0, 2),
                        True, row_offset=offset, full_rows=fused),
        ]
    return entries + [
        BlockTensor(("linear_attn", "in_proj_z", "kernel"), "linear_attn.in_proj_z.weight", (d, nv, dv), (1, 2), True),
        BlockTensor(("linear_attn", "in_proj_b", "kernel"), "linear_attn.in_proj_b.weight", (d, nv), (1, 1), True),
        BlockTensor(("linear_attn", "in_proj_a", "kernel"), "linear_attn.in_proj_a.weight", (d, nv), (1, 1), True),
        BlockTensor(("linear_attn", "dt_bias"), "linear_attn.dt_bias", (nv,), (1,), False),
        BlockTensor(("linear_attn", "A_log"), "linear_attn.A_log", (nv,), (1,), False),
        BlockTensor(("linear_attn", "norm", "weight"), "linear_attn.norm.weight", (dv,), (1,), False),
        BlockTensor(("linear_attn", "out_proj", "kernel"), "linear_attn.out_proj.weight", (nv, dv, d), (2, 1), True),
    ]


def _mlp_entries(cfg: ModelConfig, moe: bool) -> list[BlockTensor]:
    d = cfg.hidden_size
    if moe:
        e, f = cfg.num_experts, cfg.moe_intermediate_size
        return [
            BlockTensor(("mlp", "gate", "kernel"), "mlp.gate.weight", (d, e), (1, 1), True),
            BlockTensor(("mlp", "experts", "gate_proj"), "mlp.experts.{e}.gate_proj.weight", (d, f), (1, 1), True, e),
            BlockTensor(("mlp", "experts", "up_proj"), "mlp.experts.{e}.up_proj.weight", (d, f), (1, 1), True, e),
            BlockTensor(("mlp", "experts", "down_proj"), "mlp.experts.{e}.down_proj.weight", (f, d), (1, 1), True, e),
        ]
    f = cfg.intermediate_size
    return [
        BlockTensor(("mlp", "gate_proj", "kernel"), "mlp.gate_proj.weight", (d, f), (1, 1), True),
        BlockTensor(("mlp", "up_proj", "kernel"), "mlp.up_proj.weight", (d, f), (1, 1), True),
        BlockTensor(("mlp", "down_proj", "kernel"), "mlp.down_proj.weight", (f, d), (1, 1), True),
    ]


def _block_entries(cfg: ModelConfig, layer: int) -> list[BlockTensor]:
    d = cfg.hidden_size
    norms = [
        BlockTensor(("input_layernorm", "weight"), "input_layernorm.weight", (d,), (1,), False),
        BlockTensor(("post_attention_layernorm", "weight"), "post_attention_layernorm.weight", (d,), (1,), False),
    ]
    mixer = _linear_attention_entries(cfg) if cfg.is_linear_layer(layer) else _attention_entries(cfg)
    return norms + mixer + _mlp_entries(cfg, cfg.is_moe_layer(layer))


def hf_layouts(cfg: ModelConfig) -> dict[ParamPath, TensorLayout]:
    """Every parameter path of `Qwen(cfg)` -> its HF tensors and rearrangement."""
    d, v, prefix = cfg.hidden_size, cfg.vocab_size, cfg.hf_prefix
    layouts = {
        ("embed_tokens",): TensorLayout(_names(prefix + "embed_tokens.weight"), (v, d), (1, 1), False),
        ("norm", "weight"): TensorLayout(_names(prefix + "norm.weight"), (d,), (1,), False),
    }
    if not cfg.tie_word_embeddings:
        layouts[("lm_head",)] = TensorLayout(_names("lm_head.weight"), (v, d), (1, 1), False)
    scanned = cfg.runtime.scan_layers
    for layer in range(1 if scanned else cfg.num_layers):
        for entry in _block_entries(cfg, layer):
            suffix = entry.suffix.replace("{e}", "{1}" if scanned else "{0}")
            if scanned:
                pattern, ranges, path = prefix + "layers.{0}." + suffix, (cfg.num_layers,), ("layers", *entry.path)
            else:
                pattern, ranges, path = f"{prefix}layers.{layer}." + suffix, (), ("layers", layer, *entry.path)
            if entry.experts:
                ranges = (*ranges, entry.experts)
            layouts[path] = TensorLayout(_names(pattern, *ranges), entry.inner_shape, entry.groups, entry.transposed,
                                         entry.row_offset, entry.full_rows)
    return layouts
