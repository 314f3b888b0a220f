"""ThinkingBox-Bench v1 (microsoft/thinkingbox-data) as an external, evaluation-only suite.

Its README forbids training on the tasks: every task id starts with `TASK_PREFIX` ("thinkingbox/") and
`is_benchmark_task(task_id)` is what the trainer and `rollout.select` use to refuse them.

    suite = ThinkingBoxSuite.load(ThinkingBoxConfig(data=CLONE, python=VENV_PY, user=..., judge=...))
    for task in suite.tasks:                      # envs.Task records, domain "thinkingbox/<domain>"
        await run_episode(task, engine, interpreter, group_id=..., opener=suite.open)

See envs/README.md ("ThinkingBox-Bench") for setup, the validation CLI and the end-of-episode rules.
"""

from envs.thinkingbox.config import ThinkingBoxConfig
from envs.thinkingbox.loading import DOMAINS, TASK_PREFIX, BenchmarkCase, is_benchmark_task, load_cases
from envs.thinkingbox.server import ServerError
from envs.thinkingbox.session import ThinkingBoxSession, ThinkingBoxSuite

__all__ = ["DOMAINS", "TASK_PREFIX", "BenchmarkCase", "ServerError", "ThinkingBoxConfig", "ThinkingBoxSession",
           "ThinkingBoxSuite", "is_benchmark_task", "load_cases"]
