"""Resolves the configured model path: an HF directory as is, or `tiny:<arch>` made once in the run
directory (so the laptop default needs no download and no torch)."""

from __future__ import annotations

from pathlib import Path

import jax

from tbjax.assets.tiny import ARCHITECTURES, make_flax_checkpoint
from tbjax.config import Config, ConfigError
from tbjax.models import ModelConfig
from tbjax.parallel.distributed import barrier, is_driver

TINY_PREFIX = "tiny:"


def resolve_model_dir(path: str, run_dir: Path) -> Path:
    if not path.startswith(TINY_PREFIX):
        return Path(path)
    arch = path[len(TINY_PREFIX):]
    if arch not in ARCHITECTURES:
        raise ConfigError(f"model.path={path!r}: unknown tiny architecture; choose from "
                         f"{', '.join(TINY_PREFIX + a for a in sorted(ARCHITECTURES))} or give an HF directory")
    target = run_dir / "assets" / f"tiny-{arch}"
    if is_driver() and not (target / "config.json").is_file():
        make_flax_checkpoint(target, arch)
    if jax.process_count() > 1:
        barrier(f"tiny model {arch} written")
    return target


def planned_model_config(config: Config) -> ModelConfig:
    """The architecture to plan memory and meshes with: `model.architecture` where the checkpoint is not on
    this machine (planning a cluster run on a laptop), else the checkpoint's own config.json."""
    architecture = config.model.architecture
    if architecture is not None and not Path(config.model.path).is_dir():
        return ModelConfig.from_hf_dict(architecture, config.model.runtime())
    model_dir = resolve_model_dir(config.model.path, config.run.directory)
    return ModelConfig.from_pretrained(model_dir, config.model.runtime())
