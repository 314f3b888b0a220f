"""The training log's TensorBoard event files, read back record by record: every number of a step's metrics
is a scalar at that step, and a resumed log tells TensorBoard to drop what a killed run logged past the
checkpoint."""

import json

import pytest
from tensorboardX.proto.event_pb2 import SessionLog

from tbjax.trainer.metrics_log import MetricsLog
from tests.tbjax.trainer.tensorboard_support import read_events, read_scalars


def step_metrics(step: int, **changes) -> dict:
    """A step's record as the loop writes it (tbjax.trainer.loop.run_step)."""
    return {"step": step, "skipped": False, "loss": 0.25, "grad_norm": 1.5, "clip_fraction": 0.0, "entropy": 7.9,
            "logprob_gap": 3e-7, "reward_mean": 0.5, "pass_rate": 0.375, "groups_informative": 2,
            "groups_dropped": 1, "groups_refilled": 0, "tasks_replaced": 0, "system_errors": {"timeout": 2},
            "episodes": 12, "completion_tokens": 96, "rollout_tokens_per_s": 48.0, "time_rollout_s": 2.0,
            "time_update_s": 1.0, "time_save_s": 0.5, "time_publish_s": 0.25, **changes}


def test_each_number_of_a_step_is_a_scalar_at_that_step(tmp_path):
    log = MetricsLog(tmp_path)
    log.write(step_metrics(1, skipped=True, reward_mean=None, loss=None, system_errors={}))
    log.write(step_metrics(2))
    log.close()
    scalars = read_scalars(tmp_path / "tensorboard")
    assert scalars["skipped"] == {1: 1.0, 2: 0.0}
    assert scalars["reward_mean"] == {2: 0.5} and scalars["loss"] == {2: 0.25}  # nothing logged for a None
    assert scalars["pass_rate"] == {1: 0.375, 2: 0.375} and scalars["groups_dropped"] == {1: 1.0, 2: 1.0}
    assert scalars["system_errors/timeout"] == {2: 2.0}
    assert scalars["time_publish_s"] == {1: 0.25, 2: 0.25} and "step" not in scalars
    assert set(scalars) == set(step_metrics(0)) - {"step", "system_errors"} | {"system_errors/timeout"}
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_a_resumed_log_purges_what_a_killed_run_logged_past_the_checkpoint(tmp_path):
    killed = MetricsLog(tmp_path)
    for step in (1, 2, 3):
        killed.write(step_metrics(step))
    killed.close()
    resumed = MetricsLog(tmp_path, resumed_step=2)  # the checkpoint was at step 2: step 3 runs again
    resumed.write(step_metrics(3, loss=-1.0))
    resumed.close()
    first, second = sorted((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    starts = [e.step for e in read_events(second) if e.session_log.status == SessionLog.START]
    assert starts == [3]  # TensorBoard drops the first file's events from step 3 on
    # so does metrics.jsonl: the abandoned step 3 is gone, not beside the one run again ([1, 2, 3, 3] before)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(line["step"], line["loss"]) for line in lines] == [(1, 0.25), (2, 0.25), (3, -1.0)]
    assert {e.step: e.summary.value[0].simple_value for e in read_events(second) if
            e.summary.value and e.summary.value[0].tag == "loss"} == {3: -1.0}


@pytest.mark.parametrize("debris", ['{"step": 3, "lo', "\x00" * 40, "5", '{"step": null}', '{"step": "2"}'])
def test_a_resume_drops_a_line_a_killed_write_left_and_keeps_the_rest(tmp_path, debris):
    """A partial last line (a kill or a full disk mid-append), a NUL-filled tail, a line that is not a step's:
    the resume dropped them with a raw JSONDecodeError, AttributeError or TypeError before."""
    killed = MetricsLog(tmp_path)
    for step in (1, 2):
        killed.write(step_metrics(step))
    killed.close()
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(debris)
    resumed = MetricsLog(tmp_path, resumed_step=2)
    resumed.write(step_metrics(3))
    resumed.close()
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
