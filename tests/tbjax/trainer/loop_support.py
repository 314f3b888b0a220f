"""A short real training run on CPU, shared by the loop's tests (resume, validation, handover, mismatch and
refit, multi-process, checkpoint faults, LoRA serving): tasks with a learnable signal, brief real sessions and
the tiny run's settings."""

import transformers

from envs import load_tasks, open_session
from envs.tasks import Rubric
from envs.users.scripted import ScriptedUser
from tbjax.config import load_config


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
    """The tiny run's config: `steps` steps under root/resume, a checkpoint every step, two groups of four
    one-turn episodes, deterministic rollouts, no KL and no validation."""
    return load_config(overrides=[
        f"run.root={root}", "run.name=resume", f"train.steps={steps}", "train.checkpoint_every=1",
        "train.row_len=512", "rollout.max_len=1024", "rollout.deterministic=true", "episode.token_budget=512",
        "episode.max_turns=1",
        "episode.max_tokens_per_turn=16", "groups.groups=2", "groups.group_size=4", "groups.max_extra_rounds=3",
        "optim.learning_rate=1e-4", "grpo.kl_coef=0", "validation.tasks=0",
    ])
