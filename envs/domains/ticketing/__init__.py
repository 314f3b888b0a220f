"""Live-event ticketing support (Encore Tickets): orders, seats, transfers, resale, refunds, accessibility."""

from envs.domains.ticketing import tasks_questions, tasks_refunds, tasks_tickets, tools_actions, tools_lookup
from envs.domains.ticketing.seed import TODAY, populate
from envs.sdk import Domain

DOMAIN = Domain.in_package(__name__, TODAY, escalations=tools_actions.CASES, populate=populate,
                           tools=[*tools_lookup.TOOLS, *tools_actions.TOOLS],
                           templates=[*tasks_refunds.TEMPLATES, *tasks_tickets.TEMPLATES, *tasks_questions.TEMPLATES])
