"""Shared set-up of the ThinkingBox adapter tests: a synthetic clone served by `fake_tb_server` (always
available), and the real clone when TBJAX_THINKINGBOX_DATA and TBJAX_THINKINGBOX_PYTHON are set."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from envs.thinkingbox import ThinkingBoxConfig

FIXTURES = Path(__file__).resolve().parent
DATA_ENV, PYTHON_ENV = "TBJAX_THINKINGBOX_DATA", "TBJAX_THINKINGBOX_PYTHON"


def synthetic_clone(tmp: Path) -> Path:
    """A copy of the fixture clone whose servers.yaml starts `fake_tb_server` from this folder."""
    clone = tmp / "clone"
    shutil.copytree(FIXTURES / "clone", clone)
    template = (clone / "servers" / "servers.yaml.in").read_text()
    (clone / "servers" / "servers.yaml").write_text(template.replace("@FIXTURES@", str(FIXTURES)))
    return clone


def synthetic_config(clone: Path, **overrides: object) -> ThinkingBoxConfig:
    settings: dict[str, object] = {"data": clone, "python": sys.executable, "test_list": "releases/mini/testlist.yaml",
                                   "start_timeout_s": 60.0, "call_timeout_s": 10.0, **overrides}
    return ThinkingBoxConfig(**settings)


def real_config(**overrides: object) -> ThinkingBoxConfig:
    """The real clone's config, or a clean skip when the environment does not name one."""
    data, python = os.environ.get(DATA_ENV), os.environ.get(PYTHON_ENV)
    if not data or not python:
        pytest.skip(f"set {DATA_ENV} (a thinkingbox-data clone) and {PYTHON_ENV} (its servers' Python 3.12) "
                    "to run the ThinkingBox-Bench checks")
    return ThinkingBoxConfig(data=Path(data), python=python, **overrides)
