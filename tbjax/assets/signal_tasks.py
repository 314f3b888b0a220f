"""Real tasks with a learnable signal for an untrained policy: what the loop's tests and the training benchmarks
run GRPO on when no warm-started policy is at hand. A random tiny policy's groups on ordinary tasks come back
all-equal (it never writes a tool call), so nothing would be trained; these it passes about half the time."""

from __future__ import annotations

from pathlib import Path

import transformers

from envs import Task, load_tasks
from envs.tasks import Rubric


def signal_tasks(model_dir: str | Path, n: int = 6) -> list[Task]:
    """`n` information tasks of the telecom domain whose rubric is to mention one of every fourth word of the
    policy's vocabulary (`model_dir`'s tokenizer): real tasks and real grading, which a random policy passes
    about half the time."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    words = sorted({w.strip().lower() for w in (tokenizer.convert_tokens_to_string([t]) for t in tokenizer.get_vocab())
                    if w.strip().isalpha() and len(w.strip()) >= 3})
    rubric = Rubric(kind="must_mention", phrases=tuple(words[::4]), description="mentions a common word")
    infos = [t for t in load_tasks(domain="telecom", split="train") if t.kind.value == "information"][:n]
    return [t.model_copy(update={"rubrics": [rubric]}) for t in infos]
