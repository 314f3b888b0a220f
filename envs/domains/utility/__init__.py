"""Residential utility billing (Riverbend Power & Water): accounts, premises, meters and readings, tariffs,
bills, adjustments, disputes, payment plans, and connect/disconnect field orders."""

from envs.domains.utility import tasks_billing, tasks_questions, tasks_service, tools_actions, tools_lookup
from envs.domains.utility.seed import TODAY, populate
from envs.sdk import Domain

TOOLS = [tools_lookup.find_account, tools_lookup.verify_holder, tools_lookup.get_account,
         tools_lookup.list_service_points, tools_lookup.get_meter_readings, tools_lookup.list_tariffs,
         tools_lookup.list_bills, tools_lookup.list_payment_plans, tools_actions.submit_meter_reading,
         tools_actions.change_tariff, tools_actions.apply_bill_adjustment, tools_actions.open_dispute,
         tools_actions.create_payment_plan, tools_actions.schedule_service_order, tools_actions.open_case]

DOMAIN = Domain.in_package(__name__, TODAY, escalations=tools_actions.CASES, populate=populate,
                           tools=TOOLS,
                           templates=[*tasks_service.TEMPLATES, *tasks_billing.TEMPLATES, *tasks_questions.TEMPLATES])
