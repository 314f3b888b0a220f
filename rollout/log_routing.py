"""Where a command's log records go: the terminal keeps what the person running it acts on, a file keeps all.

A training run's terminal is its banners, progress bars and step lines (printed, not logged); beside them a
library's INFO records are noise: Orbax writes hundreds per run, and the MCP server one per refused tool call,
which is the agent's business (its episode is graded for it), not the operator's. So the terminal gets warnings
and errors from everyone, and INFO records only from the loggers a command names as its own voice (e.g.
`rollout.evaluate`'s closing pass@1 line); the log file gets every record at INFO and above, Python warnings
included, with times. `verbose` sends everything to the terminal too, as before the file existed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

LOG_FILE = "log.txt"
OWN_PACKAGES = ("envs", "rollout", "tbjax")  # a rollout command's own voice: its INFO records reach the terminal
TERMINAL_FORMAT = "%(levelname)s %(name)s: %(message)s"
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ROUTED = "_routed_by_tbjax"  # marks the handlers route_logs added, which a later call replaces


class _Shown(logging.Filter):
    """Passes warnings and errors, and INFO records of the named loggers (and their children)."""

    def __init__(self, own: Sequence[str]) -> None:
        super().__init__()
        self.own = tuple(own)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return record.name != "py.warnings"  # libraries' deprecations: the file's
        return any(record.name == name or record.name.startswith(f"{name}.") for name in self.own)


class _Terminal(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes, not the one there when it was made (a test's
    capture, or a redirection, may have replaced and closed that one since)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def route_logs(log_file: Path | None, *, verbose: bool = False, own: Sequence[str] = ()) -> None:
    """Gives the root logger its handlers: the terminal (stderr) shows warnings, errors and the INFO records of
    the loggers in `own` (everything with `verbose`); `log_file` (created with its directory, appended to;
    None: no file) receives every record at INFO and above. Called again, it replaces the handlers it added
    before (a command learns its log file's place once its config is read); others (a test's capture) stay."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, ROUTED, False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.INFO)
    terminal = _Terminal()
    terminal.setFormatter(logging.Formatter(TERMINAL_FORMAT))
    if not verbose:
        terminal.addFilter(_Shown(own))
    handlers: list[logging.Handler] = [terminal]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
        handlers[-1].setFormatter(logging.Formatter(FILE_FORMAT))
    for handler in handlers:
        setattr(handler, ROUTED, True)
        root.addHandler(handler)
    logging.captureWarnings(True)


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", action="store_true", help=f"every log record on the terminal too, libraries' "
                        f"INFO included (otherwise they go to {LOG_FILE} only)")
