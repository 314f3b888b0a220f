"""Fixtures for fault tests: the local OpenAI-compatible server of the envs tests (`fake_openai`)."""

from tests.envs.conftest import fake_openai  # noqa: F401 (the fixture)
