"""Public library member services (Millbrook County Libraries): members, branches, catalogue and copies,
loans and renewals, holds, fines and waivers, inter-library requests and room bookings."""

from envs.domains.library import (
    tasks_loans,
    tasks_questions,
    tasks_requests,
    tasks_rooms,
    tools_account,
    tools_circulation,
    tools_rooms,
)
from envs.domains.library.seed import TODAY, populate
from envs.sdk import Domain

DOMAIN = Domain.in_package(__name__, TODAY, populate=populate,
                           tools=[*tools_account.TOOLS, *tools_circulation.TOOLS, *tools_rooms.TOOLS],
                           templates=[*tasks_loans.TEMPLATES, *tasks_requests.TEMPLATES, *tasks_rooms.TEMPLATES,
                                      *tasks_questions.TEMPLATES])
