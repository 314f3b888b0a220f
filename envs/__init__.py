"""Environments: sandboxed business backends, MCP tools, simulated users and final-state verifiers.

No JAX and no import of `rollout` or `tbjax` (enforced by import-linter).

Public API:
    load_tasks(domain=None, split=None) -> list[Task]      sealed tasks (golden hashes computed)
    read_jsonl(path) / write_jsonl(tasks, path)            tasks of your own, one Task per line
    await open_session(task, user=ScriptedUser, judge=None)  one episode: backend, MCP client, user
    await session.close() -> Verdict                        grade the final state and the replies
    builtin_domains() / known_domains()                    built-in domains (envs/domains/<name>/) / all of them
    get_domain(name)                                       by name, or "module:attr" naming a Domain of your own
Domains of your own: entry points of the group "tbjax.domains", or "module:attr" wherever a name goes
(envs/registry.py).
See envs/README.md for the domain SDK.
"""

from envs.errors import EnvSystemError, InvalidTaskError
from envs.loading import load_tasks, read_jsonl, write_jsonl
from envs.registry import DomainError, UnknownDomainError, builtin_domains, get_domain, known_domains
from envs.session import BuiltinSession, EnvironmentSession, open_session
from envs.tasks import Rubric, Split, Task, TaskKind, ToolCall, UserScenario
from envs.verdict import DiffEntry, RubricResult, Verdict

__all__ = [
    "BuiltinSession", "DiffEntry", "DomainError", "EnvSystemError", "EnvironmentSession", "InvalidTaskError", "Rubric",
    "RubricResult", "Split", "Task", "TaskKind", "ToolCall", "UnknownDomainError", "UserScenario", "Verdict",
    "builtin_domains", "get_domain", "known_domains", "load_tasks", "open_session", "read_jsonl", "write_jsonl",
]
