"""The `tau2` section: τ²-bench (envs.tau2) as the task suite, with tasks.suite=tau2. GRPO trains on τ²'s train
split, and the held-out evaluation is its test split, which nothing selects from or trains on. τ² runs in a venv
of its own (`python`), and its simulated user is an LLM behind an OpenAI-compatible endpoint (`user`). Its keys are
envs.tau2's own settings (`Tau2Config`), validated as a section."""

from __future__ import annotations

from envs.tau2.config import Tau2Config


class Tau2Section(Tau2Config):
    """Every key is its default unless tasks.suite=tau2, which needs `python` and `user` (tbjax.config checks)."""
