"""When the run's periodic work is due (tbjax.trainer.periodic), as a config declares it: checkpoints every
train.checkpoint_every and at the last step, validations from the start, held-out scorings after it, a record
after every update; exact asynchronous mode drains where anything but the record is due. The loop's own runs
(test_loop.py, test_validation.py, test_async_loop.py) check that the work happens at these steps."""

import pytest

from tbjax.config import load_config
from tbjax.trainer.periodic import Every, Periodic


def test_the_default_run_declares_its_checkpoints_validations_and_records():
    periodic = Periodic.of(load_config())  # 36 steps, checkpoints every 2, validation every 6
    due = {step: periodic.due(step) for step in range(37)}
    assert due[0] == {"validation"}  # the start: no update yet, so nothing to save or record
    assert due[1] == {"log"} and due[2] == {"checkpoint", "log"}
    assert due[6] == {"checkpoint", "validation", "log"} and due[36] == {"checkpoint", "validation", "log"}
    assert [s for s in range(37) if periodic.drains(s)] == [0, *range(2, 37, 2)]


def test_held_out_scorings_start_after_the_start_and_come_at_the_last_step():
    periodic = Periodic.of(load_config(overrides=["train.steps=5", "validation.tasks=0", "evaluate.every=2"]))
    assert periodic.validation is None
    assert [s for s in range(6) if "heldout" in periodic.due(s)] == [2, 4, 5]


def test_an_interval_below_one_is_refused():
    with pytest.raises(ValueError, match="every 0 steps: give a positive interval"):
        Every(0)
