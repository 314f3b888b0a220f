"""Conformance of every built-in domain (discovered automatically): a new folder is tested with no edits here."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

import envs
from envs.tasks import Split, TaskKind
from envs.validate import validate_domain

DOMAINS = sorted(envs.builtin_domains())


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_meets_the_size_contract(name: str) -> None:
    domain = envs.get_domain(name)
    assert len(domain.database.tables) >= 6, "a domain needs 6+ tables"
    assert len(domain.mcp_tools) >= 8, "a domain needs 8+ tools"
    rules = re.findall(r"^\s*\d+\.\s", domain.policy, flags=re.MULTILINE)
    assert len(rules) >= 10, "the policy needs 10+ numbered rules"
    for tool in domain.mcp_tools.values():
        assert tool.description.strip(), f"{name}.{tool.name} needs a docstring"


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_tasks_cover_every_kind_and_hold_out_whole_templates(name: str) -> None:
    tasks = envs.load_tasks(name)
    assert len(tasks) >= 150
    assert set(Counter(t.kind for t in tasks)) == set(TaskKind)
    by_split = {s: {t.template for t in tasks if t.split == s} for s in Split}
    assert by_split[Split.TRAIN] and by_split[Split.HELDOUT]
    assert not by_split[Split.TRAIN] & by_split[Split.HELDOUT]


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_validates_oracle_and_do_nothing_agents(name: str) -> None:
    report = asyncio.run(validate_domain(name))
    assert report.invalid is None
    assert report.failures == []
    assert report.oracle_passed == len(report.tasks) - report.unchecked
    assert report.nothing_passed == report.expected_nothing
