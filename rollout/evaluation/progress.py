"""A campaign's progress for the person waiting on it: a rich bar over its trials (done of total, passed
and system errors so far, time elapsed and the estimated time left), and one log line when it ends.

Why a bar rather than log lines: a campaign is hundreds of trials, and its first ones wait for the engine
to start and compile; one line per trial buried everything else, and nothing at all was said during that
first minute or two. The bar shows from the start, its clock running, and the closing line keeps the
tally in the log."""

from __future__ import annotations

import logging
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rollout.records import TrialRecord

log = logging.getLogger(__name__)


class TrialProgress:
    """The bar of one campaign's `total` trials, labelled `label`; `finished` advances it by a trial. Use as a
    context manager: the bar shows on entry, and on exit it stops and the tally is logged."""

    def __init__(self, total: int, label: str = "trials", console: Console | None = None) -> None:
        self.total = total
        self.passed = self.failed = self.system_errors = 0
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                                  TextColumn("{task.fields[tally]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                  TimeRemainingColumn(), console=console)
        self._bar = self._progress.add_task(label, total=total, tally=self.tally())
        self._start = time.perf_counter()

    def tally(self) -> str:
        """Passed so far, and the system errors once there are some."""
        return f"{self.passed} passed" + (f", {self.system_errors} system errors" if self.system_errors else "")

    def finished(self, record: TrialRecord) -> None:
        """Counts one finished trial (passed, failed, or lost to a system error)."""
        if record.system_error is not None:
            self.system_errors += 1
        elif record.passed:
            self.passed += 1
        else:
            self.failed += 1
        self._progress.update(self._bar, advance=1, tally=self.tally())

    def __enter__(self) -> TrialProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()
        done = self.passed + self.failed + self.system_errors
        log.info("%d of %d trials ran in %.0f s: %d passed, %d failed, %d system errors", done, self.total,
                 time.perf_counter() - self._start, self.passed, self.failed, self.system_errors)
