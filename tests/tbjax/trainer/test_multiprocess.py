"""3 processes x 8 CPU devices with jax.distributed on 127.0.0.1: the tiny model's forward over the global
3x8 mesh gives the single-device logits, and training steps, checkpoints and a restart work across processes."""

import json
import socket
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from tbjax.models import from_pretrained
from tests.tbjax.trainer.multiprocess_support import PROCESSES, run_processes
from tests.tbjax.trainer.tensorboard_support import read_scalars

HERE = Path(__file__).parent


def test_three_processes_match_single_device(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    ids = np.random.default_rng(0).integers(0, 518, size=(24, 16))
    np.save(tmp_path / "ids.npy", ids)
    run_processes(HERE / "multiprocess_forward.py",
                  lambda i: [str(model_dir), str(tmp_path / "ids.npy"), str(tmp_path / f"logits{i}.npy")],
                  tmp_path / "logs")
    reference = np.asarray(from_pretrained(model_dir)(jnp.asarray(ids, jnp.int32)))
    for i in range(PROCESSES):
        np.testing.assert_allclose(np.load(tmp_path / f"logits{i}.npy"), reference, atol=1e-5, rtol=0)


def train_processes(model_dir: Path, root: Path, steps: int, name: str, mode: str = "full") -> list[dict]:
    run_processes(HERE / "multiprocess_train.py",
                  lambda i: [str(model_dir), str(root), str(steps), str(root / f"{name}{i}.json"), mode], root / name)
    return [json.loads((root / f"{name}{i}.json").read_text()) for i in range(PROCESSES)]


@pytest.mark.slow
def test_three_processes_train_checkpoint_and_resume(tiny_dir, tmp_path):
    """2 steps with a checkpoint, then a restart that resumes at step 2 and has nothing left to redo (a resumed
    run training on is the single-process loop test's: tests/tbjax/trainer/test_loop.py). Only process 0 runs
    the engine. The steps run asynchronously (rollout.max_staleness=1, exact): the driver's second batch runs
    while every process updates in a thread, the collectives in the same order everywhere."""
    model_dir = tiny_dir("qwen3")
    first = train_processes(model_dir, tmp_path, 2, "first", mode="async")
    assert (tmp_path / "resume" / "checkpoints" / "2").is_dir()
    assert [r["engine"] for r in first] == [True, False, False]
    assert [r["resumed_from"] for r in first] == [0] * PROCESSES
    assert len({r["digest"] for r in first}) == 1  # every host holds the same replica
    lines = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    updates = sum(line["optimizer_steps"] for line in lines if not line["skipped"])  # mini-batches: several a step
    assert [line["step"] for line in lines] == [1, 2] and updates >= 1
    assert all(sum(line["staleness"].values()) == line["episodes"] for line in lines)
    assert [set(line["staleness"]) for line in lines] == [{"0"}, {"1"}]  # batch 1 ran beside update 1
    assert [r["updates"] for r in first] == [updates] * PROCESSES
    tensorboard = tmp_path / "resume" / "tensorboard"
    assert len(list(tensorboard.glob("events.out.tfevents.*"))) == 1  # process 0 logs, the others do not
    assert read_scalars(tensorboard)["pass_rate"] == pytest.approx({line["step"]: line["pass_rate"] for line in lines})
    second = train_processes(model_dir, tmp_path, 2, "second", mode="async")
    assert [(r["resumed_from"], r["step"], r["updates"]) for r in second] == [(2, 2, updates)] * PROCESSES
    assert {r["digest"] for r in second} == {first[0]["digest"]}  # restored exactly what was trained
    assert len({r["master_digest"] for r in first}) == 1 and first[0]["master_digest"]  # float32 masters, one replica
    assert {r["master_digest"] for r in second} == {first[0]["master_digest"]}  # the masters too, bit for bit
    assert len((tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()) == 2  # no step redone
    assert len(list(tensorboard.glob("events.out.tfevents.*"))) == 2


@pytest.mark.slow
def test_three_processes_train_lora_adapters_alone_and_resume_them(tiny_dir, tmp_path):
    """LoRA GRPO across 3 processes: every host holds the same adapters and moments, the bfloat16 base is the
    same bits after the updates as before on every host, and a restart restores adapters and moments exactly."""
    model_dir = tiny_dir("qwen3")
    first = train_processes(model_dir, tmp_path, 2, "first", mode="lora")
    assert [r["master_digest"] for r in first] == [None] * PROCESSES  # float32 adapters: no master copy
    assert len({(r["digest"], r["moments_digest"]) for r in first}) == 1
    assert {r["frozen_after"] for r in first} == {r["frozen_before"] for r in first} and \
        len({r["frozen_after"] for r in first}) == 1  # the base, untouched and one replica
    assert first[0]["updates"] >= 1
    second = train_processes(model_dir, tmp_path, 2, "second", mode="lora")
    assert [(r["resumed_from"], r["updates"]) for r in second] == [(2, first[0]["updates"])] * PROCESSES
    assert {(r["digest"], r["moments_digest"]) for r in second} == {(first[0]["digest"], first[0]["moments_digest"])}
    assert {r["frozen_after"] for r in second} == {first[0]["frozen_before"]}


def test_host_replicas_are_refused_where_processes_share_a_host(tmp_path):
    """rollout.publish_replicas has every process write publish_dir on its own host: the 3 processes here share
    one machine, so each would write the same directory, and the run setup refuses, naming them."""
    run_processes(HERE / "multiprocess_hosts.py", lambda i: [str(tmp_path / f"hosts{i}.json")], tmp_path / "logs")
    records = [json.loads((tmp_path / f"hosts{i}.json").read_text()) for i in range(PROCESSES)]
    host = socket.gethostname()
    for record in records:
        assert record["hosts"] == [host] * PROCESSES
        assert record["refusal"] == (f"rollout.publish_replicas: processes [0, 1, 2] share host {host} and would "
                                     "write the same /dev/shm/tbjax/{run} at once; run one process per host, or set "
                                     "rollout.publish_replicas=false (the driver alone writes)")
