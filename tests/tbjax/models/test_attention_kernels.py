"""The GPU and TPU attention kernels compute what the XLA reference computes, mask semantics included.

cuDNN's wrapper is run through its XLA implementation (same call, same mask), and the Pallas kernels (splash
for TPU, triton for GPU) through the Pallas interpreter, which executes the real kernel code on CPU.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.models.attention_kernels import (
    attend,
    causal_attention,
    causal_segment_mask,
    cudnn_attention,
    xla_attention,
)
from tbjax.parallel.mesh import make_mesh, parse_mesh_spec


@pytest.fixture(scope="module")
def qkv_and_segments():
    rng = np.random.default_rng(0)
    batch, seq, heads, kv_heads, head_dim = 2, 256, 4, 2, 128
    q = jnp.asarray(rng.normal(size=(batch, seq, heads, head_dim)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(batch, seq, kv_heads, head_dim)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(batch, seq, kv_heads, head_dim)), jnp.float32)
    segments = np.ones((batch, seq), np.int32)
    segments[0, 100:] = 2  # two packed documents
    segments[1, 200:] = 0  # right padding
    return q, k, v, jnp.asarray(segments)


def test_mask_is_causal_and_per_document():
    segments = jnp.asarray([[1, 1, 2, 2, 0]])
    mask = np.asarray(causal_segment_mask(segments, segments))[0, 0]
    expected = np.array([
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 0, 1],
    ], bool)
    np.testing.assert_array_equal(mask, expected)


def test_packed_attention_equals_separate_documents(qkv_and_segments):
    q, k, v, segments = qkv_and_segments
    packed = attend("xla", q, k, v, segments)
    ones = jnp.ones((1, 100), jnp.int32)
    alone = attend("xla", q[:1, :100], k[:1, :100], v[:1, :100], ones)
    np.testing.assert_allclose(packed[:1, :100], alone, atol=1e-5)
    second = attend("xla", q[:1, 100:], k[:1, 100:], v[:1, 100:], jnp.ones((1, 156), jnp.int32))
    np.testing.assert_allclose(packed[:1, 100:], second, atol=1e-5)


@pytest.mark.parametrize("blocks", [1, 3, 4, 7])
def test_query_blocks_equal_the_whole_masked_attention(qkv_and_segments, blocks):
    """Blocks that skip the keys after their own end (3 and 7 leave a shorter last block) change nothing."""
    q, k, v, segments = qkv_and_segments
    whole = xla_attention(q, k, v, causal_segment_mask(segments, segments))
    np.testing.assert_allclose(causal_attention(q, k, v, segments, blocks), whole, atol=1e-5)


def test_cudnn_wrapper_matches_xla_reference(qkv_and_segments):
    q, k, v, segments = qkv_and_segments
    mask = causal_segment_mask(segments, segments)
    np.testing.assert_allclose(cudnn_attention(q, k, v, mask, None), xla_attention(q, k, v, mask), atol=1e-5)


def test_splash_kernel_matches_xla_reference(qkv_and_segments):
    q, k, v, segments = qkv_and_segments
    expected = attend("xla", q, k, v, segments)
    np.testing.assert_allclose(attend("splash", q, k, v, segments, interpret=True), expected, atol=1e-4)


def output_and_grads(impl: str, q, k, v, segments, **options):
    """attend's output and the gradients of a random projection of it w.r.t. q, k and v, under jit."""
    cotangent = jnp.asarray(np.random.default_rng(1).normal(size=q.shape), jnp.float32)

    def loss(q, k, v):
        out = attend(impl, q, k, v, segments, **options)
        return jnp.sum(out * cotangent), out

    grads, out = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))(q, k, v)
    return (out, *grads)


def assert_same(got, expected):
    for value, reference, name in zip(got, expected, ("out", "dq", "dk", "dv"), strict=True):
        np.testing.assert_allclose(value, reference, atol=1e-4, err_msg=name)


def test_triton_kernel_matches_xla_reference_forward_and_gradients(qkv_and_segments):
    """Packed documents, padding and GQA (4 heads on 2 kv heads); the gradients go through the kernel's own
    backward pass and the kv-head repeat's transpose."""
    assert_same(output_and_grads("triton", *qkv_and_segments, interpret=True),
                output_and_grads("xla", *qkv_and_segments))


@pytest.mark.parametrize("impl", ["splash", "triton"])
def test_pallas_kernels_under_a_mesh_run_per_shard(qkv_and_segments, impl):
    """Forward and backward under shard_map, as the sharded training step runs them."""
    mesh = make_mesh(parse_mesh_spec("1x2x2"), jax.devices()[:4])  # batch over fsdp, heads over tensor
    jaxpr = jax.make_jaxpr(lambda *a: attend(impl, *a, mesh=mesh, interpret=True))(*qkv_and_segments)
    assert [eqn.primitive.name for eqn in jaxpr.eqns] == ["shard_map"]  # the partitioner never sees the kernel
    assert_same(output_and_grads(impl, *qkv_and_segments, mesh=mesh, interpret=True),
                output_and_grads("xla", *qkv_and_segments))


@pytest.mark.parametrize("impl,platform", [("cudnn", "GPU"), ("splash", "TPU"), ("triton", "GPU")])
def test_accelerator_kernels_refuse_the_wrong_platform(qkv_and_segments, impl, platform):
    q, k, v, segments = qkv_and_segments
    with pytest.raises(ValueError, match=f"needs a {platform} backend.*attention_impl=xla"):
        attend(impl, q, k, v, segments)


def test_blockwise_causal_mask_answers_every_block_like_splash_causal_mask():
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    from tbjax.models.attention_kernels import _blockwise_causal_mask_type

    fast, reference = _blockwise_causal_mask_type()((1536, 1536)), masks.CausalMask((1536, 1536))
    for q in range(0, 1536, 512):
        for kv in range(0, 1536, 512):
            index = (slice(q, q + 512), slice(kv, kv + 512))
            np.testing.assert_array_equal(fast[index], reference[index])


def test_splash_rejects_a_sequence_that_is_not_a_block_multiple(qkv_and_segments):
    q, k, v, segments = qkv_and_segments
    with pytest.raises(ValueError, match="multiple of 512, got 1000.*row_len"):
        attend("splash", *(jnp.tile(x, (1, 4) + (1,) * (x.ndim - 2))[:, :1000] for x in (q, k, v, segments)),
               interpret=True)


@pytest.mark.parametrize("seq,message", [(200, "multiple of 128, got 200.*row_len to a multiple of 128 .e.g. 256"),
                                         (96, "multiple of 128, got 96.*row_len")])
def test_triton_rejects_a_sequence_that_is_not_a_block_multiple(qkv_and_segments, seq, message):
    """96 is shorter than a block but not a power of two: Triton could not tile it whole either."""
    q, k, v, segments = qkv_and_segments
    with pytest.raises(ValueError, match=message):
        attend("triton", q[:, :seq], k[:, :seq], v[:, :seq], segments[:, :seq], interpret=True)


def test_triton_takes_a_short_power_of_two_sequence_whole(qkv_and_segments):
    q, k, v, segments = (x[:, :64] for x in qkv_and_segments)
    np.testing.assert_allclose(attend("triton", q, k, v, segments, interpret=True),
                               attend("xla", q, k, v, segments), atol=1e-4)


def test_triton_kernel_lowers_to_triton_calls_for_cuda_at_the_reference_row_length():
    """What the interpreter cannot show: the kernel is lowered by Pallas's Triton backend for CUDA (here,
    without a GPU) at the 27B reference's per-GPU shapes, one 110,592-token row with 5 query heads on 1 kv
    head in bfloat16, forward and backward: three Triton kernels (forward, the backward's preprocessing,
    the backward), no dense [seq, seq] array anywhere in the program."""
    from tbjax.models.attention_kernels import triton_attention

    seq = 110_592
    q, kv = (jax.ShapeDtypeStruct((1, seq, heads, 128), jnp.bfloat16) for heads in (5, 1))
    segments = jax.ShapeDtypeStruct((1, seq), jnp.int32)

    def loss(q, k, v, segments):
        return triton_attention(q, k, v, segments, interpret=False).astype(jnp.float32).sum()

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    text = grad.trace(q, kv, kv, segments).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("custom_call @__gpu$xla.gpu.triton") == 3
    assert f"{seq}x{seq}" not in text
