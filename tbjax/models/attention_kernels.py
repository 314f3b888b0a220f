"""Attention implementations behind one signature, chosen by `RuntimeConfig.attention_impl`.

- `xla`: plain einsums with a boolean mask; runs everywhere and is the CPU default and the reference.
- `cudnn`: `jax.nn.dot_product_attention(implementation="cudnn")`, the fused GPU kernel.
- `splash`: Pallas splash attention, the TPU kernel (segment ids natively; `interpret=True` off TPU).

All take q [batch, q_len, heads, head_dim], k/v [batch, kv_len, kv_heads, head_dim] and segment ids, and
return [batch, q_len, heads, head_dim]. Causality is by index and documents by segment id, so packed
sequences never attend across documents.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from tbjax.models.config import AttentionImpl
from tbjax.sharding import ShardingRules


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
    the work for n blocks). On CPU this made the attention of a 512-token row 2x cheaper forward+backward
    (scripts/bench/model_forward_backward.py); more blocks cost more in small ops than they save."""
    seq = q.shape[1]
    size = -(-seq // blocks)
    out = []
    for start in range(0, seq, size):
        end = min(seq, start + size)
        mask = causal_segment_mask(segments[:, start:end], segments[:, :end], q_offset=start)
        out.append(xla_attention(q[:, start:end], k[:, :end], v[:, :end], mask))
    return jnp.concatenate(out, axis=1)


def cudnn_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, backend: str | None) -> jax.Array:
    """The fused kernel on GPU; `backend=None` runs the same call through XLA (for tests off GPU)."""
    return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation=backend)


def splash_attention(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, interpret: bool) -> jax.Array:
    """Pallas splash attention (TPU), causal with segment ids; needs q_len == kv_len (training, prefill)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    b, seq, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    block = min(512, seq)
    if seq % block:
        raise ValueError(f"splash attention needs a sequence length that is a multiple of {block}, got {seq}; "
                         f"set train.row_len to a multiple of {block} (e.g. {-(-seq // block) * block})")
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
    return jnp.swapaxes(out, 1, 2)


@functools.cache
def _blockwise_causal_mask_type() -> type:
    """splash's CausalMask, answering blocks wholly below or above the diagonal from cached arrays.

    Building the kernel evaluates the mask block by block in numpy, O(seq^2): at 110k tokens that took
    ~40 s per direction (forward, dK/dV) on every process start; whole blocks make it ~10x cheaper.
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


def splash_attention_sharded(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, mesh: Mesh | None,
                             rules: ShardingRules, interpret: bool) -> jax.Array:
    """Splash per shard: a Pallas kernel is opaque to the SPMD partitioner, so it runs under shard_map with
    the batch split as the activation rules say and heads split over the axes the `q_heads` rule names."""
    if mesh is None or mesh.size == 1:
        return splash_attention(q, k, v, segments, interpret)
    batch = rules.activation_spec(q.shape[:1], ("batch",), mesh)[0]
    heads = rules.param_spec("attention kv heads", k.shape[2:3], ("kv_heads",), mesh)[0]
    qkv_spec = PartitionSpec(batch, None, heads, None)
    kernel = functools.partial(splash_attention, interpret=interpret)
    return jax.shard_map(kernel, mesh=mesh, in_specs=(qkv_spec, qkv_spec, qkv_spec, PartitionSpec(batch, None)),
                         out_specs=qkv_spec, check_vma=False)(q, k, v, segments)


def attend(
    impl: AttentionImpl,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segments: jax.Array,
    *,
    mesh: Mesh | None = None,
    rules: ShardingRules | None = None,
    interpret: bool = False,
) -> jax.Array:
    """Dispatches to the configured kernel. A GPU/TPU kernel on the wrong platform is an error, so a config
    never silently runs a slower path than it asked for; `interpret=True` runs splash's Pallas kernel
    through the interpreter anywhere (tests, debugging)."""
    if impl == "xla":
        return causal_attention(q, k, v, segments)
    if impl == "cudnn":
        _require_platform(impl, "gpu", mesh)
        return cudnn_attention(q, k, v, causal_segment_mask(segments, segments), "cudnn")
    if impl == "splash":
        if not interpret:
            _require_platform(impl, "tpu", mesh)
        return splash_attention_sharded(q, k, v, segments, mesh, rules or ShardingRules(), interpret)
    raise ValueError(f"attention_impl {impl!r} is unknown; use xla, cudnn or splash")


def _require_platform(impl: str, needed: str, mesh: Mesh | None) -> None:
    """The mesh's devices decide, not the default backend: ahead-of-time compilation for a TPU topology
    (tbjax.compile) runs on a CPU host whose mesh holds TPU devices."""
    platform = mesh.devices.flat[0].platform if mesh is not None else jax.default_backend()
    if platform != needed:
        raise ValueError(
            f"attention_impl={impl!r} needs a {needed.upper()} backend but JAX runs on {platform!r}; "
            "set runtime.attention_impl=xla (the portable default) for this machine."
        )
