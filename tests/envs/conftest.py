"""Fixtures for envs tests: the telecom domain and its sealed tasks, and a local OpenAI-compatible server
(`fake_openai`, from tests/envs/fake_openai_support.py)."""

from __future__ import annotations

import pytest

import envs
from envs.domain import Domain
from envs.tasks import Task
from tests.envs.fake_openai_support import fake_openai  # noqa: F401 (the fixture)


@pytest.fixture(scope="session")
def telecom() -> Domain:
    return envs.get_domain("telecom")


@pytest.fixture(scope="session")
def telecom_tasks() -> list[Task]:
    return envs.load_tasks("telecom")
