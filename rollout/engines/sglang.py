"""`SGLangEngine`: the `Engine` contract over SGLang's native HTTP API, for one or many servers.

Failures are the infrastructure's, never the agent's: a request that cannot be served after the configured
attempts raises `EngineError`, which the episode loop records as a system error and the group scheduler
re-runs. Retried (with exponential backoff, jittered so that many episodes do not hit a restarted server in
lock step): connection errors, timeouts, 5xx and 429 answers (the server is benched and the request moves to
another one), and `finish_reason.type == "abort"` (what SGLang answers for requests in flight when a
publish pauses it; the retry waits behind the pause). Not retried: other 4xx answers and malformed
responses, which a retry cannot fix. A response is malformed (`ProtocolError`, a system error of kind
`engine_protocol`) when it is not SGLang's format or not believable: ids outside the vocabulary, log-probs
above 0 or not finite, no tokens or more than `max_new_tokens`.

LoRA: `update_adapter` publishes an adapter instead of weights. Inside one pause, every server loads the new
adapter (/load_lora_adapter) before the old one is unloaded (/unload_lora_adapter), so no request can find
neither; from then on every request names the new one (`lora_path`), retries of aborted requests included,
and its Generation carries the adapter's version (the servers report their base weights' version, which LoRA
training never changes).

Sessions: every request of an episode names it in a header SGLang ignores (sglang_wire.SESSION_HEADER), and the
pool keeps the episode on one server, where its prefix is cached. tbjax.serve in deterministic mode holds one
cache row per session and says so in its answers; `end_session` then frees the row there.

Publishing falls back to restarting the servers where `/update_weights_from_disk` does not exist
(sglang-jax answers 404): given a `restart_servers` callable (`rollout.launch_sglang.Supervisor.restart_on`,
which stops every server and starts it again on the new HF directory, blocking until all are healthy), the
engine calls it instead, and keeps doing so for later publishes. It costs a server start per publish
(seconds for a tiny model on CPU, minutes for a 27B) and the prefix caches. Without one, the 404 is an
`EngineError` that says so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from rollout.engines.protocol import EngineError, Generation, Retries, SamplingParams, TokenScores
from rollout.engines.servers import Server, ServerPool
from rollout.engines.sglang_settings import (
    MissingEndpointError,
    ServedAdapter,
    ServerRestarter,
    SGLangConfig,
)
from rollout.engines.sglang_wire import (
    END_SESSION_PATH,
    SESSION_HEADER,
    SESSION_HELD_HEADER,
    ProtocolError,
    finish_reason_of,
    generate_payload,
    parse_generation,
    parse_scores,
    score_payload,
)

log = logging.getLogger(__name__)


class SGLangEngine:
    """Speaks /generate (sampling, and scoring a given sequence), /pause_generation, /update_weights_from_disk,
    /load_lora_adapter, /unload_lora_adapter, /continue_generation, /health and /release_memory_occupation,
    /resume_memory_occupation."""

    def __init__(self, config: SGLangConfig, transport: httpx.AsyncBaseTransport | None = None,
                 restart_servers: ServerRestarter | None = None) -> None:
        self.config = config
        self.pool = ServerPool(config.urls, config.weight_version, config.cooldown_s)
        self.missing_logprobs = 0  # stop tokens whose logprob no server sent (NaN in the Generation)
        self._restart_servers = restart_servers
        self.publish_by_restart = False  # set once a server turned out to lack /update_weights_from_disk
        self.adapter: ServedAdapter | None = None  # the LoRA adapter requests run under (None: the base)
        # sessions whose cache row a server holds until told they ended (tbjax.serve in deterministic mode)
        self._held_sessions: dict[str, Server] = {}
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.request_timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=config.max_connections,
                                max_keepalive_connections=config.max_connections),
            transport=transport,
        )

    @classmethod
    def from_urls(cls, urls: Sequence[str], restart_servers: ServerRestarter | None = None,
                  **settings: Any) -> SGLangEngine:
        return cls(SGLangConfig(urls=tuple(urls), **settings), restart_servers=restart_servers)

    async def generate(self, input_ids: Sequence[int], sampling: SamplingParams, *,
                       session_id: str | None = None) -> Generation:
        if not input_ids:
            raise ValueError("generate needs at least one input token")
        rid = uuid.uuid4().hex
        errors: list[str] = []
        failed: Server | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            server = self.pool.acquire(session_id, avoid=failed)
            start = time.perf_counter()
            adapter = self.adapter  # each attempt runs under the adapter served when it starts
            try:
                # A fresh rid per attempt: a timed-out attempt may still be running under the old one.
                payload = generate_payload(input_ids, sampling, f"{rid}-{attempt}", _name(adapter))
                result = await self._generate_once(server, payload, sampling.max_new_tokens, adapter, session_id)
            finally:
                self.pool.release(server)
            if isinstance(result, Generation):
                return result
            errors.append(f"attempt {attempt} on {server.url}: {result}")
            Retries.record(time.perf_counter() - start)
            failed = server if self.pool.benched(server) else None  # an abort may retry where its prefix is cached
            if attempt < self.config.max_attempts:
                backoff = self._backoff(attempt)
                await asyncio.sleep(backoff)
                Retries.record(backoff, failed_attempts=0)
        raise EngineError(f"/generate failed {len(errors)} times: " + "; ".join(errors)
                          + ". Check the servers (GET /health, their logs) or the launcher's restarts.")

    async def end_session(self, session_id: str) -> None:
        self.pool.forget(session_id)
        server = self._held_sessions.pop(session_id, None)
        if server is not None:
            await self._end_held_session(server, session_id)

    async def _end_held_session(self, server: Server, session_id: str) -> None:
        """Frees the cache row `server` holds for the session. The episode is over and scored, so a failure here
        is only logged: a server that is gone lost the row with its process, and one that does not answer gives
        the row to another session once its hold runs out (and warns that reuse then depends on scheduling)."""
        url = f"{server.url}{END_SESSION_PATH}"
        try:
            response = await self._post_once_more_if_dropped(url, {"session_id": session_id},
                                                             self.config.health_timeout_s)
        except httpx.HTTPError as e:
            log.warning("%s unreachable while ending session %s (%s: %s)", url, session_id, type(e).__name__, e)
            return
        if response.status_code >= 400:
            log.warning("%s refused to end session %s (HTTP %d): %s", url, session_id, response.status_code,
                        response.text[:300])

    async def _generate_once(self, server: Server, payload: dict[str, Any], max_new_tokens: int,
                             adapter: ServedAdapter | None, session_id: str | None) -> Generation | str:
        """One attempt: the Generation, or why it failed in a way worth retrying elsewhere. Failures a
        retry cannot fix raise."""
        try:
            response = await self._post_once_more_if_dropped(
                f"{server.url}/generate", payload, headers=None if session_id is None else {SESSION_HEADER: session_id})
        except httpx.TimeoutException as e:
            return self._bench(server, f"timed out ({type(e).__name__})")
        except httpx.TransportError as e:
            return self._bench(server, f"connection failed ({type(e).__name__}: {e})")
        if response.status_code >= 500 or response.status_code == 429:
            return self._bench(server, f"HTTP {response.status_code}: {response.text[:300]}")
        if response.status_code >= 400:
            raise EngineError(f"{server.url}/generate rejected the request with HTTP {response.status_code}: "
                              f"{response.text[:500]} (a client bug or a prompt the server cannot take)")
        try:
            body = response.json()
        except ValueError as e:
            raise ProtocolError(f"{server.url}/generate answered non-JSON: {response.text[:200]!r}") from e
        meta = body.get("meta_info") if isinstance(body, dict) else None
        if not isinstance(meta, dict):
            raise ProtocolError(f"{server.url}/generate answered without meta_info: {str(body)[:200]}")
        finish, _, message = finish_reason_of(meta)
        if finish == "abort":
            return f"aborted by the server ({message or 'no message'})"
        try:
            generation, missing = parse_generation(body, server.weight_version, max_new_tokens,
                                                   self.config.vocab_size)
        except ProtocolError as error:
            raise ProtocolError(f"{server.url}/generate: {error}") from error
        if missing:
            self.missing_logprobs += missing
            log.warning("%s trimmed a stop token and its logprob; it is reported as NaN", server.url)
        self.pool.mark_healthy(server)
        if session_id is not None and response.headers.get(SESSION_HELD_HEADER):
            self._held_sessions[session_id] = server
        return generation if adapter is None else dataclasses.replace(generation, weight_version=adapter.version)

    def _bench(self, server: Server, error: str) -> str:
        self.pool.bench(server, error)
        log.warning("SGLang server %s benched: %s", server.url, error)
        return error

    def _backoff(self, attempt: int) -> float:
        delay = min(self.config.max_backoff_s, self.config.backoff_s * 2 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)

    async def score(self, input_ids: Sequence[int]) -> list[TokenScores]:
        """Teacher-forced log-probs of `input_ids[1:]` from every server (each loaded its weights on its own),
        through /generate with `logprob_start_len` 0. Not retried: the weight probe runs it right after a
        publish, and a server that cannot answer then is itself the finding."""
        if len(input_ids) < 2:
            raise ValueError("scoring needs at least two tokens (the first has no log-prob)")
        return list(await asyncio.gather(*(self._score_on(s, input_ids) for s in self.pool.servers)))

    async def _score_on(self, server: Server, input_ids: Sequence[int]) -> TokenScores:
        url, adapter = f"{server.url}/generate", self.adapter
        try:
            response = await self._post_once_more_if_dropped(
                url, score_payload(input_ids, uuid.uuid4().hex, _name(adapter)))
        except httpx.HTTPError as e:
            raise EngineError(f"{url} unreachable while scoring ({type(e).__name__}: {e})") from e
        if response.status_code >= 400:
            raise EngineError(f"{url} refused to score (HTTP {response.status_code}): {response.text[:300]}")
        try:
            body = response.json()
        except ValueError as e:
            raise ProtocolError(f"{url} answered non-JSON: {response.text[:200]!r}") from e
        scores = parse_scores(body, input_ids, server.weight_version, server.url)
        return scores if adapter is None else dataclasses.replace(scores, weight_version=adapter.version)

    async def update_weights(self, hf_dir: str, version: str) -> None:
        """Pause every server, load `hf_dir` on every server, continue every server. Every server pauses
        before any loads, so no two servers sample with different weights after the publish; generation is
        continued even when a load fails, and the failure is raised. Servers without the endpoint are
        restarted on `hf_dir` instead (module docstring)."""
        if not self.publish_by_restart:
            missing = await self._load_in_place(hf_dir, version)
            if missing is None:
                return
            if self._restart_servers is None:
                raise EngineError(f"{missing}: these servers cannot load weights in place (sglang-jax has no "
                                  "/update_weights_from_disk); give SGLangEngine restart_servers="
                                  "Supervisor.restart_on to publish by restarting them") from missing
            log.warning("%s; publishing weights by restarting the servers from now on", missing)
            self.publish_by_restart = True
        await self._restart_on(hf_dir, version)

    async def update_adapter(self, adapter_dir: str, version: str) -> None:
        """Every server serves the PEFT adapter at `adapter_dir` as policy `version` (module docstring): loaded
        everywhere, then the previous one unloaded, inside one pause. A failed load leaves the previous adapter
        served and is raised; so is a failed unload, after the new adapter is served (the server keeps both)."""
        new, old = ServedAdapter(f"policy-v{version}", version), self.adapter
        await self._on_every_server("/pause_generation", self._pause)
        try:
            try:
                await self._on_every_server("/load_lora_adapter", {"lora_name": new.name, "lora_path": adapter_dir})
            except MissingEndpointError as error:
                raise EngineError(f"{error}: these servers cannot load LoRA adapters; start them with --enable-lora "
                                  "(rollout.launch_sglang does for lora.rank > 0)") from error
            self.adapter = new
            if old is not None and old.name != new.name:
                await self._on_every_server("/unload_lora_adapter", {"lora_name": old.name})
        finally:
            await self._on_every_server("/continue_generation", {})

    @property
    def _pause(self) -> dict[str, str]:
        """/pause_generation's body: SGLang's default mode (abort) sent as it always was, or the mode."""
        return {} if self.config.pause_mode == "abort" else {"mode": self.config.pause_mode}

    async def _load_in_place(self, hf_dir: str, version: str) -> MissingEndpointError | None:
        """Pause, load, continue on every server; the 404 of servers without the load endpoint, if any."""
        await self._on_every_server("/pause_generation", self._pause)
        try:
            update = {"model_path": hf_dir, "weight_version": version, "flush_cache": self.config.flush_cache}
            await self._on_every_server("/update_weights_from_disk", update)
        except MissingEndpointError as error:
            return error
        finally:
            await self._on_every_server("/continue_generation", {})
        for server in self.pool.servers:
            server.weight_version = version
        return None

    async def _restart_on(self, hf_dir: str, version: str) -> None:
        """The servers start again on `hf_dir` (in a thread: the launcher blocks until they are healthy)."""
        assert self._restart_servers is not None
        try:
            await asyncio.to_thread(self._restart_servers, hf_dir)
        except Exception as error:  # the launcher's own failure (LaunchError, OSError): infrastructure
            raise EngineError(f"restarting the servers on {hf_dir} failed: {error}") from error
        for server in self.pool.servers:
            server.weight_version = version
            self.pool.mark_healthy(server)

    async def release_memory(self, tags: Sequence[str] | None = None) -> None:
        """Every server frees the GPU memory of `tags` (None: all of it) so that the trainer can use it.
        Call with no generation in flight."""
        await self._on_every_server("/release_memory_occupation", {"tags": _tag_list(tags)})

    async def resume_memory(self, tags: Sequence[str] | None = None) -> None:
        """Every server takes back the GPU memory of `tags` (None: all of it). Resumed weights hold no
        meaningful values until the next update_weights."""
        await self._on_every_server("/resume_memory_occupation", {"tags": _tag_list(tags)})

    async def _on_every_server(self, path: str, body: dict[str, Any]) -> None:
        results = await asyncio.gather(*(self._admin(s, path, body) for s in self.pool.servers),
                                       return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            missing = all(isinstance(f, MissingEndpointError) for f in failures)
            raise (MissingEndpointError if missing else EngineError)(
                f"{path} failed on {len(failures)} of {len(results)} servers: " + "; ".join(map(str, failures)))

    async def _admin(self, server: Server, path: str, body: dict[str, Any]) -> None:
        url = f"{server.url}{path}"
        try:
            response = await self._post_once_more_if_dropped(url, body, self.config.admin_timeout_s)
        except httpx.HTTPError as e:
            raise EngineError(f"{url} unreachable ({type(e).__name__}: {e}); restart the server or drop it "
                              f"from the URL list") from e
        if response.status_code == 404:
            raise MissingEndpointError(f"{url} answered HTTP 404 (the server has no {path})")
        if path == "/update_weights_from_disk":
            self._check_loaded(response, url, body["model_path"])
        elif path in ("/load_lora_adapter", "/unload_lora_adapter"):
            self._check_adapter_answer(response, url, body)
        elif response.status_code >= 400:
            raise EngineError(f"{url} answered HTTP {response.status_code}: {response.text[:300]}")

    async def _post_once_more_if_dropped(self, url: str, body: dict[str, Any], timeout: float | None = None,
                                         headers: dict[str, str] | None = None) -> httpx.Response:
        """Admin calls come seconds to minutes apart (around each update), and a generate moved to another
        server after a failure may find its pooled connection idle for as long, longer than SGLang's uvicorn
        keeps an idle connection (5 s): a request sent as the server closes that connection is dropped
        unanswered (CI saw both). Sent again once on a fresh connection; a server that is really gone fails
        again, and that failure counts."""
        limit = self._client.timeout if timeout is None else timeout
        try:
            return await self._client.post(url, json=body, timeout=limit, headers=headers)
        except (httpx.ReadError, httpx.RemoteProtocolError) as e:
            log.info("%s: the connection closed under the request (%s: %s); sending it once more",
                     url, type(e).__name__, e)
            return await self._client.post(url, json=body, timeout=limit, headers=headers)

    @staticmethod
    def _check_loaded(response: httpx.Response, url: str, model_path: str) -> None:
        """SGLang answers {success, message}, with HTTP 400 when the load failed."""
        message = _failure(response, "message")
        if message is not None:
            raise EngineError(f"{url} could not load {model_path} (HTTP {response.status_code}): {message!r}; it "
                              f"must be an HF safetensors directory of the served architecture, readable by the server")

    @staticmethod
    def _check_adapter_answer(response: httpx.Response, url: str, body: dict[str, Any]) -> None:
        """SGLang answers the adapter endpoints {success, error_message}, with HTTP 400 when it failed."""
        message = _failure(response, "error_message")
        if message is not None:
            raise EngineError(f"{url} refused adapter {body['lora_name']!r} (HTTP {response.status_code}): "
                              f"{message!r}")

    async def health(self) -> bool:
        """True when every server answers GET /health with 200; updates the servers' health marks."""
        results = await asyncio.gather(*(self._healthy(s) for s in self.pool.servers))
        return all(results)

    async def _healthy(self, server: Server) -> bool:
        try:
            response = await self._client.get(f"{server.url}/health", timeout=self.config.health_timeout_s)
        except httpx.HTTPError as e:
            self.pool.bench(server, f"health check failed ({type(e).__name__})")
            return False
        if response.status_code != 200:
            self.pool.bench(server, f"health check answered HTTP {response.status_code}")
            return False
        self.pool.mark_healthy(server)
        return True

    async def close(self) -> None:
        await self._client.aclose()


def _failure(response: httpx.Response, message_key: str) -> str | None:
    """None when an admin endpoint answered {success: true}; else what went wrong: the answer's `message_key`,
    or the start of a body that is no JSON object."""
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code < 400 and isinstance(answer, dict) and answer.get("success"):
        return None
    return str(answer.get(message_key)) if isinstance(answer, dict) else response.text[:300]


def _name(adapter: ServedAdapter | None) -> str | None:
    return None if adapter is None else adapter.name


def _tag_list(tags: Sequence[str] | None) -> list[str] | None:
    return None if tags is None else list(tags)
