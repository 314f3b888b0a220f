"""Everything a domain folder imports: the small, stable surface for domain authors (see envs/README.md)."""

from mcp.server.mcpserver.exceptions import ToolError

from envs.arguments import IsoDate, SearchText
from envs.domain import Domain
from envs.money_and_dates import date_phrases, days_after, money_phrases, spoken_date
from envs.sandbox import Sandbox
from envs.service_desk import AmountConcerned, CallerGate, Escalations, Proof, must_exist, shown, to_cents, usd
from envs.tasks import DecisionNote, Fact, Rubric, Split, TaskKind, ToolCall, UserScenario
from envs.templates import GenContext, TaskDraft, TaskTemplate, call, template

__all__ = ["AmountConcerned", "CallerGate", "DecisionNote", "Domain", "Escalations", "Fact", "GenContext", "IsoDate",
           "Proof", "Rubric", "Sandbox", "SearchText", "Split", "TaskDraft", "TaskKind", "TaskTemplate", "ToolCall",
           "ToolError", "UserScenario", "call", "date_phrases", "days_after", "money_phrases", "must_exist", "shown",
           "spoken_date", "template", "to_cents", "usd"]
