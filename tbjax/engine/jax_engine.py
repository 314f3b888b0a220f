"""JaxEngine: the embedded inference engine (continuous batching over a KV cache), behind the same
`rollout.engines.protocol.Engine` protocol as the SGLang client.

Requests run on the worker thread of `ContinuousBatching` (continuous_batching.py), which owns the device and
gathers them into decode batches. Callers on any asyncio loop await futures the worker resolves. Weight swaps
and loads wait for in-flight generations to finish, so each Generation is sampled from exactly one weight
version. `update_weights` writes a directory's tensors into the served parameters in place (weight_loading.py):
the model the engine was built from (or the state given to `set_state`) shares those parameters' Variables, so
it holds the new weights too, and arrays taken from it before are deleted (their buffers were donated).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
from flax import nnx
from jax.sharding import AbstractMesh

from rollout.engines.protocol import EngineError, Generation, SamplingParams, TokenScores
from rollout.engines.sglang_settings import KV_CACHE, WEIGHTS
from tbjax.engine.continuous_batching import ContinuousBatching
from tbjax.engine.device_step import bucket, score
from tbjax.engine.request_checks import memory_tags, refuse_unrunnable
from tbjax.engine.requests import Request
from tbjax.engine.served_weights import Checked, InPlaceWeights
from tbjax.engine.weight_checks import WeightsError, refuse_non_finite
from tbjax.models import Qwen
from tbjax.models.decoding import KVCache
from tbjax.parallel.offload import HostOffload

log = logging.getLogger(__name__)


class JaxEngine(ContinuousBatching):
    """The embedded engine's public API (the Engine and Scorer protocols, SGLang's pause, cache and memory
    controls) over the worker of `ContinuousBatching`, which runs the requests."""

    def __init__(self, model: Qwen, *, slots: int = 8, max_len: int = 4096, weight_version: str = "0",
                 seed: int = 0, prefill_chunk: int = 512, deterministic: bool = False, decode_steps: int = 16,
                 session_hold_s: float = 30.0, weights_dir: str | Path | None = None):
        """`weights_dir`: the HF directory `model`'s weights were read from, unchanged since (tbjax.serve's
        --model); an update that fails midway writes it back, and each successful update takes its place. None
        (a model built or trained in code): such a failure leaves the weights broken, and the engine refuses
        requests until an update succeeds. `set_state` leaves it as it is: an engine whose weights it replaces
        (the trainer's) is built without one."""
        if isinstance(model.mesh, AbstractMesh):
            raise ValueError("the engine runs a model on devices, and this one is laid out on an abstract mesh "
                             "(a plan's), which has none")
        self._offload = HostOffload()
        self._weights = InPlaceWeights(model.config, weights_dir)
        super().__init__(model, slots=slots, max_len=max_len, weight_version=weight_version, seed=seed,
                         prefill_chunk=prefill_chunk, deterministic=deterministic, decode_steps=decode_steps,
                         session_hold_s=session_hold_s)

    # ----------------------------------------------------------------- the Engine protocol
    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        if not input_ids:
            raise ValueError("input_ids is empty: a prompt needs at least one token")
        if len(input_ids) >= self.max_len - 1:
            raise ValueError(f"prompt of {len(input_ids)} tokens does not fit the engine's max_len {self.max_len}; "
                             "shorten the episode budget or start the engine with a larger max_len")
        refuse_unrunnable(input_ids, sampling, self.config.vocab_size)
        self._weights.refuse_if_broken()
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
        """Loads `hf_dir` into the served parameters in place once in-flight generations finish (weight_loading.py:
        a directory the pre-flight refuses changes nothing; a load that fails midway goes back to the last
        directory). WeightsError names what was wrong."""
        self._refuse_if_weights_released()
        checked = await asyncio.to_thread(self._weights.check, hf_dir)
        await asyncio.to_thread(self._with_engine_held, lambda: self._load(checked, version))

    async def score(self, input_ids: Sequence[int]) -> list[TokenScores]:
        """Teacher-forced log-probs of `input_ids[1:]` under the parameters served now (the `Scorer`
        protocol; one replica). The sequence is padded to a power-of-two bucket, so probes compile once."""
        if len(input_ids) < 2:
            raise ValueError("scoring needs at least two tokens (the first has no log-prob)")
        self._refuse_if_weights_released()
        tokens = np.zeros((1, bucket(len(input_ids), max(self.max_len, len(input_ids)))), np.int32)
        tokens[0, :len(input_ids)] = input_ids
        logprobs, version = await asyncio.to_thread(self._score, tokens)
        return [TokenScores(tuple(float(x) for x in logprobs[0, :len(input_ids) - 1]), version, "embedded")]

    def _score(self, tokens: np.ndarray) -> tuple[np.ndarray, str]:
        """Log-probs of `tokens` and the weight version they come from; no weight load starts meanwhile."""
        with self._reading_parameters() as (state, version):
            self._refuse_if_weights_released()
            self._weights.refuse_if_broken()
            return np.asarray(score(self.graphdef, state, tokens)), version

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

    # ----------------------------------------------------------------- weight swaps and loads
    def _load(self, checked: Checked, version: str) -> None:
        """Writes `checked` into the served parameters (the engine held idle) and serves it as `version`. A load
        that fails leaves the version, and the cache its weights computed, as they were: the weights are the
        old ones again, or broken, and then the requests queued meanwhile fail."""
        self._refuse_if_weights_released()  # released while the load waited for in-flight work
        try:
            self._weights.load(self.state, checked, version)
        except WeightsError:
            with self._cond:
                if (broken := self._weights.broken_error) is not None:
                    for request in self._pending:
                        request.fail(broken)
                    self._pending.clear()
            raise
        with self._cond:
            self._swap(self.state, version)

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
