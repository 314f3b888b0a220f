"""Telecom customer care (Northwind Mobile): plans, lines, add-ons, devices, invoices, credits and tickets."""

from envs.domains.telecom import tasks_changes, tasks_questions, tools
from envs.domains.telecom.seed import TODAY, populate
from envs.sdk import Domain

DOMAIN = Domain.in_package(__name__, TODAY, escalations=tools.TICKETS, populate=populate,
                           tools=tools.TOOLS,
                           templates=[*tasks_changes.TEMPLATES, *tasks_questions.TEMPLATES])
