"""Gated DeltaNet tokens/s on CPU: the chunked form (parallel within 64-token chunks, recurrent across them)
beside the naive per-token scan of the same rule, at several lengths in the same run, interleaved. Shapes
are one device's share of a Qwen3.5 layer: key and value head dims 128.

    python scripts/bench/gdn.py [--seqs 512 2048 8192] [--heads 4] [--rounds 3]

Targets: the chunked form's time grows linearly with length (tokens/s flat) and it beats the scan from
2048 tokens on.
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np
from bench_common import median_seconds

from tbjax.models.gated_delta import chunked_gated_delta, gated_delta_scan

HEAD_DIM = 128
CHUNK = 64


def rule_inputs(seq: int, heads: int) -> tuple[jax.Array, ...]:
    """What a layer feeds the rule: unit keys, unit queries scaled by dk^-1/2, log decays in Qwen3.5's range."""
    rng = np.random.default_rng(seq)
    q, k = rng.normal(size=(2, 1, seq, heads, HEAD_DIM)).astype(np.float32)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) * HEAD_DIM**-0.5
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=(1, seq, heads, HEAD_DIM)).astype(np.float32)
    g = -np.log1p(np.exp(rng.normal(size=(1, seq, heads)))).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.normal(size=(1, seq, heads))))).astype(np.float32)
    docs = np.zeros((1, seq), np.int32)
    return tuple(jnp.asarray(x) for x in (q, k, v, g, beta, docs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqs", type=int, nargs="+", default=[512, 2048, 8192])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    chunked = jax.jit(lambda *a: chunked_gated_delta(*a, chunk_size=CHUNK))
    scan = jax.jit(gated_delta_scan)
    print(f"Gated DeltaNet forward, batch 1 x {args.heads} heads x key/value dim {HEAD_DIM}, chunk {CHUNK}, "
          f"{os.cpu_count()} cores, jax {jax.__version__}")
    rates: dict[int, dict[str, float]] = {}
    for seq in args.seqs:
        inputs = rule_inputs(seq, args.heads)
        out_chunked, out_scan = chunked(*inputs)[0], scan(*inputs)[0]
        error = float(jnp.abs(out_chunked - out_scan).max())
        seconds = median_seconds({
            "chunked": lambda inputs=inputs: jax.block_until_ready(chunked(*inputs)),
            "scan": lambda inputs=inputs: jax.block_until_ready(scan(*inputs)),
        }, args.rounds)
        rates[seq] = {name: seq / s for name, s in seconds.items()}
        print(f"seq {seq:6d}: chunked {rates[seq]['chunked']:10.0f} tokens/s, per-token scan "
              f"{rates[seq]['scan']:9.0f} tokens/s, chunked / scan = {seconds['scan'] / seconds['chunked']:5.2f}x "
              f"(max |diff| {error:.1e})")
    first = args.seqs[0]
    for seq in args.seqs[1:]:
        growth = rates[first]["chunked"] / rates[seq]["chunked"] * seq / first
        print(f"chunked time x{growth:.1f} for x{seq // first} tokens ({seq} vs {first}; linear = x{seq // first})")
    print("targets: chunked faster than the scan from 2048 tokens on; its time linear in length")


if __name__ == "__main__":
    main()
