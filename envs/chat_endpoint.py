"""A small client for OpenAI-compatible chat completions, shared by the LLM user and the LLM judge.

Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential backoff;
anything still failing becomes a typed `EndpointError`/`EndpointTimeout`, which the trainer treats as a
system error rather than the agent's failure. The API key is read from the environment variable *named* in
the config, once, when the client is built (the edge), never deep inside a call.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import httpx
from pydantic import BaseModel, Field

from envs.errors import ConfigError, EndpointError, EndpointTimeout

Message = dict[str, str]


class ChatEndpointConfig(BaseModel):
    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1 (the /chat/completions path is appended)")
    model: str
    api_key_env: str | None = Field(default=None, description="NAME of the env var holding the key, if any")
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0  # first retry delay; doubles each retry


class ChatClient:
    def __init__(self, config: ChatEndpointConfig, api_key: str | None = None,
                 http: httpx.AsyncClient | None = None) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = http or httpx.AsyncClient(timeout=config.timeout_s, headers=headers)

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

    async def complete(self, messages: list[Message], *, temperature: float, max_tokens: int = 1024,
                       stop: list[str] | None = None) -> str:
        """The assistant text of one chat completion."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages,
                                "temperature": temperature, "max_tokens": max_tokens}
        if stop:
            body["stop"] = stop
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        last: Exception | None = None
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                response = await self._http.post(url, json=body)
            except httpx.TimeoutException as exc:
                last = exc
                continue
            except httpx.TransportError as exc:
                last = exc
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last = EndpointError(f"{url} answered HTTP {response.status_code}: {response.text[:200]}")
                continue
            if response.status_code != 200:
                raise EndpointError(f"{url} answered HTTP {response.status_code}: {response.text[:200]}")
            return _assistant_text(url, response)
        attempts = self.config.max_retries + 1
        if isinstance(last, httpx.TimeoutException):
            raise EndpointTimeout(f"{url} timed out after {self.config.timeout_s}s on {attempts} attempts")
        raise EndpointError(f"{url} failed on {attempts} attempts: {last}")

    async def aclose(self) -> None:
        await self._http.aclose()


def _assistant_text(url: str, response: httpx.Response) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EndpointError(f"{url} returned no choices[0].message.content: {response.text[:200]}",
                            kind="endpoint_protocol") from exc
    if not isinstance(content, str):
        raise EndpointError(f"{url} returned non-text content: {content!r}", kind="endpoint_protocol")
    return content
