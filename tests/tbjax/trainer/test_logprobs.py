"""chunked_logprobs on the paths without vocabulary padding (no column mask, no NaN guard), with a single
chunk, and with several chunks kept or rematerialised: values and gradients equal the dense computation;
trained_logprobs (the head at trained positions only) equals it where it computes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.trainer import logprobs
from tbjax.trainer.logprobs import chunked_logprobs, trained_logprobs
from tbjax.trainer.packing import trained_positions


def dense(hidden, table, targets, temperature):
    logp = jax.nn.log_softmax(jnp.einsum("bsd,vd->bsv", hidden, table) / temperature)
    return jnp.take_along_axis(logp, targets[..., None], -1)[..., 0], -(jnp.exp(logp) * logp).sum(-1)


@pytest.mark.parametrize("keep_bytes", [0, logprobs.KEEP_LOGITS_BYTES])  # 0: every multi-chunk body is remat
@pytest.mark.parametrize("chunk", [8, 32, 64])  # four chunks; one exact chunk; one chunk wider than the vocab
def test_unpadded_and_single_chunk_equal_the_dense_computation(chunk, keep_bytes, monkeypatch):
    monkeypatch.setattr(logprobs, "KEEP_LOGITS_BYTES", keep_bytes)
    rng = np.random.default_rng(1)
    hidden = jnp.asarray(rng.normal(size=(2, 5, 8)), jnp.float32)
    table = jnp.asarray(rng.normal(size=(32, 8)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 32, size=(2, 5)), jnp.int32)
    logp, entropy = chunked_logprobs(hidden, table, targets, 0.8, chunk)
    want_logp, want_entropy = dense(hidden, table, targets, 0.8)
    np.testing.assert_allclose(logp, want_logp, atol=1e-5)
    np.testing.assert_allclose(entropy, want_entropy, atol=1e-5)

    def objective(f):  # both outputs, so the entropy's gradient path is checked too
        return lambda h, t: sum(x.sum() * w for x, w in zip(f(h, t), (1.0, 0.3), strict=True))

    got = jax.grad(objective(lambda h, t: chunked_logprobs(h, t, targets, 0.8, chunk)), argnums=(0, 1))(hidden, table)
    want = jax.grad(objective(lambda h, t: dense(h, t, targets, 0.8)), argnums=(0, 1))(hidden, table)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)
    jaxpr = str(jax.make_jaxpr(lambda h: chunked_logprobs(h, table, targets, 0.8, chunk))(hidden))
    assert ("checkpoint" in jaxpr or "remat" in jaxpr) == (chunk < 32 and keep_bytes == 0)


def test_trained_positions_only_equal_the_full_head_there_and_zero_elsewhere():
    """Two shards of two rows each: values and the hidden states' gradient match the full head at the listed
    positions; unlisted positions get zero and no gradient."""
    rng = np.random.default_rng(2)
    hidden = jnp.asarray(rng.normal(size=(4, 6, 8)), jnp.float32)
    table = jnp.asarray(rng.normal(size=(32, 8)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, 32, size=(4, 6)), jnp.int32)
    mask = rng.random((4, 6)) < 0.4
    index = trained_positions(mask[None], shards=2)[0]
    weights = jnp.asarray(rng.normal(size=(4, 6)), jnp.float32) * mask

    def objective(f):
        return lambda h: sum((x * weights).sum() * w for x, w in zip(f(h), (1.0, 0.3), strict=True))

    logp, entropy = trained_logprobs(hidden, table, targets, jnp.asarray(index), 0.8, chunk=8)
    want_logp, want_entropy = chunked_logprobs(hidden, table, targets, 0.8, chunk=8)
    np.testing.assert_allclose(logp, np.where(mask, want_logp, 0.0), atol=1e-6)
    np.testing.assert_allclose(entropy, np.where(mask, want_entropy, 0.0), atol=1e-6)
    got = jax.grad(objective(lambda h: trained_logprobs(h, table, targets, jnp.asarray(index), 0.8, 8)))(hidden)
    want = jax.grad(objective(lambda h: chunked_logprobs(h, table, targets, 0.8, 8)))(hidden)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.abs(np.asarray(got)[~mask]).max() == 0.0 and np.abs(np.asarray(got)[mask]).min() > 0.0
