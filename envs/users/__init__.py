"""Simulated users: the scripted one (deterministic, CPU default) and the LLM one."""

from envs.users.base import STOP_MARKER, UserSimulator, UserTurn
from envs.users.llm import LlmUser
from envs.users.scripted import ScriptedUser

__all__ = ["STOP_MARKER", "LlmUser", "ScriptedUser", "UserSimulator", "UserTurn"]
