"""A child process killed with SIGKILL at a chosen point: the fault tests' stand-in for a machine that dies
mid-write (preempted, out of memory), leaving its files as they were, with no cleanup run.

A test module of tests/faults doubles as the child's script (`python -m tests.faults.<module> ARGS...`): it
replaces the step it dies at with `hang_forever`, which tells the parent it got there and never returns;
`kill_when_hanging` waits for that line and kills the child.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HANGING = "hanging at the chosen point"
WATCHDOG_S = 120  # a child that never gets there is killed anyway


def hang_forever(*_args: object, **_kwargs: object) -> None:
    """Stands in for a step of the work: tells the parent where the child is, then never returns."""
    print(HANGING, flush=True)
    time.sleep(600)


def kill_when_hanging(module: str, args: Sequence[str], log: Path) -> None:
    """Runs `python -m module args` and kills it with SIGKILL once it hangs; `log` keeps its stderr (a pipe
    nobody reads could fill), shown if it never hangs."""
    with log.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, stdout=subprocess.PIPE,
                                 stderr=stderr, text=True)
    watchdog = threading.Timer(WATCHDOG_S, child.kill)
    watchdog.start()
    try:
        assert child.stdout.readline().strip() == HANGING, log.read_text()[-3000:]
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
    finally:
        watchdog.cancel()
        child.kill()
        child.communicate()
