"""ThinkingBox-Bench tasks from a local clone: the release test list -> `BenchmarkCase`s -> `envs.Task`s.

The benchmark is evaluation only (its README forbids training on it), so every task id carries the
`thinkingbox/` prefix and `is_benchmark_task` lets the trainer and `rollout.select` refuse them.

Layout read (paths relative to the clone): `dataset/test_case/**.py` (test functions, see docstrings.py),
`dataset/scenario/<name>.yaml` (world_state per server, tool allow-list, bot_instructions),
`dataset/agent/think.yaml` (the agent's system instructions, which define the `<DONE>` end marker) and
`servers/servers.yaml` (how each domain server is started).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from envs.errors import InvalidTaskError
from envs.tasks import Fact, Split, Task, TaskKind, ToolCall, UserScenario
from envs.thinkingbox.config import ThinkingBoxConfig
from envs.thinkingbox.docstrings import SAFE_LOADER, TestFunction, read_test_module
from envs.thinkingbox.merge import server_config

TASK_PREFIX = "thinkingbox/"
AGENT = "think"
DEFAULT_MAX_USER_TURNS = 10
# Checks a test body may call: the state-hash check and the yes/no rubric check. Anything else is refused.
SUPPORTED_CHECKS = frozenset({"validate_database", "validate_rubrics_yesno"})
# Scenario (server) -> our domain label, in the release's five domains.
DOMAINS = {
    "sandbox_external_retail": "retail",
    "external_booking_v1": "travel_hospitality",
    "sandbox_auto_insurance": "auto_insurance",
    "sandbox_neobank_support_v1": "neobank_support",
    "sandbox_consulting": "consulting",
}


def is_benchmark_task(task_id: str) -> bool:
    """True for ThinkingBox-Bench tasks, which must never be trained on or selected for training."""
    return task_id.startswith(TASK_PREFIX)


@dataclass(frozen=True)
class Scenario:
    name: str
    world_state: dict[str, Any]
    tools: tuple[str, ...]  # the agent's tool allow-list
    bot_instructions: str


@dataclass(frozen=True)
class ServerCommand:
    module: str  # run as `<python> -m <module>`
    env: dict[str, str]


@dataclass(frozen=True)
class BenchmarkCase:
    """Everything one ThinkingBox task needs at run time."""

    id: str
    domain: str
    server: str
    command: ServerCommand
    scenario: Scenario
    agent_instructions: str
    query: str
    user_context: str
    max_user_turns: int
    config: dict[str, Any]  # the merged `__reserved__init` config (shared: never mutate)
    golden: tuple[ToolCall, ...]
    rubrics: tuple[str, ...]  # yes/no questions about the agent's last reply

    @cached_property
    def task(self) -> Task:
        return to_task(self)


def to_task(case: BenchmarkCase) -> Task:
    """The `envs.Task` record the episode loop and metrics see (grading stays with the case)."""
    return Task(
        id=case.id, domain=case.domain, split=Split.HELDOUT,
        # Task requires a kind; the benchmark has none, so it is only "changes nothing" vs "changes something".
        kind=TaskKind.INFORMATION if not case.golden else TaskKind.DIRECT,
        template=f"thinkingbox:{case.scenario.name}",
        scenario=UserScenario(
            opening=case.query, goal=case.query, persona="the person described in your situation",
            facts=(Fact(name="your situation, details and rules", value=case.user_context,
                        keywords=("situation", "details")),)),
        golden_path=case.golden,
        changes_state=None,  # known only from the server's golden replay
    )


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is the data path a complete thinkingbox-data clone?")
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


class BenchmarkLoader:
    """Reads a clone once: scenarios, server commands and modules are cached across cases."""

    def __init__(self, config: ThinkingBoxConfig) -> None:
        self.config = config
        self.root = config.data
        if not (self.root / "dataset" / "test_case").is_dir():
            raise FileNotFoundError(f"{self.root} has no dataset/test_case: pass the path of a local clone of "
                                    "microsoft/thinkingbox-data (--data, or TBJAX_THINKINGBOX_DATA in tests)")
        self._scenarios: dict[str, Scenario] = {}
        agent = _read_yaml(self.root / "dataset" / "agent" / f"{AGENT}.yaml")
        self.agent_instructions: str = agent["system_instructions"]
        servers = _read_yaml(self.root / "servers" / "servers.yaml")["servers"]
        self.commands = {name: _server_command(name, spec) for name, spec in servers.items()}
        self.files = {p.name: p for p in sorted((self.root / "dataset" / "test_case").rglob("*.py"))}

    def scenario(self, name: str) -> Scenario:
        if name not in self._scenarios:
            raw = _read_yaml(self.root / "dataset" / "scenario" / f"{name}.yaml")
            self._scenarios[name] = Scenario(name=name, world_state=raw["world_state"],
                                             tools=tuple(t["name"] for t in raw.get("tools") or ()),
                                             bot_instructions=raw.get("bot_instructions") or "")
        return self._scenarios[name]

    def test_list(self) -> list[tuple[str, str]]:
        """(file name, function name) of every entry of the configured test list, in order."""
        entries = _read_yaml(self.config.test_list_path())
        pairs = []
        for entry in entries:
            file_name, _, function = str(entry).partition(":")
            if not function:
                raise ValueError(f"test list entry {entry!r} is not FILE.py:FUNCTION")
            pairs.append((file_name, function))
        return pairs

    def load(self, limit: int | None = None) -> list[BenchmarkCase]:
        cases: list[BenchmarkCase] = []
        modules: dict[str, Any] = {}
        for file_name, function in self.test_list()[:limit]:
            if file_name not in self.files:
                raise FileNotFoundError(f"test list names {file_name}, which is not under dataset/test_case")
            module = modules.get(file_name) or modules.setdefault(file_name, read_test_module(self.files[file_name]))
            if function not in module.functions:
                raise InvalidTaskError(f"{file_name}:{function}", "no such test function with a `!` docstring")
            cases.append(self._case(file_name, module.header, module.functions[function]))
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise InvalidTaskError(next(i for i in ids if ids.count(i) > 1), "listed twice in the test list")
        return cases

    def _case(self, file_name: str, header: dict[str, Any], test: TestFunction) -> BenchmarkCase:
        task_id = f"{TASK_PREFIX}{Path(file_name).stem}:{test.name}"
        unsupported = sorted(set(test.checks) - SUPPORTED_CHECKS)
        if unsupported:
            raise InvalidTaskError(task_id, f"its test body calls {unsupported}; only {sorted(SUPPORTED_CHECKS)} "
                                            "are implemented by this adapter")
        scenario = self.scenario(test.spec.get("scenario") or header.get("scenario") or "")
        init = test.spec.get("init") or {}
        servers = [name for name in scenario.world_state if name in self.commands]
        if len(servers) != 1:
            raise InvalidTaskError(task_id, f"scenario {scenario.name} must use exactly one known server, "
                                            f"uses {sorted(scenario.world_state)}")
        server = servers[0]
        config = server_config(scenario.world_state, init, server,
                               drop_policy_sources=self.config.drop_policy_sources)
        golden = tuple(ToolCall(tool=step["tool"], args=step.get("parameters") or {})
                       for step in (config.get("golden_test_case") or {}).get("tool_interactions") or ())
        rubrics = tuple(str(q) for q in config.get("rubrics_yesno") or ())
        if rubrics and "validate_rubrics_yesno" not in test.checks:
            raise InvalidTaskError(task_id, "has rubrics_yesno but its body never checks them")
        return BenchmarkCase(
            id=task_id, domain=f"{TASK_PREFIX}{DOMAINS.get(server, server)}", server=server,
            command=self.commands[server], scenario=scenario, agent_instructions=self.agent_instructions,
            query=str(test.spec.get("query") or "").strip(), user_context=str(test.spec.get("user_context") or ""),
            max_user_turns=int(test.spec.get("max_user_sim_turns") or DEFAULT_MAX_USER_TURNS),
            config=config, golden=golden, rubrics=rubrics)


def _server_command(name: str, spec: dict[str, Any]) -> ServerCommand:
    command = list(spec.get("command") or ())
    if len(command) != 3 or command[1] != "-m":
        raise ValueError(f"servers.yaml: server {name} is not started as `python -m MODULE`: {command}")
    return ServerCommand(module=command[2], env={k: str(v) for k, v in (spec.get("env") or {}).items()})


def load_cases(config: ThinkingBoxConfig, limit: int | None = None) -> list[BenchmarkCase]:
    """The cases of the configured test list (the 507-task release by default), first `limit` if given."""
    return BenchmarkLoader(config).load(limit)
