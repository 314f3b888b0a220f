"""The hand-over of the GPUs between the trainer and the rollout servers that share them.

In the reference run (rollout.placement=colocated) the SGLang servers and the trainer live on the same 24
GPUs, and neither fits beside the other at its peak: the servers' KV cache fills what the weights leave
free, and the update needs its parameters, AdamW moments, gradients and activations. So each step hands the
devices over twice, as one explicit state machine:

    STARTING -> ROLLOUT -> HANDOVER_TO_TRAINER -> TRAINING -> HANDOVER_TO_ENGINES -> ROLLOUT -> ...

- start (STARTING -> ROLLOUT): the trainer's state leaves for pinned host memory.
- to the trainer: every server releases all its memory (/release_memory_occupation), then the trainer's
  parameters come back to the device with their shardings. The optimizer state stays in host memory: the
  update brings it over only for its last program, AdamW's apply, so that the moments (twice the float32
  parameters) never share the devices with the backward pass's gradients and activations.
- to the engines: the servers resume their weights memory, the new weights are published and the servers
  load them, the trainer's state leaves for host memory (its device buffers deleted), and only then do the
  servers resume their KV cache. The publish runs while the trainer's state is still on the device,
  because writing the HF directory computes slices of it, and XLA runs computations on host-memory arrays
  on the CPU; the price is that trainer state and server weights share the devices for that moment (the
  KV cache, the big one, never does).

Disaggregated mode (servers on GPUs of their own) walks the same phases without touching memory, so the
loop has one code path. A transition out of order raises `IllegalTransition`; a hand-over that fails midway
stays in its hand-over phase, so every later transition refuses too (where the memory is, is then unknown).
With several processes every process moves its own shards, only the driver's backend talks to the servers, and
barriers keep any process from loading its state onto GPUs that servers still hold.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tbjax.parallel import distributed
from tbjax.parallel.offload import HostOffload
from tbjax.trainer.backends.protocol import MemoryPart
from tbjax.trainer.train_state import TrainState

log = logging.getLogger(__name__)


class Phase(enum.Enum):
    STARTING = "starting"
    ROLLOUT = "rollout"
    HANDOVER_TO_TRAINER = "handover_to_trainer"
    TRAINING = "training"
    HANDOVER_TO_ENGINES = "handover_to_engines"


NEXT = {
    Phase.STARTING: Phase.ROLLOUT,
    Phase.ROLLOUT: Phase.HANDOVER_TO_TRAINER,
    Phase.HANDOVER_TO_TRAINER: Phase.TRAINING,
    Phase.TRAINING: Phase.HANDOVER_TO_ENGINES,
    Phase.HANDOVER_TO_ENGINES: Phase.ROLLOUT,
}


class IllegalTransition(RuntimeError):
    """A hand-over called out of order: a bug in the caller, or a hand-over that failed earlier."""


class MemoryEngine(Protocol):
    """What the hand-over needs from the rollout backend (tbjax.trainer.backends.protocol.RolloutBackend)."""

    async def release_memory(self) -> None: ...

    async def resume_memory(self, part: MemoryPart) -> None: ...


class HoldsState(Protocol):
    """The trainer's side: its TrainState, replaced as it moves."""

    state: TrainState


@dataclasses.dataclass(frozen=True)
class Transition:
    source: Phase
    target: Phase
    seconds: float  # time spent in `source`


class Handover:
    """The phase of the step and the moves between phases. `backend`: the run's rollout backend (a process
    without its engine asks nothing of the servers); `offload` is None in disaggregated mode."""

    def __init__(self, backend: MemoryEngine | None = None, offload: HostOffload | None = None,
                 barrier: Callable[[str], None] = distributed.barrier) -> None:
        self.backend, self.offload, self.barrier = backend, offload, barrier
        self.phase = Phase.STARTING
        self.transitions: list[Transition] = []
        self._entered = time.perf_counter()

    @classmethod
    def for_placement(cls, placement: str, backend: MemoryEngine) -> Handover:
        return cls(backend, HostOffload()) if placement == "colocated" else cls()

    @property
    def colocated(self) -> bool:
        return self.offload is not None

    def start(self, trainer: HoldsState) -> None:
        """STARTING -> ROLLOUT: the servers are up and serving; the trainer's state leaves the device."""
        self._check(Phase.ROLLOUT)
        if self.offload is not None:
            trainer.state = self.offload.to_host(trainer.state)
        self._enter(Phase.ROLLOUT)

    async def to_trainer(self, trainer: HoldsState) -> None:
        """ROLLOUT -> TRAINING: servers release everything, the trainer's parameters return to the device."""
        self._enter(Phase.HANDOVER_TO_TRAINER)
        if self.offload is not None:
            if self.backend is not None:
                await self.backend.release_memory()
            self.barrier("rollout servers released their memory")
            state = trainer.state
            trainer.state = dataclasses.replace(state, params=self.offload.to_device(state.params),
                                                step=self.offload.to_device(state.step))
        self._enter(Phase.TRAINING)

    async def to_engines(self, trainer: HoldsState, publish: Callable[[], Awaitable[Any]]) -> None:
        """TRAINING -> ROLLOUT: weights memory back, `publish()` (publish and load the new weights), the
        trainer's state off the device, then the servers' KV cache back."""
        self._enter(Phase.HANDOVER_TO_ENGINES)
        if self.offload is not None and self.backend is not None:
            await self.backend.resume_memory("weights")
        await publish()
        if self.offload is not None:
            trainer.state = self.offload.to_host(trainer.state)
            self.barrier("trainer state left the devices")
            if self.backend is not None:
                await self.backend.resume_memory("cache")
        self._enter(Phase.ROLLOUT)

    def _check(self, target: Phase) -> None:
        if NEXT[self.phase] is not target:
            stuck = " (a hand-over that failed midway stays in its phase)" if self.phase.name.startswith(
                "HANDOVER") else ""
            raise IllegalTransition(f"hand-over {self.phase.name} -> {target.name} is not allowed: from "
                                    f"{self.phase.name} the next phase is {NEXT[self.phase].name}{stuck}")

    def _enter(self, target: Phase) -> None:
        self._check(target)
        now = time.perf_counter()
        self.transitions.append(Transition(self.phase, target, now - self._entered))
        log.log(logging.INFO if self.colocated else logging.DEBUG, "hand-over: %s -> %s (%.2f s in %s)",
                self.phase.name, target.name, now - self._entered, self.phase.name)
        self.phase, self._entered = target, now
