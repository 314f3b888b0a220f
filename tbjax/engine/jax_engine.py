"""JaxEngine: the embedded inference engine (continuous batching over a KV cache), behind the same
`rollout.engines.protocol.Engine` protocol as the SGLang client.

A worker thread owns the device: between decode steps it admits waiting requests into free cache slots
(prefilling only the part of the prompt the slot does not already cache), then advances every active slot
by one token. Callers on any asyncio loop await futures the worker resolves. Weight swaps wait for
in-flight generations to finish, so each Generation is sampled from exactly one weight version.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections import deque
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
from flax import nnx

from rollout.engines.protocol import EngineError, Generation, SamplingParams, TokenScores
from rollout.engines.sglang import KV_CACHE, WEIGHTS
from tbjax.engine.device_step import bucket, decode, score, step
from tbjax.engine.request_checks import MAX_STOP_TOKENS, memory_tags, refuse_unrunnable
from tbjax.engine.requests import Request, Slot, SlotTable
from tbjax.engine.sampling import RowSampling
from tbjax.engine.weight_checks import load_servable, refuse_non_finite
from tbjax.models import Qwen, from_pretrained
from tbjax.models.decoding import KVCache
from tbjax.parallel.offload import HostOffload

log = logging.getLogger(__name__)
MIN_KV_BUCKET = 64


class JaxEngine:
    def __init__(self, model: Qwen, *, slots: int = 8, max_len: int = 4096, weight_version: str = "0",
                 seed: int = 0, prefill_chunk: int = 512, deterministic: bool = False, decode_steps: int = 16,
                 session_hold_s: float = 30.0):
        self.config = model.config
        self.mesh = model.mesh
        self.graphdef, self.state = nnx.split(model)
        self.max_len = max_len
        self.prefill_chunk = prefill_chunk  # long prompts run in chunks: attention memory ~ chunk x length
        # deterministic: a request's tokens depend only on the request (seeded) and its session's earlier turns:
        # a session reuses only its own slot's cache (SlotTable's ownership, freed by `end_session`) and decode
        # attends over the whole cache (the reduction's shape never changes). For bitwise-reproducible runs.
        self.deterministic = deterministic
        self.session_hold_s = session_hold_s  # SlotTable.admit: for clients that never end their sessions
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
        self._offload = HostOffload()
        self._draining = 0  # holders (weight swap, memory release) waiting for in-flight work to finish
        self._stopping = False
        self._failure: BaseException | None = None
        self._seed_base = seed
        self._worker = threading.Thread(target=self._run, name="jax-engine", daemon=True)
        self._worker.start()

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs) -> JaxEngine:
        return cls(from_pretrained(path), **kwargs)

    # ----------------------------------------------------------------- the Engine protocol
    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        if not input_ids:
            raise ValueError("input_ids is empty: a prompt needs at least one token")
        if len(input_ids) >= self.max_len - 1:
            raise ValueError(f"prompt of {len(input_ids)} tokens does not fit the engine's max_len {self.max_len}; "
                             "shorten the episode budget or start the engine with a larger max_len")
        refuse_unrunnable(input_ids, sampling, self.config.vocab_size)
        loop = asyncio.get_running_loop()
        request = Request(list(input_ids), sampling, loop.create_future(), loop, session_id)
        with self._cond:
            self._raise_if_failed()
            self._pending.append(request)
            self._cond.notify_all()
        generation = await request.future
        if not np.all(np.isfinite(generation.logprobs)):
            raise EngineError(f"weight version {generation.weight_version} gave non-finite log-probs (finite weights "
                              "that overflow): the served weights are broken; load good ones")
        return generation

    async def end_session(self, session_id: str) -> None:
        with self._cond:
            self.table.end_session(session_id)
            self._cond.notify_all()

    async def update_weights(self, hf_dir: str, version: str) -> None:
        self._refuse_if_weights_released()
        model = await asyncio.to_thread(load_servable, hf_dir, self.mesh, self.config)
        await self.set_state(nnx.state(model), version, checked=True)

    async def score(self, input_ids: Sequence[int]) -> list[TokenScores]:
        """Teacher-forced log-probs of `input_ids[1:]` under the parameters served now (the `Scorer`
        protocol; one replica). The sequence is padded to a power-of-two bucket, so probes compile once."""
        if len(input_ids) < 2:
            raise ValueError("scoring needs at least two tokens (the first has no log-prob)")
        self._refuse_if_weights_released()
        with self._cond:  # a swap replaces both under the lock
            state, version = self.state, self.weight_version
        tokens = np.zeros((1, bucket(len(input_ids), max(self.max_len, len(input_ids)))), np.int32)
        tokens[0, :len(input_ids)] = input_ids
        logprobs = await asyncio.to_thread(lambda: np.asarray(score(self.graphdef, state, tokens)))
        return [TokenScores(tuple(float(x) for x in logprobs[0, :len(input_ids) - 1]), version, "embedded")]

    async def set_state(self, state: nnx.State, version: str, checked: bool = False) -> None:
        """Swaps in new parameters (same structure) once in-flight generations finish; parameters holding
        NaN or Inf are refused first (`checked`: the caller has looked already)."""
        self._refuse_if_weights_released()
        if not checked:
            await asyncio.to_thread(refuse_non_finite, state, f"weight version {version}")
        await asyncio.to_thread(self._with_engine_idle, lambda: self._swap(state, version))

    async def health(self) -> bool:
        return self._worker.is_alive() and self._failure is None

    async def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        await asyncio.to_thread(self._worker.join)

    # ----------------------------------------------------------------- SGLang-style controls
    def pause(self) -> None:
        """New requests wait; generations already running continue."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def flush_cache(self) -> bool:
        """Forgets cached prefixes; refused (False) while generations run, as SGLang does."""
        with self._cond:
            if self.table.active() or self._pending:
                return False
            self.table.forget_all()
            return True

    async def release_memory(self, tags: Collection[str] | None = None) -> None:
        """Gives up device memory by SGLang tag (None: all): "weights" moves the parameters to host memory,
        "kv_cache" frees the cache. Requests wait until everything is resumed. The parameters' device buffers
        are dropped, not deleted: the model this engine was built from (the trainer's, in process) may share
        them, and they are freed once nobody does, as in a served engine."""
        tags = memory_tags(tags)

        def release() -> None:
            if WEIGHTS in tags:
                self.state = self._offload.to_host(self.state, free=False)
            if KV_CACHE in tags:
                self.cache = None
                self.table.forget_all()
            self._released |= tags
        await asyncio.to_thread(self._with_engine_idle, release)

    async def resume_memory(self, tags: Collection[str] | None = None) -> None:
        """Takes back what `release_memory` gave up, by tag (None: all), with the parameters' shardings."""
        tags = memory_tags(tags)

        def resume() -> None:
            if WEIGHTS in tags:
                self.state = self._offload.to_device(self.state, free=False)
            if KV_CACHE in tags and self.cache is None:
                self.cache = KVCache.zeros(self.config, len(self.table.slots), self.max_len)
            self._released -= tags
        await asyncio.to_thread(self._with_engine_idle, resume)

    @property
    def released(self) -> frozenset[str]:
        """The memory tags currently given up (empty: serving)."""
        return frozenset(self._released)

    @property
    def busy(self) -> bool:
        return bool(self.table.active() or self._pending)

    # ----------------------------------------------------------------- the worker
    def _with_engine_idle(self, action) -> None:
        """Runs `action` with no generation in flight, holding new admissions back meanwhile."""
        with self._cond:
            self._draining += 1
            try:
                while self.table.active() and self._failure is None:
                    self._cond.wait()
                self._raise_if_failed()
                action()
            finally:
                self._draining -= 1
                self._cond.notify_all()

    def _swap(self, state: nnx.State, version: str) -> None:
        self.state = state
        self.weight_version = version
        self.table.forget_all()  # cached keys/values belong to the old weights
        if self.cache is not None:  # and are zeroed, so nothing the old weights wrote outlives them
            self.cache = None
            self.cache = KVCache.zeros(self.config, len(self.table.slots), self.max_len)
        log.info("engine now serves weight version %s", version)

    def _refuse_if_weights_released(self) -> None:
        """SGLang cannot load weights into released memory either: the caller resumes "weights" first."""
        if WEIGHTS in self._released:
            raise ValueError("the engine's weights memory is released: resume_memory(['weights']) before "
                             "loading new weights")

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
                for request in list(self._pending) + [s.request for s in self.table.active()]:
                    request.fail(EngineError("the JAX engine stopped"))
                self._cond.notify_all()

    def _admissible(self) -> bool:
        return bool(self._pending) and not self._paused and not self._draining and not self._released

    def _admit(self) -> list[tuple[Slot, int]]:
        if not self._admissible():
            return []
        admitted = self.table.admit(self._pending, self.session_hold_s)
        for slot, reused in admitted:
            slot.request.weight_version = self.weight_version
            slot.request.cached_tokens = reused
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
        request = slot.request
        for start in range(reused, len(request.input_ids), self.prefill_chunk):
            todo = request.input_ids[start:start + self.prefill_chunk]
            tokens = np.zeros((1, bucket(len(todo), self.max_len)), np.int32)
            tokens[0, :len(todo)] = todo
            kv_len = max(bucket(start + len(todo), self.max_len), MIN_KV_BUCKET)
            next_tokens, logprobs = self._step([slot], tokens, [start], [len(todo) - 1], kv_len)
        slot.tokens = list(request.input_ids)
        self._record(slot, int(next_tokens[0]), float(logprobs[0]))

    def _decode(self) -> None:
        """Feeds every busy slot its last sampled token and samples the next `steps` tokens of each in one
        call. Only busy rows run (padded to a power of two with idle rows that write past the cache's end,
        where nothing lands), except in deterministic mode, where every slot always runs: a row's arithmetic
        must not depend on how many others share the call."""
        busy = self.table.active()
        steps = self._steps_now(busy)
        rows = self.table.slots if self.deterministic else self._padded_rows(busy)
        requests = [slot.request for slot in rows]
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
            for j in range(steps if request else 0):
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
        request = slot.request
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
        slot.request.output_ids.append(token)
        slot.request.logprobs.append(logprob)
        self._finish_if_done(slot, token)

    def _finish_if_done(self, slot: Slot, token: int) -> None:
        request = slot.request
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
            for request in list(self._pending) + [s.request for s in self.table.active()]:
                request.fail(EngineError(f"the JAX engine's worker failed: {error!r}"))
            self._pending.clear()
            self._cond.notify_all()
