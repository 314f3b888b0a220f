"""The rollout-backend contract: what the training loop needs from whatever serves its episodes.

Two verbs carry weights to an engine: **publish** (the trainer's new parameters become the version the engine
serves: a copy handed over in memory, or files the servers load) and **verify** (the weight probe scores them on
the engine, tbjax.trainer.weight_probe). Publishing has a collective half, which every process runs (gathers
and host replicas span them), and a driver half that makes the engine serve the version; exact asynchronous mode
runs the second half later, so `publish` returns it instead of running it.

A backend is one module `tbjax.trainer.backends.<engine>_backend` with a `build` function (see `BackendBuilder`),
chosen once by `rollout.engine` (tbjax.trainer.backends.build_backend); its traits that the config's checks need
before anything heavy is imported are tbjax.sections.rollout.ENGINES. Nothing else in the trainer knows which
backend runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, Protocol

from rollout.engines.protocol import Engine, Scorer
from tbjax.config import Config
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

Serve = Callable[[], Awaitable[None]]  # the driver's half of a publish: the engine serves the version after it
MemoryPart = Literal["weights", "cache"]  # what a colocated engine takes back: its weights, or its KV cache


class ServedEngine(Engine, Scorer, Protocol):
    """An engine whose replicas also score a given sequence (the weight probe's side of the engine)."""


class RolloutBackend(Protocol):
    """What the loop holds for its rollouts. `engine` is the driver's client (what episodes sample from and the
    weight probe scores); None on the other processes."""

    engine: ServedEngine | None
    # True where the engine loads its weights itself at start (the base checkpoint): a resumed run publishes its
    # restored step before the first episode
    starts_from_base: bool

    def publish(self, trainer: GRPOTrainer, params: Params, version: str) -> Serve:
        """Puts `params` where the engine takes them from, as weight version `version`. Every process calls
        it; the returned call makes the engine serve them (a no-op on the processes without the engine)."""
        ...

    async def release_memory(self) -> None:
        """Colocated: the engine gives up all its device memory for the update."""
        ...

    async def resume_memory(self, part: MemoryPart) -> None:
        """Colocated: the engine takes `part` of its memory back (the weights before a publish, the cache after
        the trainer left the devices)."""
        ...

    async def close(self) -> None: ...


class BackendBuilder(Protocol):
    def __call__(self, config: Config, trainer: GRPOTrainer, params: Params, step: int,
                 model_dir: Path) -> RolloutBackend:
        """The backend of a run starting (or resuming) at `step` with `params`; every process calls it."""
        ...


async def nothing() -> None:
    """The driver half of a publish on a process without the engine."""
