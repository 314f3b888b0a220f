"""The processes of one job on this machine, waited for together. Tests and benchmarks run a jax.distributed job
as several local processes; one that fails leaves the others waiting for it in a collective forever, so they
are stopped as soon as one fails."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence


def wait_together(workers: Sequence[subprocess.Popen], timeout_s: float, poll_s: float = 0.2) -> bool:
    """Waits until every worker has exited or one has failed, then kills those still running (all of them once
    `timeout_s` has passed). Whether they stopped within `timeout_s`; the callers read the exit codes."""
    deadline = time.monotonic() + timeout_s
    try:
        while any(w.poll() is None for w in workers) and all(w.returncode in (None, 0) for w in workers):
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)
        return True
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
