"""Admin calls and generates survive a kept-alive connection the server closes under them: a real HTTP server
on 127.0.0.1 that drops the first `drops` requests unanswered (what uvicorn's 5 s keep-alive close looks like
to a client that sent just then) and answers the rest."""

from __future__ import annotations

import asyncio
import json

import pytest

from rollout.engines.protocol import EngineError, SamplingParams
from rollout.engines.sglang import SGLangEngine

GENERATED = {"text": "<7>", "output_ids": [7], "meta_info": {
    "id": "r", "finish_reason": {"type": "length"}, "prompt_tokens": 3, "completion_tokens": 1,
    "cached_tokens": 0, "output_token_logprobs": [[-0.25, 7, None]]}}


async def serve(drops: int, reply: dict | None = None) -> tuple[asyncio.base_events.Server, list[str]]:
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
            b"content-length")))
        await reader.readexactly(length)
        seen.append(head.split(b" ")[1].decode())
        if len(seen) > drops:
            body = json.dumps(reply or {}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0), seen


@pytest.mark.parametrize("drops", [1, 2])
def test_a_dropped_admin_request_is_sent_once_more(drops: int) -> None:
    async def scenario() -> list[str]:
        server, seen = await serve(drops)
        port = server.sockets[0].getsockname()[1]
        engine = SGLangEngine.from_urls([f"http://127.0.0.1:{port}"])
        try:
            if drops == 1:
                await engine.resume_memory(["weights"])
            else:  # a server that drops every try is reported, not retried forever
                with pytest.raises(EngineError, match="unreachable"):
                    await engine.resume_memory(["weights"])
        finally:
            await engine.close()
            server.close()
        return seen

    assert asyncio.run(scenario()) == ["/resume_memory_occupation"] * 2


def test_a_dropped_generate_is_sent_once_more_before_it_counts_against_the_server() -> None:
    async def scenario():
        server, seen = await serve(1, GENERATED)
        port = server.sockets[0].getsockname()[1]
        engine = SGLangEngine.from_urls([f"http://127.0.0.1:{port}"], max_attempts=1)
        try:
            generation = await engine.generate([1, 2, 3], SamplingParams(max_new_tokens=1, temperature=0.0))
        finally:
            await engine.close()
            server.close()
        return generation, seen

    generation, seen = asyncio.run(scenario())
    assert seen == ["/generate"] * 2 and generation.output_ids == (7,) and generation.logprobs == (-0.25,)
