"""Gated DeltaNet's pieces against independent references: the chunked rule against transformers' torch
recurrence and our per-token scan (documents, carried state, chunk sizes and grouping), the short conv
against numpy, and both kept finite and close in bfloat16 under decays strong enough to underflow."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_recurrent_gated_delta_rule

from tbjax.models.delta_rule import chunked_gated_delta, document_index, gated_delta_scan
from tbjax.models.short_conv import causal_conv

B, T, H, DK, DV = 2, 150, 3, 8, 12
chunked = jax.jit(chunked_gated_delta, static_argnames=("chunk_size", "chunks_per_step"))
scan = jax.jit(gated_delta_scan)
conv = jax.jit(causal_conv)


def rule_inputs(seed: int = 0, decay_scale: float = 0.5) -> tuple[np.ndarray, ...]:
    """q (unit, scaled by dk^-1/2), k (unit), v, g <= 0, beta in (0, 1): what the layer feeds the rule."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, B, T, H, DK)).astype(np.float32)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) * DK**-0.5
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=(B, T, H, DV)).astype(np.float32)
    g = (-np.abs(rng.normal(size=(B, T, H))) * decay_scale).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.normal(size=(B, T, H))))).astype(np.float32)
    return q, k, v, g, beta


@functools.cache
def packed_docs() -> jax.Array:
    """Row 0: three documents (boundaries inside chunks and on none of them); row 1: 7 tokens of left padding."""
    segments = np.ones((B, T), np.int32)
    segments[0, 40:], segments[0, 100:] = 2, 3
    segments[1, :7], segments[1, 7:] = 0, 5
    return document_index(jnp.asarray(segments))


ZERO_STATE = jnp.zeros((B, H, DK, DV), jnp.float32)


def test_document_index_counts_segment_changes():
    np.testing.assert_array_equal(document_index(jnp.asarray([[0, 0, 1, 1, 2, 0], [3, 3, 3, 3, 3, 3]])),
                                  [[0, 0, 1, 1, 2, 3], [0, 0, 0, 0, 0, 0]])


def test_chunked_rule_equals_transformers_recurrence():
    q, k, v, g, beta = rule_inputs()
    # transformers normalises q and k itself (idempotent on unit vectors) and scales q by dk^-1/2
    expected, expected_state = torch_recurrent_gated_delta_rule(
        *(torch.tensor(x) for x in (q * DK**0.5, k, v, g, beta)), output_final_state=True,
        use_qk_l2norm_in_kernel=True)
    one_doc = jnp.zeros((B, T), jnp.int32)
    out, state = chunked(q, k, v, g, beta, one_doc, ZERO_STATE, chunk_size=64, chunks_per_step=None)
    np.testing.assert_allclose(out, expected.numpy(), atol=2e-6)
    np.testing.assert_allclose(state, expected_state.numpy(), atol=2e-6)


@pytest.mark.parametrize("chunk_size,chunks_per_step", [(16, 4), (64, None)])
def test_chunked_rule_equals_the_scan_across_documents_and_carried_state(chunk_size, chunks_per_step):
    """(16, 4): 10 chunks in steps of 4, so the last step is padded with empty chunks."""
    q, k, v, g, beta = rule_inputs(1)
    docs = packed_docs()
    carried = jnp.asarray(np.random.default_rng(2).normal(size=(B, H, DK, DV)), jnp.float32)
    out, state = chunked(q, k, v, g, beta, docs, carried, chunk_size=chunk_size, chunks_per_step=chunks_per_step)
    ref_out, ref_state = scan(q, k, v, g, beta, docs, carried)
    np.testing.assert_allclose(out, ref_out, atol=2e-6)
    np.testing.assert_allclose(state, ref_state, atol=2e-6)
    # the middle document of row 0 sees nothing of its neighbours nor of the carried state
    alone, _ = scan(*(x[:1, 40:100] for x in (q, k, v, g, beta)), jnp.zeros((1, 60), jnp.int32), ZERO_STATE[:1])
    np.testing.assert_allclose(out[:1, 40:100], alone, atol=2e-6)


def test_strong_decay_stays_finite_and_bfloat16_stays_close():
    """Decays of exp(-40) per token underflow to 0 in float32: the chunked form must neither overflow nor
    produce NaN (values or gradients), and bfloat16 inputs must be computed in float32 all the same."""
    q, k, v, g, beta = rule_inputs(3, decay_scale=40.0)
    docs = packed_docs()
    out, state = chunked(q, k, v, g, beta, docs, ZERO_STATE, chunk_size=64, chunks_per_step=None)
    ref, _ = scan(q, k, v, g, beta, docs, ZERO_STATE)
    np.testing.assert_allclose(out, ref, atol=2e-6)
    loss = jax.jit(lambda g_: jnp.sum(chunked_gated_delta(q, k, v, g_, beta, docs, chunk_size=64)[0] ** 2))
    assert np.isfinite(np.asarray(jax.grad(loss)(g))).all() and np.isfinite(np.asarray(state)).all()

    bf16 = [jnp.asarray(x, jnp.bfloat16) for x in rule_inputs(4)]
    out_bf16, state_bf16 = chunked(*bf16, docs, ZERO_STATE, chunk_size=64, chunks_per_step=None)
    reference, _ = chunked(*(x.astype(jnp.float32) for x in bf16), docs, ZERO_STATE, chunk_size=64,
                           chunks_per_step=None)
    assert out_bf16.dtype == jnp.float32 and state_bf16.dtype == jnp.float32
    # float32 arithmetic inside: only fusion order differs (bfloat16 arithmetic would be off by ~1e-2)
    np.testing.assert_allclose(out_bf16, reference, atol=1e-4)


def numpy_conv(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """y_t = sum_s weight[K-1-s] x_{t-s}, zeros before the start (what torch's padded conv1d computes)."""
    width = weight.shape[0] - 1
    padded = np.concatenate([np.zeros((x.shape[0], width, *x.shape[2:]), x.dtype), x], axis=1)
    return sum(padded[:, width - s:width - s + x.shape[1]] * weight[width - s] for s in range(width + 1))


def test_short_conv_per_document_and_with_a_decode_state():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(1, 30, 2, 3)).astype(np.float32)
    weight = rng.normal(size=(4, 2, 3)).astype(np.float32)
    docs = document_index(jnp.asarray([[1] * 12 + [2] * 2 + [3] * 16]))
    y, _ = conv(jnp.asarray(x), jnp.asarray(weight), docs)
    for start, stop in ((0, 12), (12, 14), (14, 30)):
        np.testing.assert_allclose(y[:, start:stop], numpy_conv(x[:, start:stop], weight), atol=1e-6)
    # the state after a prefix (taken at the last real token, bucket padding after it) continues exactly
    one_doc = jnp.zeros((1, 30), jnp.int32)
    whole, _ = conv(jnp.asarray(x), jnp.asarray(weight), one_doc)
    padded_prefix = np.concatenate([x[:, :9], np.full_like(x[:, :7], 99.0)], axis=1)
    _, state = conv(jnp.asarray(padded_prefix), jnp.asarray(weight), one_doc[:, :16], ends=jnp.asarray([8]))
    rest, _ = conv(jnp.asarray(x[:, 9:]), jnp.asarray(weight), one_doc[:, 9:], state)
    np.testing.assert_allclose(rest, whole[:, 9:], atol=1e-6)
    # no real token (an idle decode row): the state stays as it was
    _, kept = conv(jnp.asarray(x[:, :1]), jnp.asarray(weight), one_doc[:, :1], state, jnp.asarray([-1]))
    np.testing.assert_array_equal(kept, state)
