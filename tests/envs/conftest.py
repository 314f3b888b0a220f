"""Fixtures for envs tests: the telecom domain and its sealed tasks (tests/conftest.py provides `fake_openai`,
the local OpenAI-compatible server, to every suite)."""

from __future__ import annotations

import pytest

import envs
from envs.domain import Domain
from envs.tasks import Task


@pytest.fixture(scope="session")
def telecom() -> Domain:
    return envs.get_domain("telecom")


@pytest.fixture(scope="session")
def telecom_tasks() -> list[Task]:
    return envs.load_tasks("telecom")
