"""Tiny random checkpoints written by torch + transformers (the independent reference), once a session."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from make_tiny_model import make_checkpoint  # noqa: E402

from tbjax.assets.tiny import TINY_ARCHITECTURES  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory):
    """tiny_dir(arch) -> an HF directory holding that tiny architecture (made on first use)."""
    root = tmp_path_factory.mktemp("tiny")
    made: dict[str, Path] = {}

    def get(arch: str, dtype: str = "float32") -> Path:
        key = f"{arch}-{dtype}"
        if key not in made:
            made[key] = make_checkpoint(root / key, arch, dtype)
        return made[key]

    return get


ALL_ARCHS = sorted(TINY_ARCHITECTURES)
