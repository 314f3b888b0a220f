"""The installed distribution: its console scripts run the modules' entry points, under an SPDX licence."""

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path


def test_console_scripts_are_installed_and_answer():
    scripts = {ep.name: ep for ep in distribution("tbjax").entry_points if ep.group == "console_scripts"}
    assert {"tbjax-train", "tbjax-evaluate", "tbjax-select", "tbjax-serve", "tbjax-export"} <= set(scripts)
    for entry in scripts.values():
        assert callable(entry.load()), entry.name
    # the one that imports no JAX answers fast; it runs from the venv's bin like any other
    validate = Path(sys.executable).with_name("tbjax-validate-envs")
    result = subprocess.run([str(validate), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "usage:" in result.stdout


def test_the_licence_is_declared_by_its_spdx_id():
    metadata = distribution("tbjax").metadata
    assert metadata["License-Expression"] == "Apache-2.0"
