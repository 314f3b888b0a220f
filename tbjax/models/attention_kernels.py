"""Attention implementations behind one signature, chosen by `RuntimeConfig.attention_impl`.

- `xla`: plain einsums with a boolean mask: runs everywhere, so it is the CPU default and the reference.
- `cudnn`: `jax.nn.dot_product_attention(implementation="cudnn")`: cuDNN's fused GPU kernel, for rows short
  enough that the packed-segment mask, which it is handed as a dense [seq, seq] bias per row, fits.
- `splash`: Pallas splash attention: the TPU kernel; takes segment ids, so its state is O(seq).
- `triton`: Pallas's Triton flash attention: the GPU kernel that takes segment ids (O(seq) state), for
  packed rows too long for cuDNN's dense bias.
The two Pallas kernels run through the Pallas interpreter anywhere with `interpret=True` (tests, debugging).

All take q [batch, q_len, heads, head_dim], k/v [batch, kv_len, kv_heads, head_dim] and segment ids, and
return [batch, q_len, heads, head_dim]. Causality is by index and documents by segment id, so packed
sequences never attend across documents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AbstractMesh, Mesh, PartitionSpec

from tbjax.parallel.sharding import ShardingRules
from tbjax.sections.model import AttentionImpl


def causal_segment_mask(q_segments: jax.Array, kv_segments: jax.Array, q_offset: int | jax.Array = 0) -> jax.Array:
    """[batch, 1, q_len, kv_len] bool: key j is visible to query i iff j <= i + q_offset, same segment."""
    q_index = jnp.arange(q_segments.shape[1])[:, None] + q_offset
    kv_index = jnp.arange(kv_segments.shape[1])[None, :]
    same_doc = q_segments[:, :, None] == kv_segments[:, None, :]
    return (same_doc & (kv_index <= q_index)[None])[:, None]


def xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """Grouped-query attention with float32 softmax; mask [batch, 1, q_len, kv_len] bool."""
    b, q_len, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    q = q.reshape(b, q_len, kv_heads, heads // kv_heads, head_dim)
    scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k, preferred_element_type=jnp.float32)
    scores = scores * (head_dim**-0.5)
    scores = jnp.where(mask[:, :, None], scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgqs,bskd->bqkgd", probs, v)
    return out.reshape(b, q_len, heads, head_dim)


def causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, blocks: int = 4) -> jax.Array:
    """`xla_attention` for self-attention over packed documents, in `blocks` query blocks that each attend
    only to keys up to their own end: most of the masked upper triangle is never computed ((n + 1) / 2n of
    the work for n blocks). On CPU this makes a row's attention cheaper forward+backward
    (scripts/bench/model_forward_backward.py; figures in scripts/bench/README.md); more blocks cost more in
    small ops than they save."""
    seq = q.shape[1]
    size = -(-seq // blocks)
    out = []
    for start in range(0, seq, size):
        end = min(seq, start + size)
        mask = causal_segment_mask(segments[:, start:end], segments[:, :end], q_offset=start)
        out.append(xla_attention(q[:, start:end], k[:, :end], v[:, :end], mask))
    return jnp.concatenate(out, axis=1)


def cudnn_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array,
                    backend: Literal["xla", "cudnn"] | None) -> jax.Array:
    """The fused kernel on GPU; `backend=None` runs the same call through XLA (for tests off GPU)."""
    return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation=backend)


def splash_attention(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, interpret: bool) -> jax.Array:
    """Pallas splash attention (TPU), causal with segment ids; needs q_len == kv_len (training, prefill)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    b, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    block = min(512, seq)
    _require_whole_blocks("splash", seq, block)
    sizes = splash.BlockSizes(
        block_q=block, block_kv=block, block_kv_compute=block,
        block_q_dkv=block, block_kv_dkv=block, block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block,
    )
    mask = masks.MultiHeadMask([_blockwise_causal_mask_type()((seq, seq)) for _ in range(heads)])
    kernel = splash.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)
    # splash wants [heads, seq, head_dim] per example, pre-scaled queries, and kv heads repeated (GQA).
    q = jnp.swapaxes(q, 1, 2) * (head_dim**-0.5)
    k = jnp.repeat(jnp.swapaxes(k, 1, 2), heads // kv_heads, axis=1)
    v = jnp.repeat(jnp.swapaxes(v, 1, 2), heads // kv_heads, axis=1)
    ids = splash.SegmentIds(q=segments, kv=segments)
    out = jax.vmap(kernel)(q, k, v, segment_ids=ids)
    if isinstance(out, tuple):  # (out, residuals) comes back only from a kernel made with save_residuals
        raise TypeError("splash attention returned residuals it was not asked for")
    return jnp.swapaxes(out, 1, 2)


@functools.cache
def _blockwise_causal_mask_type() -> type:
    """splash's CausalMask, answering blocks wholly below or above the diagonal from cached arrays.

    Building the kernel evaluates the mask block by block in numpy, O(seq^2): at the reference's sequence
    length that costs tens of seconds per direction (forward, dK/dV) on every process start; answering whole
    blocks at once skips most of that work.
    """
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    class BlockwiseCausalMask(masks.CausalMask):
        def __getitem__(self, idx: tuple[slice, slice]) -> np.ndarray:
            rows, cols = (range(*s.indices(n)) for s, n in zip(idx, self.shape, strict=True))
            if self.offset == 0 and rows and cols and (rows[0] >= cols[-1] or rows[-1] < cols[0]):
                return _filled_block(len(rows), len(cols), rows[0] >= cols[-1])
            return super().__getitem__(idx)

    return BlockwiseCausalMask


@functools.cache
def _filled_block(rows: int, cols: int, value: bool) -> np.ndarray:
    block = np.full((rows, cols), value)
    block.flags.writeable = False
    return block


def triton_attention(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, interpret: bool) -> jax.Array:
    """Pallas's Triton flash attention (GPU), causal with segment ids; needs q_len == kv_len (training, prefill).

    It wants as many kv heads as query heads, so they are repeated (GQA): the kernel saves the repeated k and v
    for its backward pass and returns their gradients at full width, which the repeat's transpose sums.
    """
    from jax.experimental.pallas.ops.gpu.attention import mha

    seq, heads, head_dim = q.shape[1:]
    _require_whole_blocks("triton", seq, _triton_block(seq))
    k, v = (jnp.repeat(x, heads // x.shape[2], axis=2) for x in (k, v))
    return mha(q, k, v, segment_ids=segments, sm_scale=head_dim**-0.5, causal=True, interpret=interpret)


def _triton_block(seq: int) -> int:
    """The kernel's tile of the sequence: its default 128 tokens, or a shorter sequence whole when that is a
    power of two (Triton's tiles must be; the interpreter does not check, so tests alone would not catch it)."""
    from jax.experimental.pallas.ops.gpu.attention import BlockSizes

    block = BlockSizes.get_default().block_q
    return seq if seq < block and seq & (seq - 1) == 0 else block


def _require_whole_blocks(kernel: str, seq: int, block: int) -> None:
    """The Pallas kernels tile the sequence into whole blocks; a ragged row is refused here, with the config
    change that fixes it, rather than deep inside the kernel."""
    if seq % block:
        raise ValueError(f"{kernel} attention needs a sequence length that is a multiple of {block}, got {seq}; "
                         f"set train.row_len to a multiple of {block} (e.g. {-(-seq // block) * block})")


PallasKernel = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]  # (q, k, v, segments) -> out
# Each Pallas kernel and the platform it compiles for (any platform with interpret=True).
PALLAS_KERNELS = {"splash": (splash_attention, "tpu"), "triton": (triton_attention, "gpu")}


def pallas_attention_sharded(kernel: PallasKernel, q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array,
                             mesh: Mesh | AbstractMesh | None, rules: ShardingRules) -> jax.Array:
    """A Pallas kernel per shard: it is opaque to the SPMD partitioner, so it runs under shard_map with the
    batch split as the activation rules say and heads split over the axes the `kv_heads` rule names (query
    heads split the same way, so each shard holds whole GQA groups)."""
    if mesh is None or mesh.size == 1:
        return kernel(q, k, v, segments)
    batch = rules.activation_spec(q.shape[:1], ("batch",), mesh)[0]
    heads = rules.param_spec("attention kv heads", k.shape[2:3], ("kv_heads",), mesh)[0]
    qkv_spec = PartitionSpec(batch, None, heads, None)
    return jax.shard_map(kernel, mesh=mesh, in_specs=(qkv_spec, qkv_spec, qkv_spec, PartitionSpec(batch, None)),
                         out_specs=qkv_spec, check_vma=False)(q, k, v, segments)


def attend(
    impl: AttentionImpl,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segments: jax.Array,
    *,
    mesh: Mesh | AbstractMesh | None = None,
    rules: ShardingRules | None = None,
    interpret: bool = False,
) -> jax.Array:
    """Dispatches to the configured kernel. A GPU/TPU kernel on the wrong platform is an error, so a config
    never silently runs a slower path than it asked for; `interpret=True` runs a Pallas kernel (splash,
    triton) through the interpreter anywhere (tests, debugging)."""
    if impl == "xla":
        return causal_attention(q, k, v, segments)
    if impl == "cudnn":
        _require_platform(impl, "gpu", mesh)
        return cudnn_attention(q, k, v, causal_segment_mask(segments, segments), "cudnn")
    if impl in PALLAS_KERNELS:
        kernel, platform = PALLAS_KERNELS[impl]
        if not interpret:
            _require_platform(impl, platform, mesh)
        return pallas_attention_sharded(functools.partial(kernel, interpret=interpret), q, k, v, segments, mesh,
                                        rules or ShardingRules())
    raise ValueError(f"attention_impl {impl!r} is unknown; use xla, cudnn, splash or triton")


def _require_platform(impl: str, needed: str, mesh: Mesh | AbstractMesh | None) -> None:
    """The mesh's devices decide, not the default backend: ahead-of-time compilation for a TPU topology
    (tbjax.compile) runs on a CPU host whose mesh holds TPU devices."""
    if isinstance(mesh, AbstractMesh):
        raise ValueError(f"attention_impl={impl!r} runs on a mesh's devices, and an abstract mesh (a plan's) has none")
    platform = mesh.devices.flat[0].platform if mesh is not None else jax.default_backend()
    if platform != needed:
        raise ValueError(
            f"attention_impl={impl!r} needs a {needed.upper()} backend but JAX runs on {platform!r}; "
            "set runtime.attention_impl=xla (the portable default) for this machine."
        )
