"""Requests in flight and the slot table: which cache row each sequence lives in, and which idle row's
cached tokens a new request can reuse (prefix caching for multi-turn episodes, whose every turn repeats
the conversation so far)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rollout.engines.protocol import FinishReason, Generation, SamplingParams

log = logging.getLogger(__name__)
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
    queued_at: float = dataclasses.field(default_factory=time.monotonic)

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

    @property
    def running(self) -> Request:
        """The request this busy slot runs (an idle slot runs none: asking it is a bug in the caller)."""
        if self.request is None:
            raise RuntimeError(f"slot {self.index} is idle: it runs no request")
        return self.request


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class SlotTable:
    """Which cache row each request runs in. Shared (the default), an idle row goes to whichever request
    reuses most of its cached tokens. Owned by sessions (`by_session`, the engine's deterministic mode), a
    session keeps one row from its first request until `end_session`, and its later turns reuse that row's
    tokens and no other's: what a request reuses then depends on its own session's history alone, never on
    what else ran, so reuse keeps runs bitwise reproducible."""

    def __init__(self, slots: int, whole_prefix_only: bool = False, by_session: bool = False):
        self.slots = [Slot(i) for i in range(slots)]
        self.whole_prefix_only = whole_prefix_only
        self.by_session = by_session
        self._owners: dict[str, Slot] = {}
        self._clock = itertools.count(1)

    def active(self) -> list[Slot]:
        return [s for s in self.slots if s.busy]

    def running(self) -> list[Request]:
        """The requests the busy slots run."""
        return [s.request for s in self.slots if s.request is not None]

    def assign(self, request: Request) -> tuple[Slot, int] | None:
        """An idle slot for `request` and how many of its prompt tokens that slot already caches (the
        longest shared prefix wins, then the least recently used). None when no slot can take it now."""
        if self.by_session:
            return self._assign_owned(request)
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        best = max(idle, key=lambda s: (self._reusable(s, request), -s.last_used))
        return best, self._take(best, request, self._reusable(best, request))

    def _assign_owned(self, request: Request) -> tuple[Slot, int] | None:
        """The request's session's own slot (None while it is busy), else a slot no session owns, reusing
        nothing (None when every slot is owned or busy)."""
        own = self._owners.get(request.session_id) if request.session_id is not None else None
        if own is not None:
            return None if own.busy else (own, self._take(own, request, self._reusable(own, request)))
        owned = {slot.index for slot in self._owners.values()}
        free = [s for s in self.slots if not s.busy and s.index not in owned]
        if not free:
            return None
        slot = min(free, key=lambda s: s.last_used)
        if request.session_id is not None:
            self._owners[request.session_id] = slot
        return slot, self._take(slot, request, 0)

    def _take(self, slot: Slot, request: Request, reused: int) -> int:
        slot.request, slot.last_used = request, next(self._clock)
        slot.tokens = slot.tokens[:reused]
        return reused

    def end_session(self, session_id: str) -> None:
        """The session's slot goes back to the pool (owned slots only; shared ones were never held)."""
        self._owners.pop(session_id, None)

    def admit(self, pending: deque[Request], hold_s: float) -> list[tuple[Slot, int]]:
        """Takes out of `pending` every request a slot can take now, in arrival order; one waiting for its
        session's slot, or for a slot no session owns, does not hold back those behind it. When nothing runs
        and the oldest has waited `hold_s` seconds for slots that idle sessions hold (their clients never
        ended them), the least recently used session loses its slot and starts over should it return."""
        admitted = []
        for request in list(pending):
            if request.future.done():
                pending.remove(request)  # its caller gave up (a timed-out episode): nobody waits for it
                continue
            assignment = self.assign(request)
            if assignment is not None:
                pending.remove(request)
                admitted.append(assignment)
        if not admitted and pending and not self.active() and \
                time.monotonic() - pending[0].queued_at >= hold_s and self._evict_idle_owner():
            return self.admit(pending, hold_s)
        return admitted

    def _evict_idle_owner(self) -> bool:
        idle = [(slot.last_used, session) for session, slot in self._owners.items() if not slot.busy]
        if not idle:
            return False
        session = min(idle)[1]
        del self._owners[session]
        log.warning("%d sessions hold all %d slots and none was ended: session %s loses its cached prefix, so "
                    "its reuse now depends on scheduling (end each session with end_session)",
                    len(self._owners) + 1, len(self.slots), session)
        return True

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
