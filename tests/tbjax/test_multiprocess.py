"""3 processes x 8 CPU devices with jax.distributed on 127.0.0.1: every process gets the single-device
logits of the tiny model loaded over the global 3x8 mesh."""

import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import portpicker

from tbjax.models import from_pretrained

WORKER = Path(__file__).with_name("multiprocess_forward.py")
REPO = Path(__file__).resolve().parents[2]


def test_three_processes_match_single_device(tiny_dir, tmp_path):
    model_dir = tiny_dir("qwen3")
    ids = np.random.default_rng(0).integers(0, 518, size=(24, 16))
    np.save(tmp_path / "ids.npy", ids)
    port = portpicker.pick_unused_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(port), str(i), str(model_dir), str(tmp_path / "ids.npy"),
             str(tmp_path / f"logits{i}.npy")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for i in range(3)
    ]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, output[-3000:]
    reference = np.asarray(from_pretrained(model_dir)(jnp.asarray(ids, jnp.int32)))
    for i in range(3):
        np.testing.assert_allclose(np.load(tmp_path / f"logits{i}.npy"), reference, atol=1e-5, rtol=0)
