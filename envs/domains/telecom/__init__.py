"""Telecom customer care (Northwind Mobile): plans, lines, add-ons, devices, invoices, credits and tickets."""

from importlib.resources import files

from envs.domains.telecom import tasks_changes, tasks_questions, tools
from envs.domains.telecom.seed import TODAY, populate
from envs.sdk import Domain

_HERE = files(__name__)

DOMAIN = Domain(
    name="telecom",
    description="Mobile-operator customer care: plan changes, roaming, add-ons, device insurance, bill credits.",
    schema_sql=_HERE.joinpath("schema.sql").read_text(),
    policy=_HERE.joinpath("policy.md").read_text(),
    today=TODAY.isoformat(),
    populate=populate,
    tools=tools.TOOLS,
    templates=[*tasks_changes.TEMPLATES, *tasks_questions.TEMPLATES],
    volatile={"credits": ["reason"], "tickets": ["summary"]},
)
