"""Outpatient clinic front desk (Riverbend Outpatient Clinic): bookings, referrals, refills, pre-auths, fees."""

from envs.domains.clinic import (
    tasks_booking,
    tasks_care,
    tasks_fees,
    tasks_questions,
    tools_billing,
    tools_care,
    tools_people,
    tools_schedule,
)
from envs.domains.clinic.seed import TODAY, populate
from envs.sdk import Domain

DOMAIN = Domain.in_package(__name__, TODAY, escalations=tools_billing.REQUESTS, populate=populate,
                           tools=[*tools_people.TOOLS, *tools_schedule.TOOLS, *tools_care.TOOLS, *tools_billing.TOOLS],
                           templates=[*tasks_booking.TEMPLATES, *tasks_care.TEMPLATES, *tasks_fees.TEMPLATES,
                                      *tasks_questions.TEMPLATES])
