"""A small client for OpenAI-compatible chat completions, shared by the LLM user, the LLM judge and the API
agent of `rollout.evaluation.chat`.

Requests are timed out and retried by `envs.http_retry` (429 and 5xx, Retry-After honoured, jittered
backoff, a total retry budget); anything still failing becomes a typed `EndpointError`/`EndpointTimeout`,
which the trainer treats as a system error rather than the agent's failure. The API key is read from the
environment variable *named* in the config, once, when the client is built (the edge), never deep inside a
call.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import Field

from envs.errors import ConfigError, EndpointError
from envs.http_retry import BODY_EXCERPT, RetryPolicy, post_with_retries

Message = dict[str, str]


class ChatEndpointConfig(RetryPolicy):
    """Where the endpoint is, and (inherited) how its requests are timed out and retried."""

    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1 (the /chat/completions path is appended)")
    model: str
    api_key_env: str | None = Field(default=None, description="NAME of the env var holding the key, if any")


class ChatClient:
    """POSTs /chat/completions to one endpoint; `rng` draws the retry jitter (default: seeded by the OS, so
    clients in different processes do not retry in step)."""

    def __init__(self, config: ChatEndpointConfig, api_key: str | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # No httpx timeout: each attempt's deadline (config.timeout_s) is enforced around the whole request.
        self._http = httpx.AsyncClient(timeout=None, headers=headers)
        self._rng = rng or random.Random()
        self._url = config.base_url.rstrip("/") + "/chat/completions"

    @classmethod
    def from_config(cls, config: ChatEndpointConfig, environ: Mapping[str, str] = os.environ) -> ChatClient:
        api_key = None
        if config.api_key_env:
            api_key = environ.get(config.api_key_env)
            if not api_key:
                raise ConfigError(
                    f"environment variable {config.api_key_env} (api_key_env for {config.base_url}) is not set; "
                    "export it or set api_key_env to null for an endpoint without a key"
                )
        return cls(config, api_key)

    async def completion(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The whole response to `body` (the configured model added), with choices[0].message an object."""
        response = await post_with_retries(self._http, self._url, {"model": self.config.model, **body},
                                           self.config, self._rng)
        try:
            answer = response.json()
            message = answer["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"{self._url} returned no choices[0].message: {response.text[:BODY_EXCERPT]}",
                                kind="endpoint_protocol") from exc
        if not isinstance(message, dict):
            raise EndpointError(f"{self._url} returned a non-object choices[0].message: {message!r}",
                                kind="endpoint_protocol")
        return answer

    async def complete(self, messages: list[Message], *, temperature: float, max_tokens: int = 1024,
                       stop: list[str] | None = None) -> str:
        """The assistant text of one chat completion."""
        body: dict[str, Any] = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if stop:
            body["stop"] = stop
        content = (await self.completion(body))["choices"][0]["message"].get("content")
        if not isinstance(content, str):
            raise EndpointError(f"{self._url} returned non-text content: {content!r}", kind="endpoint_protocol")
        return content

    async def aclose(self) -> None:
        await self._http.aclose()
