"""What the engine checks before it serves new weights: that the directory reads as an HF checkpoint of the
served architecture, and that no parameter holds NaN or Inf.

Every failure is a `WeightsError` (a ValueError: `tbjax.serve` answers it with 400 naming the problem). The
directory checks run before any parameter changes (weight_loading.py's pre-flight), as does `set_state`'s
non-finite check, so the engine serves on with the weights it had. A checkpoint that cannot be read (a corrupt
safetensors header, a truncated file, a `null` config, a broken index) fails in whatever library read it; it
is the caller's input, so any exception there is reported as unreadable weights (`unreadable`), never as a
500. Config keys that describe the file rather than the model (`transformers_version`, `torch_dtype`,
`architectures`) do not count as a different architecture: the parsed architecture is compared instead.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models.architecture import ModelConfig


class WeightsError(ValueError):
    """Weights the engine will not serve."""


# config.json's sizes, compared with the served model's before the config is parsed: building the layout of a
# billion layers would take the server's memory before any check could refuse it
SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
         "head_dim", "vocab_size", "num_experts", "moe_intermediate_size")
# where NaN or Inf weights come from, and what to do about them
DIVERGED = ("A training step that diverged produced them: lower the learning rate or resume from an earlier "
            "checkpoint")


def unreadable(hf_dir: str | Path, error: BaseException) -> WeightsError:
    """The error for a directory that a reader failed on: outside input, so a 400 naming it, never a 500."""
    return WeightsError(f"{hf_dir} cannot be read as an HF checkpoint ({type(error).__name__}: {error}); "
                        "export it again (python -m tbjax.export) or publish a complete directory")


def refuse_other_architecture(hf_dir: str | Path, parsed: ModelConfig, served: ModelConfig) -> None:
    """Raises WeightsError when `parsed` (hf_dir's config.json, read with the served runtime) describes another
    model than `served`: new weights can be published, not a new architecture."""
    differing = [f.name for f in dataclasses.fields(ModelConfig)
                 if f.compare and getattr(parsed, f.name) != getattr(served, f.name)]
    if differing:
        raise _other_architecture(hf_dir, differing)


def refuse_other_sizes(hf_dir: Path, served: ModelConfig) -> None:
    """Raises WeightsError when config.json (or its text_config) gives a size other than the served model's."""
    if not served.hf_config:  # a model built in code: the parsed comparison (refuse_other_architecture) decides
        return
    raw = json.loads((hf_dir / "config.json").read_text())
    if not isinstance(raw, dict):
        raise WeightsError(f"{hf_dir} cannot be read as an HF checkpoint: its config.json holds "
                           f"{type(raw).__name__}, not an object")
    for ours, theirs in ((served.hf_config, raw), (served.hf_config.get("text_config") or {},
                                                   raw.get("text_config") or {})):
        if not isinstance(theirs, dict):
            raise WeightsError(f"{hf_dir} cannot be read as an HF checkpoint: its config.json's text_config is "
                               "not an object")
        differing = [key for key in SIZES if theirs.get(key) != ours.get(key)]
        if differing:
            raise _other_architecture(hf_dir, differing)


def _other_architecture(hf_dir: str | Path, differing: list[str]) -> WeightsError:
    return WeightsError(f"{hf_dir} holds a different architecture than the served model ({', '.join(differing)} "
                        "differ); new weights can be published, not a new architecture")


@jax.jit
def _finite(state: nnx.State) -> nnx.State:
    return jax.tree.map(lambda a: jnp.all(jnp.isfinite(a)), state)


def refuse_non_finite(state: nnx.State, source: str) -> None:
    """Raises WeightsError naming the parameters of `state` that hold NaN or Inf (one pass over them)."""
    flags = jax.device_get(_finite(state))
    bad = [jax.tree_util.keystr(path) for path, ok in jax.tree_util.tree_leaves_with_path(flags) if not ok]
    if bad:
        raise WeightsError(f"{source}: {len(bad)} parameters hold NaN or Inf ({', '.join(bad[:4])}"
                           f"{', ...' if len(bad) > 4 else ''}); the engine serves on with its weights. {DIVERGED}")
