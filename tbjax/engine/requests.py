"""Requests in flight and the slot table: which cache row each sequence lives in, and which idle row's
cached tokens a new request can reuse (prefix caching for multi-turn episodes, whose every turn repeats
the conversation so far)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from rollout.engine import FinishReason, Generation, SamplingParams

_ids = itertools.count()


@dataclasses.dataclass
class Request:
    input_ids: list[int]
    sampling: SamplingParams
    future: asyncio.Future[Generation]
    loop: asyncio.AbstractEventLoop
    session_id: str | None = None
    number: int = dataclasses.field(default_factory=lambda: next(_ids))
    output_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    cached_tokens: int = 0
    weight_version: str = ""

    def finish(self, reason: FinishReason) -> None:
        generation = Generation(tuple(self.output_ids), tuple(self.logprobs), reason, self.weight_version,
                                len(self.input_ids), self.cached_tokens)
        self._deliver(_resolve, generation)

    def fail(self, error: BaseException) -> None:
        self._deliver(_reject, error)

    def _deliver(self, settle: Callable[[asyncio.Future, Any], None], outcome: Any) -> None:
        """Settles the future on its caller's loop. A caller whose loop has closed meanwhile (an in-process
        `asyncio.run` that ended) is gone and nobody is left to tell; the worker must not die of it."""
        try:
            self.loop.call_soon_threadsafe(settle, self.future, outcome)
        except RuntimeError:
            if not self.loop.is_closed():
                raise


def _resolve(future: asyncio.Future, value: Generation) -> None:
    if not future.done():
        future.set_result(value)


def _reject(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


@dataclasses.dataclass
class Slot:
    index: int
    tokens: list[int] = dataclasses.field(default_factory=list)  # what the cache row holds, in order
    request: Request | None = None
    last_used: int = 0

    @property
    def busy(self) -> bool:
        return self.request is not None


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class SlotTable:
    def __init__(self, slots: int, whole_prefix_only: bool = False):
        self.slots = [Slot(i) for i in range(slots)]
        self.whole_prefix_only = whole_prefix_only
        self._clock = itertools.count(1)

    def active(self) -> list[Slot]:
        return [s for s in self.slots if s.busy]

    def assign(self, request: Request) -> tuple[Slot, int] | None:
        """An idle slot for `request` and how many of its prompt tokens that slot already caches (the
        longest shared prefix wins, then the least recently used). None when every slot is busy."""
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        best = max(idle, key=lambda s: (self._reusable(s, request), -s.last_used))
        reused = self._reusable(best, request)
        best.request, best.last_used = request, next(self._clock)
        best.tokens = best.tokens[:reused]
        return best, reused

    def _reusable(self, slot: Slot, request: Request) -> int:
        """Cached tokens of `slot` that `request` can start from (at least its last prompt token is computed
        anew, for its logits); with `whole_prefix_only`, all of the slot's tokens or none."""
        shared = min(common_prefix(slot.tokens, request.input_ids), len(request.input_ids) - 1)
        if self.whole_prefix_only and shared < len(slot.tokens):
            return 0
        return shared

    def release(self, slot: Slot) -> None:
        slot.request = None

    def forget_all(self) -> None:
        """Drop every idle row's cached tokens (after a weight change their keys/values are stale)."""
        for slot in self.slots:
            if not slot.busy:
                slot.tokens = []
