"""Logits parity with transformers (torch CPU, fp32) for every tiny architecture, including padded and
packed batches: max |diff| <= 1e-4."""

import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.models import RuntimeConfig, UnsupportedModelError, from_pretrained
from tests.tbjax.models.support import ALL_ARCHS, forward, torch_logits

TOL = 1e-4


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_logits_match_transformers(tiny_dir, arch):
    path = tiny_dir(arch)
    ids = np.random.default_rng(0).integers(0, 518, size=(2, 48))
    expected = torch_logits(path, ids)
    got = np.asarray(forward(from_pretrained(path), jnp.asarray(ids, jnp.int32)))
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=TOL, rtol=0)


@pytest.mark.parametrize("runtime", [
    RuntimeConfig(scan_layers=True),
    RuntimeConfig(remat="full"),
    RuntimeConfig(scan_layers=True, remat="dots"),
])
def test_scan_and_remat_do_not_change_logits(tiny_dir, runtime):
    path = tiny_dir("qwen3-moe")
    ids = jnp.asarray(np.random.default_rng(1).integers(0, 518, size=(2, 16)), jnp.int32)
    expected = forward(from_pretrained(path), ids)
    np.testing.assert_allclose(forward(from_pretrained(path, runtime=runtime), ids), expected, atol=1e-6)


def test_scan_refuses_mixed_dense_and_moe_layers(tiny_dir):
    with pytest.raises(UnsupportedModelError, match="mixes dense and MoE layers"):
        from_pretrained(tiny_dir("qwen3-moe-mixed"), runtime=RuntimeConfig(scan_layers=True))


def test_padded_batch_matches_unpadded_sequences(tiny_dir):
    """Right and left padding (segment 0) leave the real tokens' logits exactly as if run alone."""
    path = tiny_dir("qwen3")
    rng = np.random.default_rng(2)
    a, b = rng.integers(3, 518, size=20), rng.integers(3, 518, size=12)
    width = 20
    ids = np.zeros((2, width), np.int64)
    segments = np.zeros((2, width), np.int32)
    positions = np.zeros((2, width), np.int32)
    ids[0], segments[0], positions[0] = a, 1, np.arange(width)
    ids[1, width - 12:], segments[1, width - 12:], positions[1, width - 12:] = b, 1, np.arange(12)  # left pad
    model = from_pretrained(path)
    got = np.asarray(forward(model, jnp.asarray(ids, jnp.int32), jnp.asarray(positions), jnp.asarray(segments)))
    np.testing.assert_allclose(got[0], torch_logits(path, a[None])[0], atol=TOL, rtol=0)
    np.testing.assert_allclose(got[1, width - 12:], torch_logits(path, b[None])[0], atol=TOL, rtol=0)


@pytest.mark.parametrize("arch", ["qwen3", "qwen2", "qwen3-moe"])
def test_packed_batch_never_attends_across_documents(tiny_dir, arch):
    path = tiny_dir(arch)
    rng = np.random.default_rng(3)
    docs = [rng.integers(3, 518, size=n) for n in (9, 14, 5)]
    ids = np.concatenate([*docs, np.zeros(4, np.int64)])[None]
    segments = np.concatenate([np.full(len(d), i + 1) for i, d in enumerate(docs)] + [np.zeros(4)])[None]
    positions = np.concatenate([np.arange(len(d)) for d in docs] + [np.arange(4)])[None]
    got = np.asarray(forward(from_pretrained(path), jnp.asarray(ids, jnp.int32), jnp.asarray(positions, jnp.int32),
                             jnp.asarray(segments, jnp.int32)))
    start = 0
    for doc in docs:
        np.testing.assert_allclose(got[0, start:start + len(doc)], torch_logits(path, doc[None])[0], atol=TOL, rtol=0)
        start += len(doc)


def test_bfloat16_compute_stays_close_to_float32(tiny_dir):
    path = tiny_dir("qwen3")
    ids = jnp.asarray(np.random.default_rng(4).integers(0, 518, size=(1, 32)), jnp.int32)
    reference = np.asarray(forward(from_pretrained(path), ids))
    bf16 = np.asarray(forward(from_pretrained(path, dtype="bfloat16"), ids))
    assert bf16.dtype == np.float32
    assert np.abs(bf16 - reference).max() < 0.1 * np.abs(reference).max()
    assert np.abs(bf16 - reference).max() > 0  # really ran in bfloat16
