"""A checkpoint the disk will not take stops the run at once, in one line, and loses nothing.

The old loop learnt of a failed asynchronous save only at the next save, after another step's rollouts, and
then printed 47 tracebacks (about 900 lines) or a raw OSError. Now the step that overlaps the save is stopped
as soon as the save fails, with one line naming the checkpoint, the directory and the cause, and nothing else
is printed.

The real GRPO loop on a tiny Qwen3 with real sessions, in a process whose file-size limit (RLIMIT_FSIZE, a
real OS write failure: EFBIG, as root too) lets the run's small files through and fails the checkpoint's data;
the second step's episodes are slow, so only a stop at once ends the run before they do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import resource
import time
from collections.abc import Iterator

import pytest

from tbjax.models import from_pretrained
from tbjax.trainer.checkpoint import CheckpointWriteError
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks

FILE_LIMIT = 64 * 1024  # above the run's task list, config and metrics lines, below a checkpoint's data
SLOW_EPISODE_S = 300.0


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.slow
def test_a_save_the_disk_refuses_stops_the_run_at_once_in_one_line(tiny_dir, tmp_path, capfd) -> None:
    model_dir = tiny_dir("qwen3")
    config = config_for(tmp_path, 3)
    config = config.model_copy(update={"groups": dataclasses.replace(config.groups, groups=1),  # half the rollouts
                                       "train": config.train.model_copy(update={"mismatch_stats": False,
                                                                                "weight_probe": False})})
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))

    async def slow_after_the_first_step(task):
        if run.step >= 1:
            await asyncio.sleep(SLOW_EPISODE_S)
        return await brief_session(task)

    start = time.monotonic()
    with file_size_limit(FILE_LIMIT), pytest.raises(CheckpointWriteError) as raised:
        asyncio.run(run_steps(run, opener=slow_after_the_first_step))
    assert time.monotonic() - start < SLOW_EPISODE_S  # not after step 2's episodes, nor at step 2's save
    message = str(raised.value)
    assert "\n" not in message and "checkpoint of step 1 could not be written to" in message
    assert str(run.directory / "checkpoints") in message and "File too large (errno 27)" in message
    assert run.step == 1 and not (run.directory / "checkpoints" / "1").exists()
    printed = capfd.readouterr().err  # Orbax's threads: one traceback each, and TensorStore's orphaned writes'
    assert "Traceback" not in printed and "Event loop is closed" not in printed, printed[:2000]
