"""Faults in a run's checkpoints: damaged files, a save killed with SIGKILL, and a changed save setting.

The old checkpointer restored whatever Orbax read back: 64 flipped bytes in the newest checkpoint's data file
restored silently (NaN parameters, trained on and exported), while a truncated file, a broken
`record/metadata` or a deleted `state/_METADATA` crashed with a long TensorStore or JSON traceback that named
no checkpoint, with the intact previous checkpoint beside it. It also refused to resume a run whose
`train.keep_checkpoints` had changed. Now every checkpoint carries the checksums of its files, resume takes
the newest intact one and says which it skipped, and a changed save setting no longer stops a resume.

Checkpoints of a tiny Qwen3's real train state through the real Checkpointer; one run of the real GRPO loop;
a real subprocess killed mid-save (this module run as a script).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.trainer import checkpoint
from tbjax.trainer.checkpoint import CHECKSUMS, BrokenCheckpointError, Checkpointer, ResumeError
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tbjax.trainer.train_state import TrainState
from tbjax.trainer.update import GRPOTrainer
from tests.faults.killed_child_support import hang_forever, kill_when_hanging
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks

FINGERPRINT = "tiny"


def tiny_state(model_dir: Path) -> tuple[TrainState, TrainState]:
    """The real train state of a tiny Qwen3 (step 1), and one with every value changed (step 2)."""
    model = from_pretrained(model_dir)
    first = GRPOTrainer(model).init_state(model)
    return first, jax.tree.map(lambda x: x + 1, first)


def save(directory: Path, step: int, state: TrainState) -> None:
    checkpointer = Checkpointer(directory, keep=3)
    checkpointer.save(step, state, {"step": step}, {"fingerprint": FINGERPRINT})
    checkpointer.close()


def resume(directory: Path, target: TrainState) -> checkpoint.Restored | None:
    """What a restart of the run resumes from."""
    checkpointer = Checkpointer(directory, keep=3)
    try:
        return checkpointer.restore_latest(target, FINGERPRINT, allow_change=False)
    finally:
        checkpointer.close()


@pytest.fixture(scope="module")
def states(tiny_dir) -> tuple[TrainState, TrainState]:
    return tiny_state(tiny_dir("qwen3"))


@pytest.fixture(scope="module")
def pristine(states, tmp_path_factory) -> Path:
    """A run's checkpoints of steps 1 and 2, saved once; each test damages a copy."""
    directory = tmp_path_factory.mktemp("pristine") / "checkpoints"
    for step, state in enumerate(states, start=1):
        save(directory, step, state)
    return directory


@pytest.fixture
def checkpoints(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "checkpoints"))


def data_file(step_dir: Path) -> Path:
    """The largest file of the train state: tensor data."""
    return max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def flip_bytes(step_dir: Path) -> None:
    path = data_file(step_dir)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    path.write_bytes(bytes(data))


def truncate(step_dir: Path) -> None:
    path = data_file(step_dir)
    os.truncate(path, path.stat().st_size // 2)


def break_record(step_dir: Path) -> None:
    (step_dir / "record" / "metadata").write_text('{"step": 2, "fingerp')


def delete_state_metadata(step_dir: Path) -> None:
    (step_dir / "state" / "_METADATA").unlink()


DAMAGE = {"flipped_bytes": flip_bytes, "truncated_data_file": truncate, "broken_record_metadata": break_record,
          "deleted_state_metadata": delete_state_metadata}


def assert_state(restored: checkpoint.Restored, step: int, expected: TrainState) -> None:
    assert restored.step == step and restored.data == {"step": step}
    for got, want in zip(jax.tree.leaves(restored.state), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the checkpointer logged."""
    return [r.getMessage() for r in caplog.records if r.name == "tbjax.trainer.checkpoint"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_newest_checkpoint_falls_back_to_the_previous(damage, checkpoints, states, caplog) -> None:
    newest, previous = checkpoints / "2", checkpoints / "1"
    DAMAGE[damage](newest)
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        restored = resume(checkpoints, states[0])
    assert_state(restored, 1, states[0])
    [line] = [m for m in said(caplog) if f"{newest} is broken" in m]
    assert f"resuming from {previous}" in line
    assert [m for m in said(caplog) if "resumed from step" in m] == [
        f"resumed from step 1 ({previous})"]
    assert not newest.exists() and (checkpoints.parent / "checkpoints.broken" / "2").is_dir()  # evidence kept


def test_the_resumed_run_saves_the_broken_step_again(checkpoints, states, caplog) -> None:
    flip_bytes(checkpoints / "2")
    checkpointer = Checkpointer(checkpoints, keep=3)
    checkpointer.restore_latest(states[0], FINGERPRINT, allow_change=False)
    checkpointer.save(2, states[1], {"step": 2}, {"fingerprint": FINGERPRINT})
    checkpointer.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        assert_state(resume(checkpoints, states[0]), 2, states[1])
    assert said(caplog) == [f"resumed from step 2 ({checkpoints / '2'})"]


def test_no_intact_checkpoint_refuses_to_start_naming_every_broken_one(checkpoints, states) -> None:
    flip_bytes(checkpoints / "2")
    delete_state_metadata(checkpoints / "1")
    with pytest.raises(BrokenCheckpointError) as refused:
        resume(checkpoints, states[0])
    message = str(refused.value)
    assert f"{checkpoints / '2'} (state/" in message and "differs from its checksum" in message
    assert f"{checkpoints / '1'} (state/_METADATA is missing)" in message
    assert isinstance(refused.value, ResumeError)  # tbjax.train prints it as one line, no traceback
    assert len(message.splitlines()) == 1
    assert (checkpoints / "2").is_dir() and (checkpoints / "1").is_dir()  # nothing moved: the next start says the same


def test_checkpoint_without_checksums_restores_unverified_with_a_warning(checkpoints, states, caplog) -> None:
    (checkpoints / "2" / CHECKSUMS).unlink()
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        assert_state(resume(checkpoints, states[0]), 2, states[1])
    assert any(f"checkpoint {checkpoints / '2'} has no {CHECKSUMS}" in m and "unverified" in m for m in said(caplog))


def test_unreadable_checkpoint_without_checksums_falls_back(checkpoints, states, caplog) -> None:
    (checkpoints / "2" / CHECKSUMS).unlink()
    delete_state_metadata(checkpoints / "2")
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        assert_state(resume(checkpoints, states[0]), 1, states[0])
    [line] = [m for m in said(caplog) if f"{checkpoints / '2'} is broken" in m]
    assert "Orbax cannot read it" in line and f"resuming from {checkpoints / '1'}" in line
    assert len(line.splitlines()) == 1


def save_then_hang(model_dir: Path, directory: Path, window: str) -> None:
    """Saves step 1, then step 2 hanging at `window`: Orbax's commit (every file written to the temporary
    directory, not yet renamed) or the checksums (committed, checksums not yet written); killed there."""
    first, second = tiny_state(model_dir)
    save(directory, 1, first)
    if window == "commit":
        hook = ocp.AsyncOptions(post_finalization_callback=hang_forever)
        ocp.CheckpointManagerOptions = functools.partial(ocp.CheckpointManagerOptions, async_options=hook)
    else:
        checkpoint.write_checksums = hang_forever
    Checkpointer(directory, keep=3).save(2, second, {"step": 2}, {"fingerprint": FINGERPRINT})
    time.sleep(600)


def kill_mid_save(model_dir: Path, directory: Path, window: str) -> None:
    """Runs save_then_hang in a child process and kills it with SIGKILL once it hangs at `window`."""
    kill_when_hanging("tests.faults.test_checkpoint_faults", [str(model_dir), str(directory), window],
                      directory.parent / f"child-{window}.log")


def test_kill_during_orbax_write_resumes_from_the_last_committed_checkpoint(tiny_dir, states, tmp_path,
                                                                            caplog) -> None:
    directory = tmp_path / "checkpoints"
    kill_mid_save(tiny_dir("qwen3"), directory, "commit")
    assert any(".orbax-checkpoint-tmp" in p.name for p in directory.iterdir())  # step 2 died half-written
    checkpointer = Checkpointer(directory, keep=3)
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        assert_state(checkpointer.restore_latest(states[0], FINGERPRINT, allow_change=False), 1, states[0])
    assert said(caplog) == [f"resumed from step 1 ({directory / '1'})"]
    checkpointer.save(2, states[1], {"step": 2}, {"fingerprint": FINGERPRINT})  # the resumed run saves step 2
    checkpointer.close()
    assert_state(resume(directory, states[0]), 2, states[1])


def test_kill_before_checksums_restores_the_committed_checkpoint_unverified(tiny_dir, states, tmp_path,
                                                                            caplog) -> None:
    directory = tmp_path / "checkpoints"
    kill_mid_save(tiny_dir("qwen3"), directory, "checksums")
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        assert_state(resume(directory, states[0]), 2, states[1])
    assert any("restored unverified" in m for m in said(caplog))


def test_save_settings_are_not_the_run_identity(tmp_path) -> None:
    base = config_for(tmp_path, 2)
    same = [("train", "keep_checkpoints", 7), ("train", "checkpoint_every", 3), ("warm_start", "checkpoint_every", 9)]
    for section, key, value in same:
        changed = base.model_copy(update={section: _replace(getattr(base, section), **{key: value})})
        assert changed.fingerprint() == base.fingerprint(), (section, key)
    moved = base.model_copy(update={"run": base.run.model_copy(update={"root": str(tmp_path / "elsewhere")})})
    assert moved.fingerprint() == base.fingerprint()
    llm_user = load_config(overrides=["user.kind=llm", "user.endpoint.base_url=http://127.0.0.1:9/v1",
                                      "user.endpoint.model=m"])
    patient = load_config(overrides=["user.kind=llm", "user.endpoint.base_url=http://127.0.0.1:9/v1",
                                     "user.endpoint.model=m", "user.endpoint.retry_budget_s=600",
                                     "user.endpoint.timeout_s=5"])
    assert patient.fingerprint() == llm_user.fingerprint()  # how requests are retried, not who answers them
    other_user = load_config(overrides=["user.kind=llm", "user.endpoint.base_url=http://127.0.0.1:9/v1",
                                        "user.endpoint.model=another"])
    assert other_user.fingerprint() != llm_user.fingerprint()
    learning = base.model_copy(update={"optim": _replace(base.optim, learning_rate=3e-4)})
    assert learning.fingerprint() != base.fingerprint()


def _replace(section: object, **changes: object) -> object:
    """A config section (pydantic model or dataclass) with `changes`."""
    if dataclasses.is_dataclass(section):
        return dataclasses.replace(section, **changes)
    return section.model_copy(update=changes)


@pytest.mark.slow
def test_grpo_loop_skips_a_corrupt_checkpoint_and_resumes_with_other_save_settings(tiny_dir, tmp_path,
                                                                                    caplog) -> None:
    """The real loop: 2 steps saved, the newest's data flipped, then a restart with train.keep_checkpoints
    changed resumes from step 1 (the old code restored the flipped bytes, or refused the changed setting),
    trains and saves step 2 again, on finite parameters."""
    model_dir = tiny_dir("qwen3")
    tasks = signal_tasks(model_dir)
    first = config_for(tmp_path, 2)
    first = first.model_copy(update={"groups": _replace(first.groups, groups=1),  # half the rollouts, and no
                                     "train": _replace(first.train, mismatch_stats=False, weight_probe=False)})  # watch
    asyncio.run(run_steps(build_run(first, from_pretrained(model_dir), model_dir, tasks=tasks), opener=brief_session))
    checkpoints = first.run.directory / "checkpoints"
    flip_bytes(checkpoints / "2")
    again = first.model_copy(update={"train": _replace(first.train, keep_checkpoints=5)})
    with caplog.at_level(logging.WARNING, logger="tbjax.trainer.checkpoint"):
        run = build_run(again, from_pretrained(model_dir), model_dir, tasks=tasks)
    assert run.step == 1
    [line] = [m for m in said(caplog) if f"{checkpoints / '2'} is broken" in m]
    assert f"resuming from {checkpoints / '1'}" in line
    asyncio.run(run_steps(run, opener=brief_session))
    assert run.step == 2 and sorted(int(p.name) for p in checkpoints.iterdir()) == [1, 2]
    assert all(checkpoint.verify(p) for p in checkpoints.iterdir())  # restoring and training changed no file
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(run.state.params))


if __name__ == "__main__":  # the subprocess of the kill tests
    save_then_hang(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
