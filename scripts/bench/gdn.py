"""Gated DeltaNet tokens/s on CPU: the chunked form (parallel within 64-token chunks, recurrent across them;
its defaults, as the model runs it) beside the naive per-token scan of the same rule, at several lengths in
the same run, interleaved. Shapes are one device's share of a Qwen3.5 layer: key and value head dims 128.

    python scripts/bench/gdn.py [--seqs 512 2048 8192] [--heads 4] [--rounds 5]

Wall-clock tokens/s and, beside them, this process's CPU seconds per call: on a machine shared with other
jobs the CPU-time ratios are the steadier ones. Targets: the chunked form's time grows linearly with length
(tokens/s flat) and it beats the scan from 2048 tokens on.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from bench_common import median_seconds

from tbjax.models.delta_rule import chunked_gated_delta, gated_delta_scan

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


def timed(step: Callable[[], object], cpu: list[float]) -> Callable[[], object]:
    """`step`, recording the CPU seconds of each call (XLA's threads included) in `cpu`."""

    def run() -> object:
        start = time.process_time()
        result = step()
        cpu.append(time.process_time() - start)
        return result

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqs", type=int, nargs="+", default=[512, 2048, 8192])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    chunked = jax.jit(lambda *a: chunked_gated_delta(*a, chunk_size=CHUNK))
    scan = jax.jit(gated_delta_scan)
    print(f"Gated DeltaNet forward, batch 1 x {args.heads} heads x key/value dim {HEAD_DIM}, chunk {CHUNK}, "
          f"{os.cpu_count()} cores, jax {jax.__version__}")
    rates: dict[int, dict[str, float]] = {}
    cpu_rates: dict[int, dict[str, float]] = {}
    for seq in args.seqs:
        inputs = rule_inputs(seq, args.heads)
        error = float(jnp.abs(chunked(*inputs)[0] - scan(*inputs)[0]).max())
        cpu: dict[str, list[float]] = {"chunked": [], "scan": []}
        seconds = median_seconds({
            "chunked": timed(lambda inputs=inputs: jax.block_until_ready(chunked(*inputs)), cpu["chunked"]),
            "scan": timed(lambda inputs=inputs: jax.block_until_ready(scan(*inputs)), cpu["scan"]),
        }, args.rounds)
        rates[seq] = {name: seq / s for name, s in seconds.items()}
        cpu_rates[seq] = {name: seq / float(np.median(c[2:])) for name, c in cpu.items()}  # after 2 warm-ups
        print(f"seq {seq:6d}: chunked {rates[seq]['chunked']:8.0f} tokens/s, per-token scan "
              f"{rates[seq]['scan']:7.0f} tokens/s: {rates[seq]['chunked'] / rates[seq]['scan']:5.2f}x wall, "
              f"{cpu_rates[seq]['chunked'] / cpu_rates[seq]['scan']:5.2f}x CPU time (max |diff| {error:.1e})")
    first = args.seqs[0]
    for seq in args.seqs[1:]:
        growth = {name: cpu_rates[first][name] / cpu_rates[seq][name] * seq / first for name in ("chunked", "scan")}
        wall = rates[first]["chunked"] / rates[seq]["chunked"] * seq / first
        print(f"chunked time for x{seq // first} tokens ({seq} vs {first}): x{wall:.1f} wall, "
              f"x{growth['chunked']:.1f} CPU (linear = x{seq // first}; the per-token scan, linear by "
              f"construction: x{growth['scan']:.1f} CPU)")
    print("targets: chunked faster than the scan from 2048 tokens on; its time linear in length")


if __name__ == "__main__":
    main()
