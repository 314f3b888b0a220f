"""The installed distribution: its console scripts run the modules' entry points, under an SPDX licence, and a
wheel installed outside the checkout runs the default config (the configs and the price table ship inside)."""

import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path

import pytest

from tests.subprocess_support import clean_env
from tests.tbjax.pipeline.support import SHORT

REPO = Path(__file__).resolve().parents[1]
NOT_SHIPPED = shutil.ignore_patterns(".git", ".venv*", "runs", "build", "*.egg-info", "__pycache__", ".*_cache",
                                     ".hypothesis")


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


def build_isolation() -> list[str]:
    """This venv's own setuptools builds the wheel when it is recent enough (no download); else pip builds in
    an isolated environment from the package index (a Python 3.12 venv has no setuptools at all)."""
    try:
        recent = int(version("setuptools").split(".")[0]) >= 77
    except PackageNotFoundError:
        recent = False
    return ["--no-build-isolation"] if recent else []


@pytest.mark.slow
def test_a_wheel_installed_outside_the_checkout_runs_the_default_config(tmp_path):
    """Built from a copy of the checkout (links kept, as git keeps them), installed into a directory of its
    own, and run by its console script from a directory that is not the checkout: the default config and the
    price table come from the wheel itself."""
    source = tmp_path / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=NOT_SHIPPED)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *build_isolation(), "-w",
                    str(tmp_path / "dist"), str(source)], check=True, capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("tbjax-*.whl"))
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert {"tbjax/configs/tiny-cpu.yaml", "tbjax/configs/qwen3-8b-1x8.yaml", "rollout/evaluation/prices.yaml",
            "tbjax/assets/chat_template.jinja", "envs/domains/library/domain.yaml"} <= shipped
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    shutil.rmtree(source)  # nothing may come from the copy it was built from
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(PYTHONPATH=str(site))  # not the checkout, nor the suite's 24 devices
    where = subprocess.run([sys.executable, "-c", "import tbjax, rollout, envs; print(tbjax.__file__, "
                            "rollout.__file__, envs.__file__)"], cwd=elsewhere, env=env, capture_output=True,
                           text=True, timeout=120)
    assert where.returncode == 0 and all(Path(f).is_relative_to(site) for f in where.stdout.split()), where.stdout
    result = subprocess.run([str(site / "bin" / "tbjax-train"), *SHORT, "evaluate.tasks=4",
                             "evaluate.templates_tasks=2"], cwd=elsewhere, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = (elsewhere / "runs" / "default" / "results.md").read_text()
    assert "pass@1" in results and "no price table" not in result.stdout + result.stderr


def test_every_command_answers_help_without_jax_torch_or_transformers():
    """`--help` is a newcomer's first call: it must not wait for JAX or torch (scripts/bench/cli_help.py times
    it; this checks what it imports, which does not depend on the machine's load)."""
    from bench.cli_help import COMMANDS, probe

    for module in COMMANDS:
        heavy, _ = probe(module)
        assert heavy == "none", f"{module} --help imported {heavy}"
