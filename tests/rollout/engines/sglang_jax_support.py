"""Real sglang-jax servers for the SGLangEngine tests: our tiny model exported for them, the launch flags that
fit a 2-core CPU machine, and a recording wrapper that shows which server answered what.

Greedy decodes are compared token for token. Log-probs agree to LOGPROB_ATOL = 1e-4: both sides compute the
same float32 log-softmax of the same logits and differ only by the order of float32 sums in two independent
attention and matmul implementations (measured: < 1e-6); 1e-4 is also the bound the trainer holds the
engine's behaviour log-probs to (e2e_support.check_trajectory). For the same reason two greedy decodes may
rank a near-tie differently (a random tiny model's top two logits are sometimes ~1e-5 apart); only there may
they part.

The flags are the issue's measured set plus three that avoid bugs of sglang-jax 0.1.0rc0 on CPU that these
tests found. `--disable-overlap-schedule`: with the overlap scheduler, every request but the first of a batch
prefilled together decodes wrong tokens (log-probs off by up to 0.5, and the KV cache that later turns reuse
is wrong too); without it, concurrent and one-at-a-time requests agree exactly. `--skip-tokenizer-init`: the
detokenizer sometimes repeats 50 output ids of a long non-streamed generation (seen with 4 concurrent
300-token requests); without a tokenizer the server answers token ids only, which is all the engine reads.
`--skip-server-warmup`: sglang-jax answers GET /health before its own warm-up /generate (no log-probs) has
run, and a decode batch that mixes that request with ours (log-probs of the output only) kills the scheduler
(UnboundLocalError on next_token_logprobs; seen once in a full suite run, with both servers dead).
Precompiling only small batch and token buckets keeps the start at ~15-30 s (the defaults precompile huge
buckets and run out of memory). The KV pool stays small: the native attention backend's decode step costs in
proportion to the whole pool (measured: 6.5 ms a token with 1024 tokens, ~75 ms with 8192).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from rollout.engines.protocol import Engine, Generation, SamplingParams
from rollout.launch_sglang import LaunchConfig, Supervisor, start_supervised
from tbjax import export
from tbjax.models import Qwen

LOGPROB_ATOL = 1e-4
NEAR_TIE = 1e-4  # logits: float32 noise between implementations is ~1e-6

SERVER_FLAGS = (
    "--device", "cpu", "--attention-backend", "native", "--max-total-tokens", "1024",
    "--max-running-requests", "4", "--chunked-prefill-size", "256", "--max-prefill-tokens", "256",
    "--precompile-token-paddings", "64", "256", "--precompile-bs-paddings", "1", "4", "--skip-tokenizer-init",
    "--disable-overlap-schedule", "--skip-server-warmup",
)
# One CPU device (the test session forces 24 for its meshes), and no hub: the model is a local directory.
SERVER_ENV = (("JAX_PLATFORMS", "cpu"), ("HF_HUB_OFFLINE", "1"), ("XLA_FLAGS", ""))


def export_for_sglang_jax(src: Path, out: Path) -> Path:
    """`python -m tbjax.export SRC OUT --config-style transformers4`: tbjax's HF export, config.json spelt
    for transformers 4 (which sglang-jax pins)."""
    if export.main([str(src), str(out), "--config-style", "transformers4"]) != 0:
        raise RuntimeError(f"tbjax.export could not export {src}")
    return out


def consecutive_free_ports(count: int) -> int:
    """A port P such that P .. P+count-1 are free now (the launcher puts server i on P + i)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def launch(python: Path, model_dir: Path, servers: int) -> Supervisor:
    """`servers` sglang-jax servers on 127.0.0.1 under our launcher; returns once all answer /health."""
    return start_supervised(LaunchConfig(
        model_path=str(model_dir), tp=1, servers=servers, port=consecutive_free_ports(servers),
        server_command=(str(python), "-m", "sgl_jax.launch_server"), extra_args=SERVER_FLAGS, env=SERVER_ENV,
        startup_timeout_s=300, max_restarts=1, restart_backoff_s=1.0, poll_s=0.25))


class Recording:
    """Generates through `engine` (for the episode loop, which only generates) and records every
    (session id, Generation) it returned."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.calls: list[tuple[str | None, Generation]] = []

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        generation = await self.engine.generate(input_ids, sampling, session_id=session_id)
        self.calls.append((session_id, generation))
        return generation

    async def end_session(self, session_id: str) -> None:
        await self.engine.end_session(session_id)


def assert_greedy_agree(model: Qwen, ids_a: Sequence[int], ids_b: Sequence[int], logprobs_a: Sequence[float],
                        logprobs_b: Sequence[float]) -> bool:
    """Two greedy decodes of `model` (whole sequences, log-probs aligned with the ids) agree: equal tokens and
    log-probs within LOGPROB_ATOL, except that they may part where the top logits are within NEAR_TIE, as two
    float32 implementations can rank a near-tie either way. Returns whether they agree to the end."""
    n = next((i for i, (a, b) in enumerate(zip(ids_a, ids_b, strict=False)) if a != b), min(len(ids_a), len(ids_b)))
    np.testing.assert_allclose(logprobs_a[:n], logprobs_b[:n], atol=LOGPROB_ATOL)
    if len(ids_a) == len(ids_b) == n:
        return True
    assert n < min(len(ids_a), len(ids_b)), f"one decode ended at token {n} while the other went on"
    logits = np.asarray(model(jnp.asarray([ids_a[:n]], jnp.int32))[0, -1])
    behind = logits.max() - logits[[ids_a[n], ids_b[n]]]
    assert behind.max() < NEAR_TIE, (f"greedy decodes part at token {n}: {ids_a[n]} vs {ids_b[n]}, whose logits "
                                     f"are {behind} below the top one")
    print(f"greedy decodes part at a near-tie at token {n} (logits {behind} below the top)")
    return False
