"""What the τ²-bench training tests share: a run config with tasks.suite=tau2 (a YAML of its own: the laptop
default's settings choose built-in tasks, which a τ² run refuses), and τ²'s venv (tests/tau2_support.py: the
tests that run τ² skip with the reason where TBJAX_TAU2_PYTHON is not set)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tbjax.config import Config, load_config

NO_VENV = "/nowhere/tau2-venv/bin/python"  # settings that never list τ²'s tasks need no venv


def tau2_tree(python: str = NO_VENV, user_url: str = "http://127.0.0.1:9/v1") -> dict[str, Any]:
    """The smallest tau2 config: the tiny policy on retail (one worker: one start), its user at `user_url`."""
    return {"model": {"path": "tiny:qwen3"}, "tasks": {"suite": "tau2"},
            "tau2": {"python": python, "domains": ["retail"], "workers": 1,
                     "user": {"base_url": user_url, "model": "directed-user", "timeout_s": 30, "max_retries": 0}}}


def tau2_run_config(directory: Path, tree: dict[str, Any], overrides: Sequence[str] = ()) -> Config:
    """`tree` written to directory/tau2.yaml and loaded with `overrides`, as `--config` loads a file."""
    file = directory / "tau2.yaml"
    file.write_text(yaml.safe_dump(tree))
    return load_config(file, overrides)
