"""The SGLang client's settings and the names it shares with servers and callers: the memory regions SGLang
releases and resumes, the callable that restarts servers where weights cannot be loaded in place, the client's
timeouts, retries and publish behaviour (`SGLangConfig`), and the LoRA adapter requests name (`ServedAdapter`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from rollout.engines.protocol import EngineError

# SGLang's memory regions (`tags` of /release_memory_occupation and /resume_memory_occupation, servers run
# with --enable-memory-saver). Colocated training resumes the weights first, loads new ones into them, and
# gives the cache back only once the trainer has left the device.
WEIGHTS, KV_CACHE, CUDA_GRAPH = "weights", "kv_cache", "cuda_graph"
MEMORY_TAGS = (WEIGHTS, KV_CACHE, CUDA_GRAPH)
# Restarts every server of the engine's URL list on the HF directory given; returns once all are healthy.
ServerRestarter = Callable[[str], None]


class MissingEndpointError(EngineError):
    """The server has no such endpoint (HTTP 404): a server that cannot do it, not a failure to retry."""


@dataclasses.dataclass(frozen=True)
class SGLangConfig:
    """Client settings. Timeouts are generous because one turn may decode 8192 tokens under load."""

    urls: tuple[str, ...]
    request_timeout_s: float = 900.0
    connect_timeout_s: float = 5.0
    admin_timeout_s: float = 900.0  # loading a 27B checkpoint from disk
    health_timeout_s: float = 5.0
    max_attempts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0
    cooldown_s: float = 15.0  # how long a failing server is left out of rotation
    weight_version: str = "default"  # what servers report before the first publish (SGLang's default)
    max_connections: int = 1024
    # the policy's vocabulary: an output id at or past it is a protocol error (None: ids are checked >= 0 only)
    vocab_size: int | None = None
    # how a publish pauses the servers: "abort" (SGLang's default: running requests end, and this client retries
    # them after the publish) or "retract" (running requests wait with their partial turns and continue on the
    # new weights: what asynchronous GRPO needs, whose episodes run through every publish)
    pause_mode: Literal["abort", "retract"] = "abort"
    flush_cache: bool = True  # a publish drops the prefix cache the old weights computed (False: kept)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")


@dataclasses.dataclass(frozen=True)
class ServedAdapter:
    """The LoRA adapter every request names: its name on the servers and the policy version it is."""

    name: str
    version: str
