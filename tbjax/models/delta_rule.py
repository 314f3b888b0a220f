"""The gated delta rule, Gated DeltaNet's token mixer, in the forms training and decoding need.

Per value head, a state S [key_dim, value_dim] is decayed, corrected towards the new value and read:

    S <- exp(g_t) S;    S <- S + k_t (beta_t (v_t - S^T k_t))^T;    o_t = S^T q_t

- `chunked_gated_delta` (training, prefill): tokens are grouped in chunks; within a chunk the corrections
  are solved in parallel (one unit-triangular inverse: the WY/UT form of the DeltaNet paper), and only the
  state crosses chunks, so cost is linear in length with matmul-shaped work.
- `gated_delta_step` (decoding): one token against a carried state.
- `gated_delta_scan`: the step scanned over a sequence; the plain reference and the benchmark's baseline.

Every form takes `docs` [batch, seq] int32, a non-decreasing document counter (`document_index` turns
packed segment ids into one): the state never crosses a change of document. A carried `initial_state`
belongs to the document of the first token. All state arithmetic is float32 whatever the inputs' dtype:
the state sums many small corrections. Within a chunk, the decay between two tokens is exp of the sum of
the log decays between them, inside one document (masked to -inf elsewhere before the exp), so it never
overflows nor loses the small terms to a difference of two long cumulative sums.
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
                        initial_state: jax.Array | None = None, chunk_size: int = 64,
                        chunks_per_step: int | None = 4) -> tuple[jax.Array, jax.Array]:
    """q, k: [batch, seq, heads, key_dim]; v: [batch, seq, heads, value_dim]; g (log decay, <= 0) and beta:
    [batch, seq, heads]; docs: [batch, seq] int32; initial_state: [batch, heads, key_dim, value_dim] or None
    (zeros) -> (output [batch, seq, heads, value_dim] float32, state after the last token).

    The sequence is padded to whole chunks with g = 0 and beta = 0 (state passes through unchanged), so the
    returned state is the one after the last real token. The parallel part of `chunks_per_step` chunks is
    done at once, then the light recurrence runs across them: None does every chunk's parallel part at once
    (big batched matmuls, for accelerators); a few per step keep the working set in a CPU's cache."""
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    n = -(-t // chunk_size)
    group = min(chunks_per_step or n, n)
    steps = -(-n // group)
    pad = steps * group * chunk_size - t

    def chunks(x: jax.Array) -> jax.Array:
        """[b, t, h, ...] -> [steps, group, b, chunk, h, ...] float32: no transpose of the long axis (none at
        all for one row), which would cost as much as the rule itself at long lengths."""
        x = jnp.pad(x.astype(jnp.float32), [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        return jnp.moveaxis(x.reshape(b, steps, group, chunk_size, *x.shape[2:]), 0, 2)

    docs = jnp.pad(docs, [(0, 0), (0, pad)], mode="edge").reshape(b, steps * group, chunk_size)
    # the document the incoming state belongs to: the first token's for chunk 0, else the previous chunk's last
    prev_doc = jnp.concatenate([docs[:, :1, 0], docs[:, :-1, -1]], axis=1)
    docs = jnp.moveaxis(docs.reshape(b, steps, group, 1, chunk_size), 0, 2)
    prev_doc = jnp.moveaxis(prev_doc.reshape(b, steps, group, 1, 1), 0, 2)
    xs = (*(chunks(x) for x in (q, k, v, g, beta)), docs, prev_doc)

    def across(state, pieces):
        u, w, q_read, scores, k_write, carry_decay = pieces
        v_new = u - w @ state
        out = q_read @ state + scores @ v_new
        state = state * carry_decay[..., None, None] + jnp.swapaxes(k_write, -1, -2) @ v_new
        return state, jnp.swapaxes(out, -3, -2)  # [b, chunk, h, dv]

    def step(state, grouped):
        q, k, v, g, beta, docs, prev_doc = grouped
        q, k, v = (jnp.swapaxes(x, -3, -2) for x in (q, k, v))  # head-major
        g, beta = (jnp.swapaxes(x, -2, -1) for x in (g, beta))
        return jax.lax.scan(across, state, _within_chunk(q, k, v, g, beta, docs, prev_doc))

    state, out = jax.lax.scan(step, _initial(initial_state, b, h, dk, dv), xs)  # out [steps, group, b, c, h, dv]
    out = jnp.moveaxis(out, 2, 0).reshape(b, steps * group * chunk_size, h, dv)
    return out[:, :t], state


def _within_chunk(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, beta: jax.Array, docs: jax.Array,
                  prev_doc: jax.Array) -> tuple[jax.Array, ...]:
    """Chunks' parallel part (any leading dims before these). q, k: [b, h, c, dk]; v: [b, h, c, dv]; g, beta:
    [b, h, c]; docs [b, 1, c]; prev_doc [b, 1, 1] the incoming state's document -> what the recurrence across
    chunks combines:
    corrections u [.., c, dv] and their dependence on the incoming state w [.., c, dk], decayed queries that
    read it, the masked decayed within-chunk scores [.., c, c], decayed keys that write the outgoing state,
    and the incoming state's decay to the chunk's end [b, h]."""
    size = g.shape[-1]
    continues = docs == prev_doc  # [b, 1, c]: tokens that read the incoming state
    causal = jnp.tril(jnp.ones((size, size), bool))
    earlier = jnp.tril(causal, -1)  # j < i
    visible = (docs[..., :, None] == docs[..., None, :]) & causal  # token i sees token j <= i of its document
    decay = jnp.cumsum(g, axis=-1)  # log of the decay from the chunk start through each token
    # log decay from token j to token i, summed over just the tokens between (not a difference of two long
    # cumulative sums, which loses the small terms once decays add up to thousands)
    between = jnp.cumsum(jnp.where(earlier, g[..., :, None], 0.0), axis=-2)
    pair_decay = jnp.exp(jnp.where(visible, between, -jnp.inf))
    k_beta = k * beta[..., None]
    # corrections u solve (I + strictly_lower(beta_i k_i.k_j decay_ij)) u = beta v: the within-chunk delta rule
    system = jnp.where(visible & earlier, (k_beta @ jnp.swapaxes(k, -1, -2)) * pair_decay, 0.0)
    rhs = jnp.concatenate([v * beta[..., None], k_beta * jnp.exp(decay)[..., None]], axis=-1)
    solved = unit_lower_inverse(system) @ rhs
    dv = v.shape[-1]
    u, w = solved[..., :dv], jnp.where(continues[..., None], solved[..., dv:], 0.0)
    q_read = jnp.where(continues[..., None], q * jnp.exp(decay)[..., None], 0.0)
    scores = (q @ jnp.swapaxes(k, -1, -2)) * pair_decay
    k_write = k * pair_decay[..., -1, :, None]  # decayed to the chunk's end; zero outside its last document
    carry_decay = jnp.where(continues[..., -1], jnp.exp(decay[..., -1]), 0.0)
    return u, w, q_read, scores, k_write, carry_decay


def unit_lower_inverse(strict: jax.Array) -> jax.Array:
    """(I + strict)^-1 for strictly lower-triangular `strict` [..., n, n], n a power of two.

    Blockwise, doubling the block size: with the inverses T11, T22 of two neighbouring diagonal blocks, the
    inverse of the block they form has T21 = -T22 A21 T11. log2(n) rounds of small matmuls, each round over
    all blocks at once: the numerics of forward substitution at matmul speed (XLA's CPU triangular solve
    runs batched small systems one by one, far slower; scripts/bench/README.md)."""
    n = strict.shape[-1]
    if n & (n - 1):
        raise ValueError(f"unit_lower_inverse needs a power-of-two size, got {n}")
    lead = strict.shape[:-2]
    inverse = jnp.ones((*lead, n, 1, 1), strict.dtype)  # [..., blocks, size, size]
    size = 1
    while size < n:
        blocks = n // (2 * size)
        merged = jnp.einsum("...aiaj->...aij", strict.reshape(*lead, blocks, 2 * size, blocks, 2 * size))
        t11, t22 = inverse[..., 0::2, :, :], inverse[..., 1::2, :, :]
        t21 = -t22 @ merged[..., size:, :size] @ t11
        inverse = jnp.concatenate([jnp.concatenate([t11, jnp.zeros_like(t11)], axis=-1),
                                   jnp.concatenate([t21, t22], axis=-1)], axis=-2)
        size *= 2
    return inverse[..., 0, :, :]


def _initial(state: jax.Array | None, b: int, h: int, dk: int, dv: int) -> jax.Array:
    return jnp.zeros((b, h, dk, dv), jnp.float32) if state is None else state.astype(jnp.float32)
