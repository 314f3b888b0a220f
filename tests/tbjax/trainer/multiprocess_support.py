"""Running a script as the 3 processes of one jax.distributed job on 127.0.0.1 (8 CPU devices each)."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import portpicker

from tbjax.parallel.local_job import wait_together

REPO = Path(__file__).resolve().parents[3]
PROCESSES = 3


def run_processes(script: Path, args: Callable[[int], list[str]], logs: Path, timeout_s: float = 300) -> None:
    """Runs `script PORT PROCESS_ID *args(i)` as 3 processes of one jax.distributed job of 8 CPU devices each;
    fails with the logs if any fails. The others are then stopped: they would wait for it forever."""
    port = portpicker.pick_unused_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    logs.mkdir(parents=True, exist_ok=True)
    files = [(logs / f"process{i}.log").open("w") for i in range(PROCESSES)]
    workers = [subprocess.Popen([sys.executable, str(script), str(port), str(i), *args(i)], env=env, cwd=REPO,
                                stdout=files[i], stderr=subprocess.STDOUT) for i in range(PROCESSES)]
    try:
        in_time = wait_together(workers, timeout_s, poll_s=0.5)
    finally:
        for file in files:
            file.close()
    assert in_time, f"processes still running after {timeout_s} s; logs in {logs}"
    for i, worker in enumerate(workers):
        assert worker.returncode == 0, f"process {i} failed:\n{(logs / f'process{i}.log').read_text()[-4000:]}"
