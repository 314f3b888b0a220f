"""Shared fixtures. 24 forced CPU devices let one process build the reference 3x8 mesh; computations that
are not sharded still run on device 0 only."""

import gc
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=24")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))


@pytest.fixture(autouse=True, scope="module")
def release_compiled_programs():
    """Drop JAX's compiled programs after each test module. XLA's CPU programs keep their JIT code mapped
    (a few memory maps per program, hundreds for a model update) until their cache entries go; the whole
    suite in one process otherwise crosses Linux's vm.max_map_count (65530) and XLA dies mid-compile
    (SIGSEGV/SIGABRT in whichever test compiles next). Modules that never import jax pay nothing."""
    yield
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
        gc.collect()


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
