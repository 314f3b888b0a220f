"""Everything a domain folder imports: the small, stable surface for domain authors (see envs/README.md)."""

from mcp.server.mcpserver.exceptions import ToolError

from envs.arguments import IsoDate, SearchText
from envs.domain import Domain
from envs.sandbox import Sandbox
from envs.tasks import DecisionNote, Fact, Rubric, Split, TaskKind, ToolCall, UserScenario
from envs.templates import GenContext, TaskDraft, TaskTemplate, call, template

__all__ = ["DecisionNote", "Domain", "Fact", "GenContext", "IsoDate", "Rubric", "Sandbox", "SearchText", "Split",
           "TaskDraft", "TaskKind", "TaskTemplate", "ToolCall", "ToolError", "UserScenario", "call", "template"]
