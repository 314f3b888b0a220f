"""chunked_logprobs on the paths without vocabulary padding (no column mask, no NaN guard) and with a
single chunk (no remat): values and gradients equal the dense computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.logprobs import chunked_logprobs


def dense(hidden, table, targets, temperature):
    logp = jax.nn.log_softmax(jnp.einsum("bsd,vd->bsv", hidden, table) / temperature)
    return jnp.take_along_axis(logp, targets[..., None], -1)[..., 0], -(jnp.exp(logp) * logp).sum(-1)


@pytest.mark.parametrize("chunk", [8, 32, 64])  # four chunks; one exact chunk; one chunk wider than the vocab
def test_unpadded_and_single_chunk_equal_the_dense_computation(chunk):
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
