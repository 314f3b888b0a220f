"""Continuous batching: the worker thread that owns the device and gathers requests into decode batches.

Between decode steps the worker admits waiting requests into free cache slots (`SlotTable.admit`), prefilling
only the part of each prompt the slot does not already cache, then advances every active slot by up to
`decode_steps` tokens in one compiled call (`device_step.decode`). A slot's `tokens` are those its cache
holds: a step caches what it was fed, and the token it samples is fed by the next step. Callers wait on
futures the worker resolves; `JaxEngine` (jax_engine.py) is the public API built on this class.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np
from flax import nnx

from rollout.engines.protocol import EngineError
from tbjax.engine.device_step import bucket, decode, step
from tbjax.engine.request_checks import MAX_STOP_TOKENS
from tbjax.engine.requests import Request, Slot, SlotTable
from tbjax.engine.sampling import RowSampling
from tbjax.models import Qwen
from tbjax.models.decoding import KVCache

log = logging.getLogger(__name__)
MIN_KV_BUCKET = 64


class ContinuousBatching:
    """The worker's side of the engine: the waiting requests, the slot table and KV cache they run in, and
    the thread that prefills and decodes them. Every field the worker and the callers share is read and
    written under `_cond`."""

    def __init__(self, model: Qwen, *, slots: int, max_len: int, weight_version: str, seed: int,
                 prefill_chunk: int, deterministic: bool, decode_steps: int, session_hold_s: float):
        self.config = model.config
        self.graphdef, self.state = nnx.split(model)
        self.max_len = max_len
        self.prefill_chunk = prefill_chunk  # long prompts run in chunks: attention memory ~ chunk x length
        # deterministic: a request's tokens depend only on the request (seeded) and its session's earlier
        # turns, never on what else runs: a session reuses only its own slot's cache (the slot table's
        # session ownership; `end_session` frees it) and decode attends over the whole cache (the reduction's
        # shape never changes). For bitwise-reproducible training runs.
        self.deterministic = deterministic
        # deterministic mode: how long requests wait for a slot that idle sessions hold before the least
        # recently used loses it (only a client that never ends its sessions gets there; SlotTable.admit)
        self.session_hold_s = session_hold_s
        # tokens sampled per decode call (see device_step.decode); 1 admits waiting requests between tokens
        if decode_steps < 1:
            raise ValueError(f"decode_steps must be >= 1, got {decode_steps}")
        self.decode_steps = decode_steps
        self.weight_version = weight_version
        self.cache: KVCache | None = KVCache.zeros(self.config, slots, max_len)
        # a hybrid model's recurrent state sits at the end of the slot's sequence and cannot be rewound:
        # a new request reuses a slot's cache only when it extends the whole cached sequence
        self.table = SlotTable(slots, whole_prefix_only=bool(self.config.linear_layers), by_session=deterministic)
        self._pending: deque[Request] = deque()
        self._cond = threading.Condition()
        self._paused = False
        self._released: set[str] = set()  # SGLang memory tags whose device memory is given up
        self._draining = 0  # holders (weight swap or load, memory release) waiting for in-flight work to finish
        self._holding = False  # one of them holds the engine idle without the lock (a weight load)
        self._reading = 0  # scores in flight outside the worker: a weight load must not donate their parameters
        self._stopping = False
        self._failure: BaseException | None = None
        self._seed_base = seed
        self._worker = threading.Thread(target=self._run, name="jax-engine", daemon=True)
        self._worker.start()

    def _with_engine_idle(self, action: Callable[[], None]) -> None:
        """Runs `action` with no generation or score in flight, holding new admissions back meanwhile."""
        with self._cond:
            self._draining += 1
            try:
                self._wait_until_idle()
                action()
            finally:
                self._draining -= 1
                self._cond.notify_all()

    def _with_engine_held(self, action: Callable[[], None]) -> None:
        """Runs `action` as `_with_engine_idle` does, but without the lock, which callers need meanwhile to queue
        requests: for actions that take seconds (a weight load). No other idle action runs meanwhile."""
        with self._cond:
            self._draining += 1
            try:
                self._wait_until_idle()
            except BaseException:
                self._draining -= 1
                self._cond.notify_all()
                raise
            self._holding = True
        try:
            action()
        finally:
            with self._cond:
                self._holding = False
                self._draining -= 1
                self._cond.notify_all()

    def _wait_until_idle(self) -> None:
        """Waits (holding the lock) until no generation or score runs and no idle action holds the engine."""
        while (self.table.active() or self._reading or self._holding) and self._failure is None:
            self._cond.wait()
        self._raise_if_failed()

    @contextlib.contextmanager
    def _reading_parameters(self) -> Iterator[tuple[nnx.State, str]]:
        """The served parameters and their version, for work outside the worker (a score): it waits while an idle
        action holds the engine without the lock, and none starts until it ends."""
        with self._cond:
            while self._holding and self._failure is None:
                self._cond.wait()
            self._raise_if_failed()
            self._reading += 1
            state, version = self.state, self.weight_version
        try:
            yield state, version
        finally:
            with self._cond:
                self._reading -= 1
                self._cond.notify_all()

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise EngineError(f"the JAX engine's worker failed: {self._failure!r}")

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._stopping and not self.table.active() and not self._admissible():
                        self._cond.wait()
                    if self._stopping:
                        break
                    admitted = self._admit()
                    if not admitted and not self.table.active():
                        self._cond.wait(timeout=0.1)  # the waiting need slots that idle sessions hold
                        continue
                for slot, reused in admitted:
                    self._prefill(slot, reused)
                if self.table.active():
                    self._decode()
        except BaseException as error:  # noqa: BLE001 - every waiter must learn the worker died
            log.exception("JAX engine worker failed")
            self._fail_everything(error)
        finally:
            with self._cond:
                for request in list(self._pending) + self.table.running():
                    request.fail(EngineError("the JAX engine stopped"))
                self._cond.notify_all()

    def _admissible(self) -> bool:
        return bool(self._pending) and not self._paused and not self._draining and not self._released

    def _admit(self) -> list[tuple[Slot, int]]:
        if not self._admissible():
            return []
        admitted = self.table.admit(self._pending, self.session_hold_s)
        for slot, reused in admitted:
            request = slot.running
            request.weight_version = self.weight_version
            request.cached_tokens = reused
        return admitted

    def _seed(self, request: Request) -> int:
        if request.sampling.seed is not None:
            return request.sampling.seed & 0x7FFFFFFF
        return random.Random(self._seed_base * 1_000_003 + request.number).getrandbits(31)

    def _sampling_row(self, request: Request | None) -> tuple[float, int, float, float]:
        if request is None:
            return (0.0, -1, 1.0, 0.0)
        s = request.sampling
        return (s.temperature, s.top_k, s.top_p, s.min_p)

    def _prefill(self, slot: Slot, reused: int) -> None:
        """Caches the prompt beyond the reused prefix, chunk by chunk; the last chunk samples the first token."""
        request = slot.running
        # a slot reuses at most all but the last prompt token (SlotTable._reusable), so there is a last chunk
        *earlier, last = range(reused, len(request.input_ids), self.prefill_chunk)
        for start in earlier:
            self._prefill_chunk(slot, start)
        next_tokens, logprobs = self._prefill_chunk(slot, last)
        slot.tokens = list(request.input_ids)
        self._record(slot, int(next_tokens[0]), float(logprobs[0]))

    def _prefill_chunk(self, slot: Slot, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Caches the prompt's chunk from `start` -> the token sampled after it and its log-prob."""
        todo = slot.running.input_ids[start:start + self.prefill_chunk]
        tokens = np.zeros((1, bucket(len(todo), self.max_len)), np.int32)
        tokens[0, :len(todo)] = todo
        kv_len = max(bucket(start + len(todo), self.max_len), MIN_KV_BUCKET)
        return self._step([slot], tokens, [start], [len(todo) - 1], kv_len)

    def _decode(self) -> None:
        """Feeds every busy slot its last sampled token and samples the next `steps` tokens of each in one
        call. Only busy rows run (padded to a power of two with idle rows that write past the cache's end,
        where nothing lands), except in deterministic mode, where every slot always runs: a row's arithmetic
        must not depend on how many others share the call."""
        busy = self.table.active()
        steps = self._steps_now(busy)
        rows = self.table.slots if self.deterministic else self._padded_rows(busy)
        requests = [slot.request for slot in rows]
        # idle rows write at the scratch position, never inside a cached prefix
        starts = np.asarray([len(s.tokens) if s.busy else self.max_len - 1 for s in rows], np.int32)
        kv_len = self.max_len if self.deterministic else \
            max(bucket(max(len(s.tokens) for s in busy) + steps, self.max_len), MIN_KV_BUCKET)
        last = np.asarray([r.output_ids[-1] if r else 0 for r in requests], np.int32)
        tokens, logprobs, self.cache = decode(
            self.graphdef, self.state, self.cache, last, np.asarray([s.index for s in rows], np.int32), starts,
            self._seeds(requests), self._counters(requests), self._sampling(requests), self._stops(requests),
            np.asarray([self._room(s) if s.busy else 0 for s in rows], np.int32), kv_len=kv_len, steps=steps)
        tokens, logprobs = np.asarray(tokens), np.asarray(logprobs)
        for i, slot in enumerate(rows):
            request = slot.request
            if request is None:
                continue
            for j in range(steps):
                slot.tokens.append(request.output_ids[-1])  # what this step fed is now cached
                self._record(slot, int(tokens[i, j]), float(logprobs[i, j]))
                if slot.request is not request:
                    break  # finished: what it sampled after its stop is dropped

    def _steps_now(self, busy: list[Slot]) -> int:
        """Tokens per decode call: `decode_steps`, fewer when a request waits for a slot (so it is admitted
        soon after one frees) or when a row has fewer left before its length limit; a power of two, so
        compiles stay few. Deterministic mode always takes `decode_steps`: a loop of another length compiles
        to other fusions, whose last bits differ (writes past a row's end are dropped, extra tokens cut)."""
        if self.deterministic:
            return self.decode_steps
        limit = min(self.decode_steps, *(self._room(slot) for slot in busy))
        if self._pending:
            limit = min(limit, 4)
        steps = 1
        while steps * 2 <= limit:
            steps *= 2
        return steps

    def _room(self, slot: Slot) -> int:
        """Tokens `slot` may still sample before max_new_tokens or the end of its cache row."""
        request = slot.running
        return max(1, min(request.sampling.max_new_tokens - len(request.output_ids),
                          self.max_len - 1 - len(slot.tokens)))

    @staticmethod
    def _stops(requests: list[Request | None]) -> np.ndarray:
        """[rows, MAX_STOP_TOKENS] stop token ids padded with -1: one shape, so a stop list never compiles."""
        stops = np.full((len(requests), MAX_STOP_TOKENS), -1, np.int32)
        for i, request in enumerate(requests):
            if request:
                stops[i, :len(request.sampling.stop_token_ids)] = request.sampling.stop_token_ids
        return stops

    def _padded_rows(self, busy: list[Slot]) -> list[Slot]:
        idle = [s for s in self.table.slots if not s.busy]
        size = 1
        while size < len(busy):
            size *= 2
        return busy + idle[:max(0, size - len(busy))]

    def _step(self, rows: list[Slot], tokens: np.ndarray, starts: list[int], last_index: list[int],
              kv_len: int) -> tuple[np.ndarray, np.ndarray]:
        """One compiled step over cache rows `rows` -> (sampled token, its log-prob) per row."""
        requests = [slot.request for slot in rows]
        next_tokens, logprobs, self.cache = step(
            self.graphdef, self.state, self.cache, tokens, np.asarray([s.index for s in rows], np.int32),
            np.asarray(starts, np.int32), np.asarray(last_index, np.int32), self._seeds(requests),
            self._counters(requests), self._sampling(requests), kv_len=kv_len)
        return np.asarray(next_tokens), np.asarray(logprobs)

    def _seeds(self, requests: list[Request | None]) -> np.ndarray:
        return np.asarray([self._seed(r) if r else 0 for r in requests], np.uint32)

    @staticmethod
    def _counters(requests: list[Request | None]) -> np.ndarray:
        """How many tokens each request has sampled: the index of the next one's randomness."""
        return np.asarray([len(r.output_ids) if r else 0 for r in requests], np.int32)

    def _sampling(self, requests: list[Request | None]) -> RowSampling:
        return RowSampling.stack([self._sampling_row(r) for r in requests])

    def _record(self, slot: Slot, token: int, logprob: float) -> None:
        request = slot.running
        request.output_ids.append(token)
        request.logprobs.append(logprob)
        self._finish_if_done(slot, token)

    def _finish_if_done(self, slot: Slot, token: int) -> None:
        request = slot.running
        reason = None
        if token in request.sampling.stop_token_ids:
            reason = "stop"
        elif len(request.output_ids) >= request.sampling.max_new_tokens or len(slot.tokens) >= self.max_len - 1:
            reason = "length"  # also when the next token would land on the scratch position
        if reason is None:
            return
        with self._cond:
            self.table.release(slot)
            self._cond.notify_all()
        request.finish(reason)

    def _fail_everything(self, error: BaseException) -> None:
        with self._cond:
            self._failure = error
            for request in list(self._pending) + self.table.running():
                request.fail(EngineError(f"the JAX engine's worker failed: {error!r}"))
            self._pending.clear()
            self._cond.notify_all()
