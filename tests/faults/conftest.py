"""Fixtures for fault tests: one real `python -m tbjax.serve` on a tiny Qwen3 shared by the tests that attack a
server (`tiny_server`), and an in-process deterministic engine on it (`engine`). The local OpenAI-compatible
server (`fake_openai`) comes from tests/conftest.py."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import portpicker
import pytest

from rollout.launch_sglang import LaunchConfig, Supervisor
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import from_pretrained
from tests.faults.serve_support import greedy_answer

SERVED_MAX_LEN = 128


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tiny_dir) -> Path:
    return tiny_dir("qwen3")


@pytest.fixture(scope="session")
def tiny_server(tiny_qwen3_dir) -> Iterator[tuple[str, Any]]:
    """(URL, GREEDY's answer before any attack) of a tbjax.serve started by the SGLang launcher on 127.0.0.1."""
    config = LaunchConfig(model_path=str(tiny_qwen3_dir), tp=1, servers=1, port=portpicker.pick_unused_port(),
                          server_command=(sys.executable, "-m", "tbjax.serve"), startup_timeout_s=120, poll_s=0.25,
                          extra_args=("--slots", "2", "--max-len", str(SERVED_MAX_LEN)))
    supervisor = Supervisor(config)
    supervisor.start()
    url = supervisor.urls[0]
    yield url, greedy_answer(url)
    supervisor.stop()


@pytest.fixture(scope="module")
def engine(tiny_qwen3_dir) -> Iterator[JaxEngine]:
    """Deterministic: a request's tokens do not depend on what else runs, so 'unaffected' means equal, and
    decode attends over the whole cache row, masked positions included."""
    engine = JaxEngine(from_pretrained(tiny_qwen3_dir), slots=2, max_len=64, deterministic=True, decode_steps=4)
    yield engine
    asyncio.run(engine.close())
