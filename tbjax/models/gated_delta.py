"""The gated delta rule, Gated DeltaNet's token mixer, in the forms training and decoding need.

Per value head, a state S [key_dim, value_dim] is decayed, corrected towards the new value and read:

    S <- exp(g_t) S;    S <- S + k_t (beta_t (v_t - S^T k_t))^T;    o_t = S^T q_t

- `chunked_gated_delta` (training, prefill): tokens are grouped in chunks; within a chunk the corrections
  are solved in parallel (one triangular solve: the WY/UT form of the DeltaNet paper), and only the state
  crosses chunks, so cost is linear in length with matmul-shaped work.
- `gated_delta_step` (decoding): one token against a carried state.
- `gated_delta_scan`: the step scanned over a sequence; the plain reference and the benchmark's baseline.

Every form takes `docs` [batch, seq] int32, a non-decreasing document counter (`document_index` turns
packed segment ids into one): the state never crosses a change of document. A carried `initial_state`
belongs to the document of the first token. All state arithmetic is float32 whatever the inputs' dtype:
the state sums many small corrections, and the within-chunk decays exp(cumulative g) are formed as
differences inside one document, so they never overflow or lose the small terms.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def document_index(segments: jax.Array) -> jax.Array:
    """segments [batch, seq] int -> [batch, seq] int32 that grows by one wherever the segment id changes, so
    equal values mark one contiguous document (padding, segment 0, is its own document)."""
    changes = (segments[:, 1:] != segments[:, :-1]).astype(jnp.int32)
    return jnp.concatenate([jnp.zeros_like(changes[:, :1]), jnp.cumsum(changes, axis=1)], axis=1)


def gated_delta_step(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, beta: jax.Array,
                     state: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One token. q, k: [batch, heads, key_dim]; v: [batch, heads, value_dim]; g, beta: [batch, heads];
    state: [batch, heads, key_dim, value_dim] float32 -> (output [batch, heads, value_dim] float32, state)."""
    q, k, v, g, beta = (x.astype(jnp.float32) for x in (q, k, v, g, beta))
    state = state * jnp.exp(g)[..., None, None]
    predicted = jnp.einsum("bhkv,bhk->bhv", state, k)
    state = state + k[..., :, None] * (beta[..., None] * (v - predicted))[..., None, :]
    return jnp.einsum("bhkv,bhk->bhv", state, q), state


def gated_delta_scan(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, beta: jax.Array, docs: jax.Array,
                     initial_state: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """The step over every token in turn (same shapes and result as `chunked_gated_delta`)."""
    b, _, h, dk = k.shape
    state = _initial(initial_state, b, h, dk, v.shape[-1])
    new_doc = jnp.concatenate([jnp.zeros_like(docs[:, :1], bool), docs[:, 1:] != docs[:, :-1]], axis=1)

    def step(state, xs):
        q_t, k_t, v_t, g_t, beta_t, reset = xs
        state = jnp.where(reset[:, None, None, None], 0.0, state)
        out, state = gated_delta_step(q_t, k_t, v_t, g_t, beta_t, state)
        return state, out

    xs = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, g, beta, new_doc))
    state, out = jax.lax.scan(step, state, xs)
    return jnp.moveaxis(out, 0, 1), state


def chunked_gated_delta(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, beta: jax.Array, docs: jax.Array,
                        initial_state: jax.Array | None = None, chunk_size: int = 64
                        ) -> tuple[jax.Array, jax.Array]:
    """q, k: [batch, seq, heads, key_dim]; v: [batch, seq, heads, value_dim]; g (log decay, <= 0) and beta:
    [batch, seq, heads]; docs: [batch, seq] int32; initial_state: [batch, heads, key_dim, value_dim] or None
    (zeros) -> (output [batch, seq, heads, value_dim] float32, state after the last token).

    The sequence is padded to whole chunks with g = 0 and beta = 0 (state passes through unchanged), so the
    returned state is the one after the last real token."""
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    pad = -t % chunk_size
    n = (t + pad) // chunk_size

    def chunks(x: jax.Array) -> jax.Array:  # [b, t, h, ...] -> [b, h, n, chunk, ...] float32
        x = jnp.pad(x.astype(jnp.float32), [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        x = jnp.moveaxis(x, 2, 1)
        return x.reshape(b, h, n, chunk_size, *x.shape[3:])

    q, k, v, g, beta = (chunks(x) for x in (q, k, v, g, beta))
    docs = jnp.pad(docs, [(0, 0), (0, pad)], mode="edge").reshape(b, 1, n, chunk_size)
    # the document the incoming state belongs to: the first token's for chunk 0, else the previous chunk's last
    prev_doc = jnp.concatenate([docs[:, :, :1, 0], docs[:, :, :-1, -1]], axis=2)[..., None]
    continues = docs == prev_doc  # [b, 1, n, chunk]: reads the incoming state
    same_doc = docs[..., :, None] == docs[..., None, :]
    causal = jnp.tril(jnp.ones((chunk_size, chunk_size), bool))
    earlier = jnp.tril(causal, -1)  # j < i
    visible = same_doc & causal  # token i sees token j <= i of its document

    decay = jnp.cumsum(g, axis=-1)  # log of the decay from the chunk start through each token
    # log decay from token j to token i, summed over just the tokens between (not a difference of two long
    # cumulative sums, which loses the small terms once decays add up to thousands)
    between = jnp.cumsum(jnp.where(earlier, g[..., :, None], 0.0), axis=-2)
    pair_decay = jnp.exp(jnp.where(visible, between, -jnp.inf))
    k_beta = k * beta[..., None]
    # corrections u solve (I + strictly_lower(beta_i k_i.k_j decay_ij)) u = beta v: the within-chunk delta rule
    system = jnp.where(visible & earlier, jnp.einsum("bhnik,bhnjk->bhnij", k_beta, k) * pair_decay, 0.0)
    system = system + jnp.eye(chunk_size, dtype=jnp.float32)
    rhs = jnp.concatenate([v * beta[..., None], k_beta * jnp.exp(decay)[..., None]], axis=-1)
    solved = jax.scipy.linalg.solve_triangular(system, rhs, lower=True, unit_diagonal=True)
    u, w = solved[..., :dv], jnp.where(continues[..., None], solved[..., dv:], 0.0)
    q_read = jnp.where(continues[..., None], q * jnp.exp(decay)[..., None], 0.0)
    scores = jnp.einsum("bhnik,bhnjk->bhnij", q, k) * pair_decay
    k_write = k * pair_decay[..., -1, :, None]  # decayed to the chunk's end; zero outside its last document
    carry_decay = jnp.where(continues[..., -1], jnp.exp(decay[..., -1]), 0.0)  # [b, h, n]

    def across(state, xs):
        u_c, w_c, q_c, scores_c, k_c, decay_c = xs
        v_new = u_c - jnp.einsum("bhik,bhkv->bhiv", w_c, state)
        out = jnp.einsum("bhik,bhkv->bhiv", q_c, state) + jnp.einsum("bhij,bhjv->bhiv", scores_c, v_new)
        state = state * decay_c[..., None, None] + jnp.einsum("bhjk,bhjv->bhkv", k_c, v_new)
        return state, out

    xs = tuple(jnp.moveaxis(x, 2, 0) for x in (u, w, q_read, scores, k_write, carry_decay))
    state, out = jax.lax.scan(across, _initial(initial_state, b, h, dk, dv), xs)
    out = jnp.moveaxis(out, 0, 2).reshape(b, h, n * chunk_size, dv)[:, :, :t]
    return jnp.moveaxis(out, 1, 2), state


def _initial(state: jax.Array | None, b: int, h: int, dk: int, dv: int) -> jax.Array:
    return jnp.zeros((b, h, dk, dv), jnp.float32) if state is None else state.astype(jnp.float32)
