"""How a checkpoint save that the disk refused is reported: in one line (`CheckpointWriteError`, with the OS's
reason), with nothing else printed beside it (Orbax's and TensorStore's own reports of the same failure)."""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

ORBAX_LOG = logging.getLogger("absl")  # Orbax logs through absl's logging


class HeldErrors(logging.Filter):
    """Orbax logs a failed save once per thread that saw it fail, each with its traceback (dozens of them),
    while the checkpointer reports that failure itself in one line. So Orbax's ERROR records wait
    here: dropped when the save's failure is raised, let through as they were if the save succeeded."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and f"{os.sep}orbax{os.sep}" in record.pathname:
            self.held.append(record)
            return False
        return True

    def release(self) -> None:
        held, self.held = self.held, []
        for record in held:
            ORBAX_LOG.callHandlers(record)

    def drop(self) -> None:
        self.held = []


def quiet_orphaned_writes() -> None:
    """When a save fails, Orbax's event loop for it ends while TensorStore's other writes of that save are still
    running; as each ends, its native thread prints "Event loop is closed" through the interpreter's error hooks
    (dozens of tracebacks beside the run's one line), while the save is still failing, before the failure reaches
    the checkpointer. So from the first Checkpointer on, those reports, and only those, are dropped: no code of
    ours leaves a callback to a closed loop (the engine's worker checks before it delivers)."""
    if getattr(sys.excepthook, "quiets_orphaned_writes", False):
        return
    excepthook, unraisablehook = sys.excepthook, sys.unraisablehook

    def orphaned(error: BaseException | None) -> bool:
        return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"

    def quiet_excepthook(kind: type[BaseException], error: BaseException, trace: Any) -> None:
        if not orphaned(error):
            excepthook(kind, error, trace)

    def quiet_unraisablehook(unraisable: Any) -> None:
        if not orphaned(unraisable.exc_value):
            unraisablehook(unraisable)

    quiet_excepthook.quiets_orphaned_writes = True  # type: ignore[attr-defined]
    sys.excepthook, sys.unraisablehook = quiet_excepthook, quiet_unraisablehook


class CheckpointWriteError(RuntimeError):
    """A save that failed (disk full, directory read-only): one line naming the checkpoint and the cause."""


def os_cause(error: BaseException) -> str:
    """What the operating system said, from an error or its causes: an OSError's strerror, or the errno
    TensorStore quotes (os_error_code='28'); else the error's first line."""
    chain: list[BaseException] = [error]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 16:
        chain.append(inner)
    for cause in chain:
        if isinstance(cause, OSError) and cause.strerror:
            return f"{cause.strerror} ({cause.filename})" if cause.filename else cause.strerror
        code = re.search(r"os_error_code='(\d+)'", str(cause))
        if code:
            return f"{os.strerror(int(code.group(1)))} (errno {code.group(1)})"
    return first_line(error)


def first_line(error: BaseException) -> str:
    """An exception as one short line (TensorStore's messages run to many)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__
