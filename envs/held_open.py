"""An MCP client kept open by a task of its own until asked to stop.

anyio requires a client's context to be entered and left in the same task, while a session's tool calls
come from whatever task runs the episode. So one task enters the context, reports that it is open (or why
it could not open) through a future, and waits for its stop event before leaving it."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

T = TypeVar("T")


async def hold_open(context: AbstractAsyncContextManager[T], ready: asyncio.Future[T], stop: asyncio.Event) -> None:
    """Enters `context`, sets what it yields as `ready`'s result and waits for `stop`. A failure before then
    becomes `ready`'s exception (the opener raises it); a later one is raised from this task."""
    try:
        async with context as value:
            ready.set_result(value)
            await stop.wait()
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc)
            return
        raise
