"""Shared fixtures. 24 forced CPU devices let one process build the reference 3x8 mesh; computations that
are not sharded still run on device 0 only.

The suite's layout (tests/test_suite_layout.py checks it):
- The folders mirror the code (kept by review, not checked): a room's tests live in the same room under tests/
  (rollout/engines/ in tests/rollout/engines/, tbjax/sections/ in tests/tbjax/sections/); a behaviour that spans
  rooms is tested in their common parent (tests/rollout/test_episode_e2e.py), a hostile input in tests/faults/.
- `test_*.py` modules hold tests, named after the module they test (tests/rollout/test_compare.py tests
  rollout/compare.py) or, for a behaviour that spans modules, after that behaviour (test_episode_e2e.py).
  No module imports a test module.
- What several modules share (helpers, fakes, constants) lives in support modules: `support.py` for what a
  folder's tests share, `<topic>_support.py` for one topic (tests/rollout/campaign_support.py). Only support
  modules are imported, from anywhere in tests/.
- A conftest.py holds fixtures and hooks only and is never imported; a fixture that several folders need lives
  in the conftest of their nearest common parent (here, for the whole suite).
- Any other module is a script a test runs as a subprocess (tests/tbjax/trainer/multiprocess_train.py), with an
  `if __name__ == "__main__":` block; nothing imports it.
"""

import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.envs.fake_openai_support import fake_openai  # noqa: F401 (envs, faults and rollout tests use it)

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=24")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache per run, shared by the xdist workers (they inherit this process's
# environment) and the subprocesses tests start (tests/subprocess_support.py): the CLI, pipeline, wheel and
# multi-process tests compile the same tiny models' programs again in every process they start. Fresh each
# run and removed after it, so no result rests on a cache an earlier checkout left.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = OWN_CACHE = tempfile.mkdtemp(prefix="tbjax-tests-jit-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # the tiny models' programs compile fast
else:
    OWN_CACHE = None
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))


GIB_PER_WORKER = 4  # a worker's peak: JAX with 24 forced devices, torch, and a heavy test's tiny models
MAX_WORKERS = 8  # beyond this, the few longest test files bound the wall time anyway

MAPS_BEFORE_RELEASE = 16_000  # a heavy test adds a few thousand; Linux's vm.max_map_count is 65530
PROCESS_MAPS = Path("/proc/self/maps")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per usable core, as many as memory holds. Most tests are one Python thread that
    compiles, so workers on separate cores overlap well."""
    cores = len(os.sched_getaffinity(0))
    memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return max(1, min(cores, int(memory_gib // GIB_PER_WORKER), MAX_WORKERS))


def pytest_unconfigure(config: pytest.Config) -> None:
    if OWN_CACHE is not None:
        shutil.rmtree(OWN_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def release_compiled_programs():
    """Drop JAX's compiled programs once the process holds many memory maps. XLA's CPU programs keep their
    JIT code mapped (about 180 maps for a small model's forward+backward) until their cache entries go; the
    whole suite in one process crossed vm.max_map_count and XLA died mid-compile (SIGSEGV/SIGABRT in
    whichever test compiled next). Dropping only above a threshold keeps the programs that a module's tests
    share, so they are not compiled again for every test."""
    yield
    if "jax" in sys.modules and PROCESS_MAPS.exists() and _count_lines(PROCESS_MAPS) > MAPS_BEFORE_RELEASE:
        sys.modules["jax"].clear_caches()
        gc.collect()


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


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


@pytest.fixture(scope="session")
def tiny_interpreter(tmp_path_factory: pytest.TempPathFactory):
    """An Interpreter over the byte-level BPE tokenizer tbjax.assets.tokenizer trains here (no download), for
    tests that play real episodes with a scripted policy (the oracle's demonstrations and its slips)."""
    from rollout.interpret import Interpreter
    from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer

    return Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), tmp_path_factory.mktemp("tok")))
