"""Host replicas of a weight publish: 3 processes of one jax.distributed job on 127.0.0.1 (mesh 3xD, D CPU
devices each, so each process holds a whole replica, sharded over its own devices) publish the 48.2M-parameter
bench Qwen3 (float32). Two ways in the same run, alternated:

- replicas: every process writes its host's copy at once from its own devices
  (`publish_weights(..., replicas=True)`), each into its own directory (here the 3 "hosts" share a disk);
- one writer: process 0 gathers and writes the copy, then writes it again for the two other hosts (what one
  writer for the whole job costs: every host's bytes through one process).

Prints the median wall seconds of each, the speedup and the bytes/s, and the programs the publishes compiled
(the first round's; later rounds compile none). The 3 processes share this machine's cores and disk, which
bound the speedup, not 3 as on 3 hosts. D defaults to 1: XLA's CPU devices are threads of one process, and
gathering over 8 of them (copies to each) costs more here than the write; tests/tbjax/models/hf/
test_replica_publish.py runs D=8 for correctness.

    python scripts/bench/replica_publish.py [--rounds 3] [--devices 1] [--dir DIR]

The worker side:
    python scripts/bench/replica_publish.py --worker PORT PROCESS_ID DEVICES MODEL_DIR ROOT ROUNDS OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROCESSES = 3
REPO = Path(__file__).resolve().parents[2]
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def worker(port: str, process_id: str, devices: str, model_dir: str, root: str, rounds: str, out: str) -> None:
    """One process: joins the job, loads the model over the 3xD mesh and publishes it both ways `rounds`
    times; process 0 writes the timings."""
    import jax

    from tbjax.models import from_pretrained
    from tbjax.models.hf.versions import publish_weights
    from tbjax.parallel.distributed import DistributedConfig, barrier, initialize_distributed
    from tbjax.parallel.mesh import make_mesh, parse_mesh_spec

    initialize_distributed(DistributedConfig(f"127.0.0.1:{port}", PROCESSES, int(process_id)))
    model = from_pretrained(model_dir, mesh=make_mesh(parse_mesh_spec(f"{PROCESSES}x{devices}")))
    compiles: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, _seconds, **_: compiles.append(event) if event == COMPILE_EVENT else None)
    me, base = jax.process_index(), Path(root)
    timings: dict[str, list[float]] = {"replicas": [], "one writer": []}
    compiled: list[int] = []
    for version in range(int(rounds)):
        before = len(compiles)
        barrier("replica round")
        start = time.perf_counter()
        publish_weights(model, base / "replicas" / f"host{me}", version, replicas=True, keep=1)
        timings["replicas"].append(time.perf_counter() - start)
        compiled.append(len(compiles) - before)
        barrier("one-writer round")
        start = time.perf_counter()
        published = publish_weights(model, base / "one" / "host0", version, keep=1)
        if me == 0:
            for host in range(1, PROCESSES):
                shutil.rmtree(base / "one" / f"host{host}", ignore_errors=True)
                shutil.copytree(published, base / "one" / f"host{host}" / published.name)
        barrier("one writer done")
        timings["one writer"].append(time.perf_counter() - start)
    if me == 0:
        Path(out).write_text(json.dumps({"seconds": timings, "compiles": compiled}))
    jax.distributed.shutdown()


def run_job(model_dir: Path, root: Path, rounds: int, out: Path, devices: int, timeout_s: float = 600) -> dict:
    """Runs the 3 workers and returns process 0's record; a failing worker raises with its log."""
    import portpicker

    from tbjax.parallel.local_job import wait_together

    port = portpicker.pick_unused_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    logs = [root / f"process{i}.log" for i in range(PROCESSES)]
    root.mkdir(parents=True, exist_ok=True)
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(port), str(i), str(devices), str(model_dir),
                                 str(root), str(rounds), str(out)], env=env, cwd=REPO, stdout=logs[i].open("w"),
                                stderr=subprocess.STDOUT) for i in range(PROCESSES)]
    if not wait_together(workers, timeout_s):
        raise TimeoutError(f"the publish workers ran past {timeout_s} s; logs in {root}")
    for i, w in enumerate(workers):
        if w.returncode != 0:
            raise RuntimeError(f"publish worker {i} failed:\n{logs[i].read_text()[-4000:]}")
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--devices", type=int, default=1, help="CPU devices per process")
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary directory under /tmp)")
    args = parser.parse_args()
    from bench_common import CONFIG
    from flax import nnx

    from tbjax.models import ModelConfig, Qwen, save_pretrained

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        model_dir = save_pretrained(Qwen(ModelConfig.from_hf_dict({**CONFIG, "dtype": "float32"}), nnx.Rngs(0)),
                                    Path(tmp) / "model")
        record = run_job(model_dir, Path(tmp) / "job", args.rounds + 1, Path(tmp) / "record.json",
                         args.devices)
        nbytes = sum(f.stat().st_size for f in model_dir.glob("*.safetensors"))
    seconds = {way: float(np.median(times[1:])) for way, times in record["seconds"].items()}  # round 0 compiles
    print(f"{PROCESSES} processes x {args.devices} CPU devices, {os.cpu_count()} cores; 48.2M Qwen3 float32, "
          f"{nbytes / 1e6:.1f} MB per replica, median of {args.rounds} rounds after one warm-up")
    for way, value in seconds.items():
        print(f"{way:10s}: {value:6.3f} s for {PROCESSES} copies  {PROCESSES * nbytes / value / 1e6:8.1f} MB/s")
    print(f"speedup of host replicas over one writer: {seconds['one writer'] / seconds['replicas']:.2f}x; programs "
          f"compiled per publish: {record['compiles'][0]} in the first, {max(record['compiles'][1:])} after")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(*sys.argv[2:])
    else:
        main()
