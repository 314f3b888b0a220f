"""3 processes x 8 CPU devices with jax.distributed on 127.0.0.1: the tiny model's forward over the global
3x8 mesh gives the single-device logits, and training steps, checkpoints and a restart work across processes."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import portpicker
import pytest

from tbjax.models import from_pretrained
from tests.tbjax.trainer.tensorboard_support import read_scalars

HERE = Path(__file__).parent
REPO = HERE.parents[2]
PROCESSES = 3


def run_processes(script: Path, args: Callable[[int], list[str]], logs: Path, timeout_s: float = 300) -> None:
    """Runs `script PORT PROCESS_ID *args(i)` as 3 processes of one jax.distributed job of 8 CPU devices each;
    fails with the logs if any fails. The others are then stopped: they would wait for it forever."""
    port = portpicker.pick_unused_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    logs.mkdir(parents=True, exist_ok=True)
    files = [(logs / f"process{i}.log").open("w") for i in range(PROCESSES)]
    workers = [subprocess.Popen([sys.executable, str(script), str(port), str(i), *args(i)], env=env, cwd=REPO,
                                stdout=files[i], stderr=subprocess.STDOUT) for i in range(PROCESSES)]
    deadline = time.monotonic() + timeout_s
    try:
        while any(w.poll() is None for w in workers) and all(w.returncode in (None, 0) for w in workers):
            assert time.monotonic() < deadline, f"processes still running after {timeout_s} s; logs in {logs}"
            time.sleep(0.5)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        for file in files:
            file.close()
    for i, worker in enumerate(workers):
        assert worker.returncode == 0, f"process {i} failed:\n{(logs / f'process{i}.log').read_text()[-4000:]}"


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
    the engine."""
    model_dir = tiny_dir("qwen3")
    first = train_processes(model_dir, tmp_path, 2, "first")
    assert (tmp_path / "resume" / "checkpoints" / "2").is_dir()
    assert [r["engine"] for r in first] == [True, False, False]
    assert [r["resumed_from"] for r in first] == [0] * PROCESSES
    assert len({r["digest"] for r in first}) == 1  # every host holds the same replica
    lines = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    updates = sum(line["optimizer_steps"] for line in lines if not line["skipped"])  # mini-batches: several a step
    assert [line["step"] for line in lines] == [1, 2] and updates >= 1
    assert [r["updates"] for r in first] == [updates] * PROCESSES
    tensorboard = tmp_path / "resume" / "tensorboard"
    assert len(list(tensorboard.glob("events.out.tfevents.*"))) == 1  # process 0 logs, the others do not
    assert read_scalars(tensorboard)["pass_rate"] == pytest.approx({line["step"]: line["pass_rate"] for line in lines})
    second = train_processes(model_dir, tmp_path, 2, "second")
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
