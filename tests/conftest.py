"""Shared fixtures. 24 forced CPU devices let one process build the reference 3x8 mesh; computations that
are not sharded still run on device 0 only."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=24")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
