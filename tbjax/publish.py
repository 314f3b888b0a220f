"""Weight publication: the trained policy as an HF safetensors directory `root/v{version}` that rollout
engines load, and an atomic `latest` pointer.

Readers never see a half-written version: the directory is written under a temporary name and renamed,
then `latest` (a symlink) is replaced by rename too. The same code path as `tbjax.export`, so what the
engines load is exactly what transformers would load.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import jax
from jax.experimental import multihost_utils

from tbjax.models import Qwen, save_pretrained
from tbjax.models.hf_config_v4 import write_transformers4_config

LATEST = "latest"


def version_dir(root: str | Path, version: int | str) -> Path:
    return Path(root) / f"v{version}"


def publish_weights(model: Qwen, root: str | Path, version: int | str, *, tokenizer_dir: str | Path | None = None,
                    dtype: str | None = None, transformers4_config: bool = False) -> Path:
    """Writes `model` as root/v{version} (HF format) and points root/latest at it. Returns the directory.
    `transformers4_config`: config.json for servers that pin transformers 4 (sglang-jax)."""
    root = Path(root)
    final = version_dir(root, version)
    staging = root / f".v{version}.partial"
    if jax.process_index() == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    save_pretrained(model, staging, tokenizer_dir=tokenizer_dir, dtype=dtype)
    if jax.process_index() == 0:
        if transformers4_config:
            write_transformers4_config(staging)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        pointer = root / f".{LATEST}.tmp"
        pointer.unlink(missing_ok=True)
        pointer.symlink_to(final.name)
        os.replace(pointer, root / LATEST)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"published weights v{version}")
    return final


def latest_version(root: str | Path) -> Path | None:
    """The directory `latest` points at, or None before the first publication."""
    pointer = Path(root) / LATEST
    return pointer.resolve() if pointer.is_symlink() else None
