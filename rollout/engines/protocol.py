"""The engine contract: tokens in, sampled tokens and their behaviour log-probs out.

Implementations: `rollout.engines.sglang.SGLangEngine` (SGLang's native HTTP API, several servers) and
`tbjax.engine.JaxEngine` (in-process, continuous batching), which `python -m tbjax.serve` also serves over
the same HTTP API. The episode loop sees only this protocol.

Log-prob semantics follow SGLang and the trainer alike: log softmax of logits / temperature at the sampled
token, before top-k/top-p/min-p truncation (so the trainer can recompute the same number from the same
tokens). Greedy decoding (temperature 0) reports the untempered log softmax.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Sequence
from typing import Literal, Protocol

FinishReason = Literal["stop", "length", "abort"]


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """Every value is sent explicitly: servers must never fill in their generation_config defaults."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1: off
    min_p: float = 0.0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.top_k == 0 or not 0 <= self.min_p < 1:
            raise ValueError(f"invalid sampling parameters {self}")


@dataclasses.dataclass(frozen=True)
class Generation:
    """One completion. `output_ids` include a matched stop token (the policy sampled it and must be
    trained on it); `logprobs[i]` belongs to `output_ids[i]`."""

    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    weight_version: str
    prompt_tokens: int
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        if len(self.output_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.logprobs)} logprobs")


@dataclasses.dataclass(frozen=True)
class TokenScores:
    """Teacher-forced log-probs of a given token sequence from one replica (`source`: a server's URL, or
    "embedded"): `logprobs[i]` = log softmax at temperature 1 of token i + 1 given tokens 0..i, under the
    weights the replica served (`weight_version`). What the weight probe compares with the trainer's."""

    logprobs: tuple[float, ...]
    weight_version: str
    source: str


class EngineError(RuntimeError):
    """Infrastructure failure of an engine (dead server, timeout, protocol violation): a system error of
    the episode, retried or refilled, never scored as the agent's failure."""

    kind = "engine"


@dataclasses.dataclass
class Retries:
    """What an engine call spent on failed attempts before it answered (or while it still retries): an
    engine that retries (SGLangEngine) counts them in the caller's `RETRIES` record, so the episode loop
    leaves that time off the agent's clock and, when its deadline comes while they go on, voids the episode
    instead of scoring it."""

    failed_attempts: int = 0
    seconds: float = 0.0  # in failed attempts and the backoff after them

    @staticmethod
    def record(seconds: float, failed_attempts: int = 1) -> None:
        """Time the current call lost: a failed attempt (as soon as it failed), or the backoff after one."""
        retries = RETRIES.get()
        if retries is not None:
            retries.failed_attempts += failed_attempts
            retries.seconds += seconds


# set by the caller around one engine call (a context variable: it follows the call through wrappers)
RETRIES: contextvars.ContextVar[Retries | None] = contextvars.ContextVar("engine_retries", default=None)


class Engine(Protocol):
    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        """`session_id` keeps an episode's turns on one server (prefix cache reuse)."""
        ...

    async def end_session(self, session_id: str) -> None:
        """The episode is over: what the engine kept for its session (a server's affinity, a slot) is free."""
        ...

    async def update_weights(self, hf_dir: str, version: str) -> None:
        """Load an HF safetensors directory of the served architecture; later generations report `version`."""
        ...

    async def health(self) -> bool: ...

    async def close(self) -> None: ...


class Scorer(Protocol):
    async def score(self, input_ids: Sequence[int]) -> list[TokenScores]:
        """Teacher-forced log-probs of `input_ids[1:]` from every replica (each loaded its weights on its
        own); `input_ids` holds at least two tokens."""
        ...
