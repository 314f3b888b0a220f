"""A short real training run on CPU, shared by the loop's tests (resume, validation, handover, mismatch and
weight probe, multi-process, checkpoint faults, LoRA serving): tasks with a learnable signal, brief real sessions and
the tiny run's settings."""

import asyncio
import json

from envs import open_session
from envs.users.scripted import ScriptedUser
from tbjax.assets.signal_tasks import signal_tasks
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import Run, build_run

__all__ = ["brief_session", "config_for", "metric_lines", "signal_tasks", "train_for"]


async def brief_session(task):
    """The real session (sandbox, MCP tools, scripted user, grading) with a one-line system prompt and one
    tool, so that the loop's CPU cost is the loop's and not a 3k-token policy prompt's."""
    session = await open_session(task, user=ScriptedUser)
    session.system_messages = [{"role": "system", "content": "You are a telecom support agent. Be brief."}]
    session.tool_schemas = session.tool_schemas[:1]
    return session


def config_for(root, steps: int, *overrides: str):
    """The tiny run's config: `steps` steps under root/resume, a checkpoint every step, two groups of four
    one-turn episodes, deterministic rollouts, no KL and no validation; then `overrides`."""
    return load_config(overrides=[
        f"run.root={root}", "run.name=resume", f"train.steps={steps}", "train.checkpoint_every=1",
        "train.row_len=512", "rollout.max_len=1024", "rollout.deterministic=true", "episode.token_budget=512",
        "episode.max_turns=1",
        "episode.max_tokens_per_turn=16", "groups.groups=2", "groups.group_size=4", "groups.max_extra_rounds=3",
        "optim.learning_rate=1e-4", "grpo.kl_coef=0", "validation.tasks=0", *overrides,
    ])


def train_for(model_dir, root, steps: int, *overrides: str) -> Run:
    """`config_for`'s run of `steps` steps on the signal tasks (resumed where root holds a checkpoint)."""
    config = config_for(root, steps, *overrides)
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    return run


def metric_lines(root) -> list[dict]:
    """The steps' records under root/resume, without what timing decides (wall seconds, rates, idle fractions)."""
    lines = [json.loads(line) for line in (root / "resume" / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items()
             if not k.startswith("time_") and not k.endswith("_fraction") and k != "rollout_tokens_per_s"}
            for line in lines]
