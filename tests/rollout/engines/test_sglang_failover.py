"""A server process killed mid-batch: its requests move to the survivors; with every server dead the
client raises EngineError (a system error), never returns a made-up generation."""

import asyncio
import signal
import subprocess

import pytest

from rollout.engines.protocol import EngineError, SamplingParams
from rollout.engines.sglang import SGLangEngine
from tests.rollout.sglang_stub_support import command, free_port, wait_healthy

SAMPLING = SamplingParams(max_new_tokens=8, stop_token_ids=(7,))


@pytest.fixture
def processes():
    ports = [free_port() for _ in range(3)]
    running = [subprocess.Popen(command("--port", str(p), "--delay-s", "0.4")) for p in ports]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        for url in urls:
            wait_healthy(url)
        yield running, urls
    finally:
        for process in running:
            process.kill()
            process.wait()


def test_killed_server_mid_batch_is_rerouted_then_all_dead_raises(processes):
    running, urls = processes

    async def batch():
        engine = SGLangEngine.from_urls(urls, max_attempts=3, backoff_s=0.05, cooldown_s=60.0)
        try:
            requests = [asyncio.create_task(engine.generate([k], SAMPLING, session_id=f"ep{k}")) for k in range(9)]
            await asyncio.sleep(0.2)  # all nine are in flight, three per server
            running[0].send_signal(signal.SIGKILL)
            generations = await asyncio.gather(*requests)
            victim = engine.pool.servers[0]
            moved_to = engine.pool.acquire("ep0")  # the episode first routed to the dead server
            for process in running[1:]:
                process.send_signal(signal.SIGKILL)
            with pytest.raises(EngineError, match="failed 3 times") as error:
                await engine.generate([1], SAMPLING, session_id="ep1")
            return generations, victim, moved_to, str(error.value)
        finally:
            await engine.close()

    generations, victim, moved_to, error = asyncio.run(batch())
    assert [g.output_ids[0] for g in generations] == [100 + k for k in range(9)]  # every request answered
    assert victim.failures >= 1 and "connection failed" in victim.last_error
    assert moved_to.url != urls[0]
    assert "connection failed" in error and "GET /health" in error  # what broke and what to check
