"""The training loop on CPU: a resumed run is bitwise the run that never stopped, and a run writes
checkpoints, metrics and an HF export transformers loads."""

import asyncio
import json

import jax
import numpy as np
import pytest
import transformers

from envs import load_tasks, open_session
from envs.tasks import Rubric
from envs.users.scripted import ScriptedUser
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.trainer.loop import build_run, run_steps


def signal_tasks(model_dir, n: int = 6):
    """Information tasks whose rubric a random tiny policy passes about half the time: its reply must
    mention one of every fourth word of the vocabulary. Real tasks, real grading, a learnable signal."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    words = sorted({w.strip().lower() for w in (tokenizer.convert_tokens_to_string([t]) for t in tokenizer.get_vocab())
                    if w.strip().isalpha() and len(w.strip()) >= 3})
    rubric = Rubric(kind="must_mention", phrases=tuple(words[::4]), description="mentions a common word")
    infos = [t for t in load_tasks(domain="telecom", split="train") if t.kind.value == "information"][:n]
    return [t.model_copy(update={"rubrics": [rubric]}) for t in infos]


async def brief_session(task):
    """The real session (sandbox, MCP tools, scripted user, grading) with a one-line system prompt and one
    tool, so that the loop's CPU cost is the loop's and not a 3k-token policy prompt's."""
    session = await open_session(task, user=ScriptedUser)
    session.system_messages = [{"role": "system", "content": "You are a telecom support agent. Be brief."}]
    session.tool_schemas = session.tool_schemas[:1]
    return session


def config_for(root, steps: int):
    return load_config(overrides=[
        f"run.root={root}", "run.name=resume", f"train.steps={steps}", "train.checkpoint_every=1",
        "train.row_len=512", "rollout.max_len=1024", "rollout.deterministic=true", "episode.token_budget=512",
        "episode.max_turns=1",
        "episode.max_tokens_per_turn=16", "groups.groups=2", "groups.group_size=4", "groups.max_extra_rounds=3",
        "optim.learning_rate=1e-4", "grpo.kl_coef=0", "validation.tasks=0",
    ])


def train_for(model_dir, root, steps: int):
    config = config_for(root, steps)
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(run, opener=brief_session))
    return run


def metric_lines(root) -> list[dict]:
    lines = [json.loads(line) for line in (root / "resume" / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in line.items() if not k.startswith("time_") and k != "rollout_tokens_per_s"}
            for line in lines]


@pytest.mark.slow
def test_resume_is_bitwise_the_uninterrupted_run(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    straight = train_for(model_dir, tmp_path / "a", 4)
    train_for(model_dir, tmp_path / "b", 2)  # "killed" after step 2 ...
    resumed = train_for(model_dir, tmp_path / "b", 4)  # ... and started again
    assert int(resumed.state.step) == int(straight.state.step)
    for a, b in zip(jax.tree.leaves(straight.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert metric_lines(tmp_path / "a") == metric_lines(tmp_path / "b")  # same tasks, rewards and losses
    assert any(not line["skipped"] for line in metric_lines(tmp_path / "a"))  # real updates happened
    export = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "a" / "resume" / "export" / "v4")
    assert export.config.model_type == "qwen3"
