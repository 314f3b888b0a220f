"""A campaign shows a progress bar over its trials (done of total, passed so far, elapsed, ETA) and logs one
closing tally, instead of a log line per trial (and nothing at all while the engine warmed up)."""

import asyncio
import io
import logging

from rich.console import Console

from envs import load_tasks
from rollout.evaluation.runner import run_trials
from rollout.records import TrialLog, TrialRecord


async def runner(task, trial):
    """Trial 0 passes, trial 1 fails, trial 2 is lost to an engine error."""
    return TrialRecord(task_id=task.id, domain=task.domain, trial=trial, passed=None if trial == 2 else trial == 0,
                       system_error="engine" if trial == 2 else None,
                       termination="system_error" if trial == 2 else "user_done", turns=1, model="policy",
                       weight_version="0", seconds=0.1)


def test_trials_run_under_a_progress_bar_with_one_closing_line(tmp_path, caplog):
    tasks = load_tasks(domain="clinic", split="heldout")[:4]
    screen = io.StringIO()
    caplog.set_level(logging.INFO)
    with TrialLog(tmp_path / "trials.jsonl", resume=False) as trial_log:
        ran = asyncio.run(run_trials(tasks, 3, runner, trial_log, concurrency=2, label="base policy",
                                     console=Console(file=screen, width=160)))
    assert ran == 12
    bar = screen.getvalue()
    assert "base policy" in bar and "12/12" in bar and "4 passed, 4 system errors" in bar and "ETA" in bar
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("rollout.evaluation")]
    assert lines[0].startswith("base policy: 12 trials of 4 tasks, 2 at once; the first ones also wait")
    assert lines[1:] == [lines[-1]] and lines[-1].startswith("12 of 12 trials ran in ")
    assert lines[-1].endswith(": 4 passed, 4 failed, 4 system errors")
