"""Golden paths an agent can actually follow: every id a golden call uses was said by the user or returned
by an earlier golden call. A path that uses an id the conversation never shows cannot be imitated (the
warm start's demonstrations are these paths) and teaches a policy to invent ids."""

from __future__ import annotations

import json
import re

from envs import builtin_domains, load_tasks
from envs.golden import initial_sandbox

ID_LIKE = re.compile(r"\d{4}")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")  # dates are worked out from phrases ("next Tuesday"), not copied


def unobservable_ids(task, domain) -> list[str]:
    sandbox = initial_sandbox(domain, task)
    shown = " ".join([task.scenario.opening, *(f.value for f in task.scenario.facts)])
    missing = []
    try:
        for call in task.golden_path:
            missing += [f"{call.tool}({name}={value!r})" for name, value in call.args.items()
                        if isinstance(value, str) and ID_LIKE.search(value) and not ISO_DATE.fullmatch(value)
                        and value not in shown]
            shown += json.dumps(domain.invoke(sandbox, call.tool, call.args), default=str)
    finally:
        sandbox.close()
    return missing


def test_every_golden_call_uses_only_ids_the_conversation_has_shown() -> None:
    domains = builtin_domains()
    failures = {task.id: missing for task in load_tasks() if task.domain in domains
                if (missing := unobservable_ids(task, domains[task.domain]))}
    assert not failures, f"{len(failures)} tasks use ids nobody showed, e.g. {next(iter(failures.items()))}"
