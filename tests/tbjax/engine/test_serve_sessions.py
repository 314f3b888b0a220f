"""Sessions over HTTP: `python -m tbjax.serve --run-config` serves a policy as a run's rollout section configures
its engine, and in deterministic mode holds one cache row per episode, as the trainer's in-process engine does.
Through the SGLang client (its session header and /end_session), an episode's second turn reuses its own first
turn whatever else runs and samples what an in-process engine of the same config samples; ended sessions free
their rows; bad session input is answered 400 and the server serves on."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import portpicker
import pytest

from rollout.engines.sglang import SGLangEngine
from rollout.engines.sglang_wire import END_SESSION_PATH, SESSION_HEADER, SESSION_HELD_HEADER
from rollout.launch_sglang import LaunchConfig, Supervisor
from tbjax.config import Config, load_config
from tbjax.engine.configured import embedded_engine
from tbjax.models.placement import load_served_policy
from tests.subprocess_support import clean_env
from tests.tbjax.engine.sessions_support import prompt, two_turns

# the smoke config's engine, small: two rows, so that sessions outnumber them
OVERRIDES = ["rollout.slots=2", "rollout.max_len=128", "rollout.decode_steps=4", "episode.token_budget=120",
             "train.row_len=128"]
HOLD_S = 30.0  # the server's session hold: a session never ended keeps its row this long


@pytest.fixture(scope="module")
def run_config(tmp_path_factory) -> tuple[Config, Path]:
    config = load_config("smoke", OVERRIDES)
    assert config.rollout.deterministic
    path = tmp_path_factory.mktemp("run") / "config.yaml"
    path.write_text(config.to_yaml())
    return config, path


@pytest.fixture(scope="module")
def server(tiny_dir, run_config) -> Iterator[str]:
    launch = LaunchConfig(model_path=str(tiny_dir("qwen3")), tp=1, servers=1, port=portpicker.pick_unused_port(),
                          server_command=(sys.executable, "-m", "tbjax.serve"), startup_timeout_s=120, poll_s=0.25,
                          extra_args=("--run-config", str(run_config[1])))
    supervisor = Supervisor(launch)
    supervisor.start()
    yield supervisor.urls[0]
    supervisor.stop()


def test_an_episode_over_http_samples_what_the_in_process_engine_samples(server, run_config, tiny_dir):
    """Five sessions on two rows: the episode's second turn waits for its own row and reuses it, and its tokens
    equal those of an in-process engine built from the same config (embedded_engine)."""
    config, _ = run_config

    async def alone():
        engine = embedded_engine(load_served_policy(tiny_dir("qwen3"), config), config.rollout, "0")
        result = await two_turns(engine, "episode", 5)
        await engine.close()
        return result

    async def crowded():
        engine = SGLangEngine.from_urls([server])
        try:  # sessions that were never ended would hold both rows for HOLD_S
            return await asyncio.wait_for(asyncio.gather(
                two_turns(engine, "episode", 5, pause_s=0.2), *(two_turns(engine, f"other-{i}", 40 + i)
                                                                 for i in range(4))), timeout=HOLD_S - 5)
        finally:
            await engine.close()

    (first, second), ((first_h, second_h), *others) = asyncio.run(alone()), asyncio.run(crowded())
    assert second.cached_tokens == second_h.cached_tokens == 20 + 8 - 1  # its own turn, all but the last token
    assert (first.output_ids, second.output_ids) == (first_h.output_ids, second_h.output_ids)
    assert (first.logprobs, second.logprobs) == (first_h.logprobs, second_h.logprobs)
    assert all(turn.cached_tokens == 20 + 8 - 1 for _, turn in others)


def test_ended_sessions_free_their_rows_at_once(server):
    """Both rows held by sessions, then ended through the client: two new sessions start without waiting for
    the hold to run out."""
    async def scenario():
        engine = SGLangEngine.from_urls([server])
        try:
            await asyncio.gather(*(two_turns(engine, f"held-{i}", 60 + i) for i in range(2)))
            return await asyncio.wait_for(asyncio.gather(*(two_turns(engine, f"next-{i}", 70 + i) for i in range(2))),
                                          timeout=HOLD_S / 3)
        finally:
            await engine.close()

    assert all(second.cached_tokens > 0 for _, second in asyncio.run(scenario()))


def test_session_headers_and_bad_session_input(server):
    body = {"input_ids": prompt(3, 10), "sampling_params": {"max_new_tokens": 2, "temperature": 0.0}}
    held = httpx.post(f"{server}/generate", json=body, headers={SESSION_HEADER: "s-1"}, timeout=60)
    assert held.status_code == 200 and held.headers.get(SESSION_HELD_HEADER) == "1"
    plain = httpx.post(f"{server}/generate", json=body, timeout=60)
    assert plain.status_code == 200 and SESSION_HELD_HEADER not in plain.headers
    too_long = httpx.post(f"{server}/generate", json=body, headers={SESSION_HEADER: "s" * 300}, timeout=60)
    assert too_long.status_code == 400 and "session header" in too_long.json()["error"]
    for bad in ({}, {"session_id": ""}, {"session_id": 7}):
        answer = httpx.post(f"{server}{END_SESSION_PATH}", json=bad, timeout=60)
        assert answer.status_code == 400 and answer.json()["success"] is False, bad
    ended = httpx.post(f"{server}{END_SESSION_PATH}", json={"session_id": "s-1"}, timeout=60)
    assert ended.status_code == 200 and ended.json() == {"success": True}
    assert httpx.post(f"{server}/generate", json=body, timeout=60).json()["output_ids"] == plain.json()["output_ids"]


@pytest.mark.parametrize("flag", [["--slots", "4"], ["--max-len", "256"], ["--dtype", "bfloat16"]])
def test_engine_flags_beside_a_run_config_are_refused(flag, run_config, tiny_dir):
    result = subprocess.run([sys.executable, "-m", "tbjax.serve", "--model", str(tiny_dir("qwen3")), "--run-config",
                             str(run_config[1]), *flag], capture_output=True, text=True, timeout=60, env=clean_env())
    assert result.returncode == 2 and f"{flag[0]}: --run-config sets the engine as the run did" in result.stderr


def test_an_unreadable_run_config_is_refused(tmp_path, tiny_dir):
    bad = tmp_path / "config.yaml"
    bad.write_text("rollout:\n  slots: many\n")
    result = subprocess.run([sys.executable, "-m", "tbjax.serve", "--model", str(tiny_dir("qwen3")), "--run-config",
                             str(bad)], capture_output=True, text=True, timeout=60, env=clean_env())
    assert result.returncode == 2
    assert "--run-config: invalid config" in result.stderr and "rollout.slots" in result.stderr
