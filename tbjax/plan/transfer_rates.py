"""What this machine measures for the publish-time estimate (tbjax.plan.publish_time): the rate of a real
publish (`publish_weights` of a small Qwen3 built in code, into a temporary directory that is removed
afterwards), the rate of reading its files back from the page cache (what a server's loader does first),
and, on an accelerator, device-to-host and host-to-device copies through JAX. Also used by
scripts/gpu_check.py on a lent GPU, with the model its GRPO update trained."""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import SingleDeviceSharding

from tbjax.models import ModelConfig, Qwen, RuntimeConfig
from tbjax.models.hf.importer import abstract_model
from tbjax.models.hf.versions import publish_weights

# float32 parameters, about 200 MB: large enough that per-file and per-program costs do not dominate, small
# enough that building it, publishing it three times and reading it back takes seconds on a laptop
PROBE_ARCHITECTURE = {
    "model_type": "qwen3", "vocab_size": 16384, "hidden_size": 1024, "intermediate_size": 2816,
    "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128,
    "tie_word_embeddings": True, "rope_theta": 1_000_000.0,
}
TIMED_PUBLISHES = 2  # after the one that compiles; the fastest counts
SHM = Path("/dev/shm")


@dataclasses.dataclass(frozen=True)
class PublishProbe:
    directory: Path  # where it published (removed since)
    params: int  # the published model's parameters
    dtype: str  # and their dtype
    nbytes: int  # bytes of the published safetensors files
    publish_s: float  # the fastest publish_weights, gathers compiled, start to `latest` naming the version
    read_s: float  # every safetensors file read back into memory already mapped

    @property
    def publish_rate(self) -> float:
        return self.nbytes / self.publish_s

    @property
    def read_rate(self) -> float:
        return self.nbytes / self.read_s


@dataclasses.dataclass(frozen=True)
class Transfers:
    """Median bytes/s of copies between one device and host memory. Pageable: `np.asarray` of a device array
    (the exporter's copy) and `device_put` of a numpy array (a loader's copy from ordinary memory); pinned:
    through JAX's `pinned_host` memory kind, None where the device offers none."""

    device: str
    nbytes: int
    d2h: float
    h2d: float
    d2h_pinned: float | None
    h2d_pinned: float | None


def probe_model() -> Qwen:
    """A Qwen3 of PROBE_ARCHITECTURE with constant float32 weights (built abstractly and filled: a random
    initialisation costs more than the publish it serves)."""
    graphdef, state = abstract_model(probe_config())
    return nnx.merge(graphdef, nnx.map_state(lambda _, var: jnp.full(var.shape, 0.01, var.dtype), state))


def probe_config() -> ModelConfig:
    """PROBE_ARCHITECTURE with scanned layers, as the full-parameter reference configs have."""
    return ModelConfig.from_hf_dict(PROBE_ARCHITECTURE, RuntimeConfig("float32", "float32", "xla", "none", True))


def probe_directory(preferred: Path | None, nbytes: int) -> Path:
    """Where a probe publishes `nbytes`: `preferred` (a config's publish directory) when it exists here, else
    /dev/shm (node-local memory, where rollout.publish_dir puts published weights), else the system's
    temporary directory; the first writable one with room for two versions at once."""
    candidates = [preferred, SHM, Path(tempfile.gettempdir())]
    usable = [path for path in candidates if path is not None and path.is_dir() and os.access(path, os.W_OK)]
    roomy = [path for path in usable if shutil.disk_usage(path).free > 2 * nbytes + (64 << 20)]
    return (roomy or usable)[0]


def probe_publish(model: Qwen, directory: Path) -> PublishProbe:
    """Publishes `model` with `publish_weights` into a fresh temporary directory under `directory`: once to
    compile the gathers (as a run's first step does), then TIMED_PUBLISHES times, the fastest counting (the
    slower ones met load from other processes), then reads the last version's safetensors files back and removes
    the directory. Every process of a job calls it (the publish's barrier); each writes its own copy, as host
    replicas do."""
    root = Path(tempfile.mkdtemp(prefix=".tbjax-publish-probe-", dir=directory))
    try:
        published = publish_weights(model, root, 0, replicas=True, keep=1)
        seconds = []
        for version in range(1, TIMED_PUBLISHES + 1):
            start = time.perf_counter()
            published = publish_weights(model, root, version, replicas=True, keep=1)
            seconds.append(time.perf_counter() - start)
        files = sorted(published.glob("*.safetensors"))
        leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
        return PublishProbe(directory, sum(x.size for x in leaves), leaves[0].dtype.name,
                            sum(f.stat().st_size for f in files), min(seconds), _read_s(files))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _read_s(files: list[Path]) -> float:
    """Seconds to read `files` whole into one buffer, touched beforehand: the copy out of the page cache
    alone, without the first-touch page faults of fresh memory."""
    view = memoryview(bytearray(max(f.stat().st_size for f in files)))  # zero-filled: touched
    start = time.perf_counter()
    for path in files:
        size, done = path.stat().st_size, 0
        with path.open("rb", buffering=0) as file:
            while done < size:  # one read returns at most ~2 GiB
                read = file.readinto(view[done:size])
                if not read:
                    raise OSError(f"{path} ended after {done} of {size} bytes")
                done += read
    return time.perf_counter() - start


def measure_transfers(nbytes: int = 1 << 30, repeats: int = 3) -> Transfers | None:
    """Copies of a bfloat16 array of `nbytes` between the first local device and host memory, each way,
    pageable and pinned, median of `repeats`; None on a CPU, where a "transfer" is a memory copy."""
    device = jax.local_devices()[0]
    if device.platform == "cpu":
        return None
    on_device = SingleDeviceSharding(device, memory_kind=device.default_memory().kind)
    base = jax.device_put(jnp.zeros(nbytes // 2, jnp.bfloat16), on_device)
    host = np.asarray(base)
    d2h = _median_rate(nbytes, lambda: base + 1, np.asarray, repeats)
    h2d = _median_rate(nbytes, lambda: host, lambda h: jax.device_put(h, on_device), repeats)
    d2h_pinned = h2d_pinned = None
    if "pinned_host" in {memory.kind for memory in device.addressable_memories()}:
        pinned = SingleDeviceSharding(device, memory_kind="pinned_host")
        d2h_pinned = _median_rate(nbytes, lambda: base + 1, lambda x: jax.device_put(x, pinned), repeats)
        h2d_pinned = _median_rate(nbytes, lambda: jax.device_put(base + 1, pinned),
                                  lambda x: jax.device_put(x, on_device), repeats)
    return Transfers(device.device_kind, nbytes, d2h, h2d, d2h_pinned, h2d_pinned)


def _median_rate(nbytes: int, prepare: Callable[[], Any], copy: Callable[[Any], Any], repeats: int) -> float:
    """bytes/s of `copy(prepare())`, `prepare` untimed (a fresh source each time: a JAX array caches its
    host copy)."""
    seconds = []
    for _ in range(repeats):
        source = jax.block_until_ready(prepare())
        start = time.perf_counter()
        jax.block_until_ready(copy(source))
        seconds.append(time.perf_counter() - start)
    return nbytes / statistics.median(seconds)
