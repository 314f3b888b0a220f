"""Outpatient clinic front desk (Riverbend Outpatient Clinic): bookings, referrals, refills, pre-auths, fees."""

from importlib.resources import files

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

_HERE = files(__name__)

DOMAIN = Domain(
    name="clinic",
    description="Outpatient clinic front desk: appointment slots, specialist referrals, prescription refills, "
                "imaging pre-authorisations and cancellation fees.",
    schema_sql=_HERE.joinpath("schema.sql").read_text(),
    policy=_HERE.joinpath("policy.md").read_text(),
    today=TODAY.isoformat(),
    populate=populate,
    tools=[*tools_people.TOOLS, *tools_schedule.TOOLS, *tools_care.TOOLS, *tools_billing.TOOLS],
    templates=[*tasks_booking.TEMPLATES, *tasks_care.TEMPLATES, *tasks_fees.TEMPLATES, *tasks_questions.TEMPLATES],
    volatile={"requests": ["note"]},
)
