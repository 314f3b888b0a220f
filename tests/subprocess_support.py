"""The environment of the subprocesses tests start (the CLI, the pipeline, an installed wheel): nothing of the
suite's own process (its 24 forced CPU devices, whatever venv is on PATH) but the run's compilation cache."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# tests/conftest.py points these at one fresh directory per run; a subprocess shares it
COMPILATION_CACHE = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")


def clean_env(**overrides: str) -> dict[str, str]:
    """The checkout on PYTHONPATH, the system's PATH, JAX on the CPU and the run's compilation cache; then
    `overrides`."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    env.update({key: os.environ[key] for key in COMPILATION_CACHE if key in os.environ})
    return {**env, **overrides}
