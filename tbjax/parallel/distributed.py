"""The processes of a multi-host job: joining it, and the few collective helpers every module uses to act in
lockstep (which process drives, a barrier, a broadcast from the driver, a gather to every process). With one
process each helper is a pass-through, so single-host code runs the same lines.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from tbjax.parallel.mesh import MeshError

HOST_NAME_BYTES = 255  # the longest host name POSIX allows


def is_driver() -> bool:
    """The process that drives rollouts, talks to the engines and writes logs and shared files."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Waits until every process reaches the barrier `name` (nothing to wait for with one process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def broadcast_from_driver(tree: Any) -> Any:
    """The driver's `tree` on every process; each must pass a tree of the driver's shapes and dtypes."""
    return multihost_utils.broadcast_one_to_all(tree)


def gather_to_every_process(tree: Any) -> Any:
    """Every process's shards of the global arrays in `tree`, assembled whole on every process (host memory)."""
    return multihost_utils.process_allgather(tree, tiled=True)


def process_hosts() -> list[str]:
    """Each process's host name, by process index (one collective)."""
    name = np.zeros(HOST_NAME_BYTES, np.uint8)
    encoded = socket.gethostname().encode()[:HOST_NAME_BYTES]
    name[:len(encoded)] = np.frombuffer(encoded, np.uint8)
    names = np.asarray(multihost_utils.process_allgather(name)).reshape(-1, HOST_NAME_BYTES)
    return [bytes(row).rstrip(b"\0").decode(errors="replace") for row in names]


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """How this process joins a multi-host job. All None = single process (or auto-detect)."""

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> DistributedConfig:
        """JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID, read once at the entry point."""
        num = environ.get("JAX_NUM_PROCESSES")
        pid = environ.get("JAX_PROCESS_ID")
        return cls(environ.get("JAX_COORDINATOR_ADDRESS"), int(num) if num else None, int(pid) if pid else None)

    def merged_over(self, fallback: DistributedConfig) -> DistributedConfig:
        """Explicit flags win over the environment."""
        return DistributedConfig(*(a if a is not None else b for a, b in zip(
            dataclasses.astuple(self), dataclasses.astuple(fallback), strict=True)))


def initialize_distributed(config: DistributedConfig, environ: Mapping[str, str] = os.environ) -> str:
    """Starts jax.distributed when the job spans processes. Returns how it was decided, for the log.

    Explicit flags / JAX_* variables come first; then SLURM (several tasks) and Cloud TPU pods, which
    jax.distributed detects itself; otherwise a single process and nothing to do.
    """
    if config.coordinator_address is not None:
        if config.num_processes is None or config.process_id is None:
            raise MeshError("a coordinator address needs num_processes and process_id too "
                            "(flags or JAX_NUM_PROCESSES / JAX_PROCESS_ID)")
        jax.distributed.initialize(config.coordinator_address, config.num_processes, config.process_id)
        return f"explicit coordinator {config.coordinator_address} (process {config.process_id}/{config.num_processes})"
    if int(environ.get("SLURM_NTASKS", "1")) > 1:
        jax.distributed.initialize()
        return f"SLURM ({environ['SLURM_NTASKS']} tasks)"
    if environ.get("TPU_WORKER_HOSTNAMES", "").count(",") > 0:
        jax.distributed.initialize()
        return "Cloud TPU pod"
    return "single process"
