"""Shared fixtures. 24 forced CPU devices let one process build the reference 3x8 mesh; computations that
are not sharded still run on device 0 only."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=24")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory):
    """tiny_dir(arch) -> an HF directory holding that tiny architecture, written by torch + transformers (the
    independent reference) on first use."""
    from make_tiny_model import make_checkpoint

    root = tmp_path_factory.mktemp("tiny")
    made: dict[str, Path] = {}

    def get(arch: str, dtype: str = "float32") -> Path:
        key = f"{arch}-{dtype}"
        if key not in made:
            made[key] = make_checkpoint(root / key, arch, dtype)
        return made[key]

    return get
