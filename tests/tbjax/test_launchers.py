"""The cluster launchers, run as far as this machine allows: bash parses them, their dry runs print the command
they would start (SLURM's and gcloud's own tools are small fakes on PATH that answer like the real ones), the
per-task rank wrapper gives each SLURM task its JAX process id, and the TPU config plans a 27B update."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tbjax.parallel.distributed import DistributedConfig

REPO = Path(__file__).resolve().parents[2]
SLURM = REPO / "scripts" / "launch_slurm.sh"
TPU = REPO / "scripts" / "launch_tpu_pod.sh"


def fake_tool(directory: Path, name: str, expected_args: str, output: str) -> None:
    """An executable `name` that prints `output` when called with exactly `expected_args`, and fails otherwise."""
    directory.mkdir(exist_ok=True)
    tool = directory / name
    tool.write_text(f'#!/usr/bin/env bash\n[[ "$*" == {shlex.quote(expected_args)} ]] || '
                    f'{{ echo "unexpected: $*" >&2; exit 1; }}\nprintf %s {shlex.quote(output)}\n')
    tool.chmod(0o755)


def dry_run(script: Path, args: list[str], env: dict[str, str], tools: Path) -> list[str]:
    result = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, cwd=REPO, timeout=30,
                            env={**os.environ, **env, "TBJAX_LAUNCH_DRY_RUN": "1",
                                 "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("script", [SLURM, TPU], ids=lambda p: p.name)
def test_launcher_parses(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_slurm_dry_run_starts_one_process_per_node_with_the_first_host_as_coordinator(tmp_path):
    fake_tool(tmp_path, "scontrol", "show hostnames gpu[07-09]", "gpu07\ngpu08\ngpu09\n")
    env = {"SLURM_JOB_NODELIST": "gpu[07-09]", "SLURM_JOB_ID": "41234"}
    environment, command = dry_run(SLURM, ["train.steps=2"], env, tmp_path)
    assert environment == "JAX_COORDINATOR_ADDRESS=gpu07:21234 JAX_NUM_PROCESSES=3"
    argv = shlex.split(command)
    assert argv[:3] == ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert argv[7:] == [".venv/bin/python", "-m", "tbjax.train", "--mesh", "3x8", "--config",
                        "configs/qwen3-27b-3x8-h100.yaml", "train.steps=2"]
    # What srun runs on task 2: the wrapper must hand it JAX_PROCESS_ID=2 next to the exported coordinator.
    wrapper = argv[3:7]
    probe = ("from tbjax.parallel.distributed import DistributedConfig as D; "
             "print(tuple(vars(D.from_environment()).values()))")
    task = subprocess.run([*wrapper, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), "SLURM_PROCID": "2",
                               **dict(pair.split("=") for pair in environment.split())})
    assert task.returncode == 0, task.stderr
    assert task.stdout.strip() == str(tuple(vars(DistributedConfig("gpu07:21234", 3, 2)).values()))


def test_tpu_dry_run_runs_the_tpu_config_on_every_worker(tmp_path):
    fake_tool(tmp_path, "gcloud", "compute tpus tpu-vm describe my-v5p --zone us-east5-a "
              "--flatten=networkEndpoints[] --format=value(networkEndpoints.ipAddress)",
              "10.0.0.2\n10.0.0.3\n10.0.0.4\n10.0.0.5\n")
    (command,) = dry_run(TPU, ["my-v5p", "us-east5-a", "train.steps=2"], {"REPO_DIR": "/srv/tbjax"}, tmp_path)
    argv = shlex.split(command)
    assert argv[:10] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "my-v5p", "--zone", "us-east5-a",
                         "--worker=all", "--command"]
    remote = shlex.split(argv[10])
    assert remote[:2] == ["cd", "/srv/tbjax"]
    assert "JAX_COORDINATOR_ADDRESS=10.0.0.2:8476" in remote and "JAX_NUM_PROCESSES=4" in remote
    assert remote[-6:] == [".venv/bin/python", "-m", "tbjax.train", "--config", "configs/qwen3-27b-tpu-v5p.yaml",
                           "train.steps=2"]


def test_tpu_config_plans_the_27b_update_over_the_slice(tmp_path):
    config = REPO / "configs" / "qwen3-27b-tpu-v5p.yaml"
    result = subprocess.run([sys.executable, "-m", "tbjax.train", "--config", str(config), "--dry-run"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert "27.2B parameters" in out and "data=1 x fsdp=4 x tensor=8" in out and "attention_impl: splash" in out
    assert ("backward pass: parameters 1.7 GB + optimizer state (float32 master weights 3.4 GB + AdamW moments) "
            "10.2 GB + gradients 5.1 GB") in out
