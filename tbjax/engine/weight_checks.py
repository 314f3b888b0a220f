"""What the engine checks before it serves new weights: that the directory reads as an HF checkpoint of the
served architecture, and that no parameter holds NaN or Inf.

Every failure is a `WeightsError` (a ValueError: `tbjax.serve` answers it with 400 naming the problem), raised
before anything is swapped, so the engine serves on with the weights it had. A checkpoint that cannot be read
(a corrupt safetensors header, a truncated file, a `null` config, a broken index) fails in whatever library
read it; it is the caller's input, so any exception there is reported as unreadable weights, never as a 500.
Config keys that describe the file rather than the model (`transformers_version`, `torch_dtype`,
`architectures`) do not count as a different architecture: the parsed architecture is compared instead.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from tbjax.models import Qwen, from_pretrained
from tbjax.models.architecture import ModelConfig


class WeightsError(ValueError):
    """Weights the engine will not serve."""


# config.json's sizes, compared with the served model's before the config is parsed: building the layout of a
# billion layers would take the server's memory before any check could refuse it
SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
         "head_dim", "vocab_size", "num_experts", "moe_intermediate_size")


def load_servable(hf_dir: str | Path, mesh: Mesh | None, served: ModelConfig) -> Qwen:
    """The model in `hf_dir`, read with the served runtime (dtypes, attention) and checked, sharded over the
    served model's `mesh` (None: one device, as the served model is)."""
    try:
        refuse_other_sizes(Path(hf_dir), served)
        model = from_pretrained(hf_dir, mesh=mesh, runtime=served.runtime)
    except (WeightsError, MemoryError):
        raise
    except Exception as error:  # the checkpoint is outside input: any reader's failure means it is unreadable
        raise WeightsError(f"{hf_dir} cannot be read as an HF checkpoint ({type(error).__name__}: {error}); "
                           "export it again (python -m tbjax.export) or publish a complete directory") from error
    differing = [f.name for f in dataclasses.fields(ModelConfig)
                 if f.compare and getattr(model.config, f.name) != getattr(served, f.name)]
    if differing:
        raise WeightsError(f"{hf_dir} holds a different architecture than the served model ({', '.join(differing)} "
                           "differ); weights can be refreshed, architectures cannot")
    refuse_non_finite(nnx.state(model), str(hf_dir))
    return model


def refuse_other_sizes(hf_dir: Path, served: ModelConfig) -> None:
    """Raises WeightsError when config.json (or its text_config) gives a size other than the served model's."""
    if not served.hf_config:  # a model built in code: the parsed comparison after loading decides
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
            raise WeightsError(f"{hf_dir} holds a different architecture than the served model ("
                               f"{', '.join(differing)} differ); weights can be refreshed, architectures cannot")


@jax.jit
def _finite(state: nnx.State) -> nnx.State:
    return jax.tree.map(lambda a: jnp.all(jnp.isfinite(a)), state)


def refuse_non_finite(state: nnx.State, source: str) -> None:
    """Raises WeightsError naming the parameters of `state` that hold NaN or Inf (one pass over them)."""
    flags = jax.device_get(_finite(state))
    bad = [jax.tree_util.keystr(path) for path, ok in jax.tree_util.tree_leaves_with_path(flags) if not ok]
    if bad:
        raise WeightsError(f"{source}: {len(bad)} parameters hold NaN or Inf ({', '.join(bad[:4])}"
                           f"{', ...' if len(bad) > 4 else ''}); the engine serves on with its weights. A training "
                           "step that diverged produced them: lower the learning rate or resume from an earlier "
                           "checkpoint")
