"""config.json as transformers 4 reads it, for servers that pin it (sglang-jax pins 4.57).

transformers 5 writes the rotary settings as one `rope_parameters` dict; 4.x reads top-level `rope_theta`
and `rope_scaling` and ignores `rope_parameters` without a word, so a server on 4.x would silently run a
theta-1e6 Qwen3 with its class default 1e4 and sample different tokens. 4.x servers also pick the model
class from `architectures` and the dtype from `torch_dtype`. Nothing else differs for the Qwen families
tbjax exports, and tbjax itself reads both spellings (`tbjax.models.architecture`), so the v4 file loads here too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ARCHITECTURE_CLASSES = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}


def transformers4_config(hf: dict[str, Any]) -> dict[str, Any]:
    """A copy of the HF config dict `hf` (either spelling) in transformers 4's spelling."""
    out = dict(hf)
    rope = dict(out.pop("rope_parameters", None) or {})
    if "rope_theta" in rope:
        out["rope_theta"] = rope.pop("rope_theta")
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        out["rope_scaling"] = rope
    dtype = out.get("dtype") or out.get("torch_dtype")
    if dtype:
        out["torch_dtype"] = dtype
    if not out.get("architectures") and out.get("model_type") in ARCHITECTURE_CLASSES:
        out["architectures"] = [ARCHITECTURE_CLASSES[out["model_type"]]]
    return out


def write_transformers4_config(hf_dir: str | Path) -> Path:
    """Rewrites `hf_dir`/config.json (as `save_pretrained` wrote it) in transformers 4's spelling, atomically:
    a server may be reading the directory."""
    path = Path(hf_dir) / "config.json"
    staging = path.with_name(".config.json.tmp")
    staging.write_text(json.dumps(transformers4_config(json.loads(path.read_text())), indent=2, sort_keys=True))
    os.replace(staging, path)
    return path
