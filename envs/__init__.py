"""Environments: sandboxed business backends, MCP tools, simulated users and final-state verifiers.

No JAX and no import of `rollout` or `tbjax` (enforced by import-linter).

Public API:
    load_tasks(domain=None, split=None) -> list[Task]      sealed tasks (golden hashes computed)
    await open_session(task, user=ScriptedUser, judge=None)  one episode: backend, MCP client, user
    await session.close() -> Verdict                        grade the final state and the replies
    builtin_domains() / get_domain(name)                            built-in domains (envs/domains/<name>/)
See envs/README.md for the domain SDK.
"""

from envs.errors import EnvSystemError, InvalidTaskError
from envs.loading import load_tasks, read_jsonl, write_jsonl
from envs.registry import builtin_domains, get_domain
from envs.session import BuiltinSession, EnvironmentSession, open_session
from envs.tasks import Rubric, Split, Task, TaskKind, ToolCall, UserScenario
from envs.verdict import DiffEntry, RubricResult, Verdict

__all__ = [
    "BuiltinSession", "DiffEntry", "EnvSystemError", "EnvironmentSession", "InvalidTaskError", "Rubric",
    "RubricResult", "Split", "Task", "TaskKind", "ToolCall", "UserScenario", "Verdict", "builtin_domains", "get_domain",
    "load_tasks", "open_session", "read_jsonl", "write_jsonl",
]
