"""Retried POSTs to OpenAI-compatible endpoints (the user simulator, the judge, an API agent), in one place.

A rate-limited or briefly failing endpoint must not turn episodes into system errors, and a failing one must
not be hammered by every concurrent episode at once. So:

- Retried: connection failures, an attempt that does not finish within `timeout_s` (a hung server becomes a
  timeout, then a retry), HTTP 429 and 5xx. Not retried: any other non-2xx answer, which a retry cannot fix;
  it raises an `EndpointError` of kind "endpoint_rejected" naming the status and the start of the body.
- The wait before a retry: the server's Retry-After (delay-seconds or an HTTP-date), capped at
  `max_retry_after_s`, plus up to `backoff_s` of jitter (episodes told the same wait do not come back
  together); without Retry-After, exponential backoff with full jitter: uniform in
  [0, min(max_backoff_s, backoff_s * 2**(retry - 1))].
- Giving up: a retry whose wait would end more than `retry_budget_s` after the first attempt began is not
  made (nor one past `max_retries`, when set); the failure then raises `EndpointTimeout` when the last
  attempt timed out, else `EndpointError`. Both are `EnvSystemError`s: a system error, never a reward of 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from envs.errors import EndpointError, EndpointTimeout

log = logging.getLogger(__name__)

BODY_EXCERPT = 300  # characters of an answer's body quoted in errors
RETRY_SETTINGS = ("retry_budget_s", "backoff_s", "max_backoff_s", "max_retry_after_s")


class RetryPolicy(BaseModel):
    """How one endpoint's requests are timed out and retried. Unknown keys and settings that could never act
    are errors, so a typo or a contradiction in a config stops the run instead of being ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = Field(default=60.0, gt=0, description="one attempt's deadline: connect, send, wait, read")
    retry_budget_s: float = Field(default=120.0, ge=0,
                                  description="no retry's wait ends later than this after the first attempt began")
    max_retries: int | None = Field(default=None, ge=0, description="at most this many retries; None: the budget")
    backoff_s: float = Field(default=1.0, gt=0, description="first retry's backoff window; doubles each retry")
    max_backoff_s: float = Field(default=30.0, gt=0, description="the backoff window stops growing here")
    max_retry_after_s: float = Field(default=60.0, ge=0, description="a server's Retry-After is honoured up to this")

    @model_validator(mode="after")
    def _every_setting_can_act(self) -> RetryPolicy:
        if self.backoff_s > self.max_backoff_s:
            raise ValueError(f"backoff_s={self.backoff_s} exceeds max_backoff_s={self.max_backoff_s}: "
                             "the cap would replace it from the first retry")
        if self.max_retry_after_s > self.retry_budget_s:
            raise ValueError(f"max_retry_after_s={self.max_retry_after_s} exceeds retry_budget_s="
                             f"{self.retry_budget_s}: a wait that long would never be made")
        # a setting at its default is what a saved config holds, and acts no differently
        changed = sorted(name for name in self.model_fields_set & set(RETRY_SETTINGS)
                         if getattr(self, name) != type(self).model_fields[name].default)
        if self.max_retries == 0 and (set_ := changed):
            raise ValueError(f"max_retries=0 never retries, so {', '.join(set_)} cannot act: drop them")
        return self


@dataclasses.dataclass(frozen=True)
class _Retryable:
    """Why an attempt failed in a way a retry may fix, and the wait the server asked for, if any."""

    reason: str
    timed_out: bool = False
    retry_after_s: float | None = None


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks to wait (delay-seconds or an HTTP-date, 0 when it has passed);
    None when absent or unreadable, and the caller backs off on its own."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form without a zone parses naive
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retry_delay(policy: RetryPolicy, retry: int, rng: random.Random, server_wait_s: float | None) -> float:
    """The wait before retry number `retry` (1 for the first): see the module's docstring."""
    if server_wait_s is not None:
        return min(server_wait_s, policy.max_retry_after_s) + rng.uniform(0.0, policy.backoff_s)
    window = min(policy.max_backoff_s, policy.backoff_s * 2.0 ** min(retry - 1, 64))
    return rng.uniform(0.0, window)


async def _attempt(http: httpx.AsyncClient, url: str, body: Mapping[str, Any],
                   timeout_s: float) -> httpx.Response | _Retryable:
    """One POST: the 2xx response, or why it failed retryably. A non-retryable answer raises."""
    try:
        async with asyncio.timeout(timeout_s):
            response = await http.post(url, json=body)
    except (TimeoutError, httpx.TimeoutException):
        return _Retryable(f"timed out after {timeout_s:g} s", timed_out=True)
    except httpx.TransportError as error:
        return _Retryable(f"{type(error).__name__}: {error}")
    excerpt = response.text[:BODY_EXCERPT]
    if response.status_code == 429 or response.status_code >= 500:
        return _Retryable(f"HTTP {response.status_code}: {excerpt}",
                         retry_after_s=retry_after_s(response.headers.get("Retry-After")))
    if not response.is_success:
        raise EndpointError(f"{url} answered HTTP {response.status_code} (not retried): {excerpt}",
                            kind="endpoint_rejected")
    return response


async def post_with_retries(http: httpx.AsyncClient, url: str, body: Mapping[str, Any], policy: RetryPolicy,
                            rng: random.Random) -> httpx.Response:
    """POSTs `body` as JSON to `url` until a 2xx answer, retrying as `policy` says; see the module's docstring."""
    start = time.monotonic()
    attempts = 0
    while True:
        outcome = await _attempt(http, url, body, policy.timeout_s)
        if isinstance(outcome, httpx.Response):
            return outcome
        attempts += 1  # the retry after attempt n is retry n
        delay = retry_delay(policy, attempts, rng, outcome.retry_after_s)
        elapsed = time.monotonic() - start
        if (policy.max_retries is not None and attempts > policy.max_retries) \
                or elapsed + delay > policy.retry_budget_s:
            error = EndpointTimeout if outcome.timed_out else EndpointError
            raise error(f"{url} failed on {attempts} attempts over {elapsed:.1f} s (retry budget "
                        f"{policy.retry_budget_s:g} s, max_retries {policy.max_retries}); last: {outcome.reason}")
        log.info("%s: %s; retry %d in %.2f s", url, outcome.reason, attempts, delay)
        await asyncio.sleep(delay)
