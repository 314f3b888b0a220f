"""Flax NNX Qwen models (Qwen2/2.5, Qwen3, Qwen3-MoE, Qwen3.5/3.6 hybrids) and their Hugging Face
import/export.

Public API (stable): `from_pretrained(path, *, dtype="float32", mesh=None)` and
`save_pretrained(model, out_dir)`.
"""

from tbjax.models.architecture import ModelConfig, UnsupportedModelError
from tbjax.models.hf.exporter import save_pretrained
from tbjax.models.hf.importer import from_pretrained
from tbjax.models.hf.safetensors_reader import CheckpointError
from tbjax.models.qwen import Qwen
from tbjax.sections.model import RuntimeConfig

__all__ = [
    "CheckpointError", "ModelConfig", "Qwen", "RuntimeConfig", "UnsupportedModelError",
    "from_pretrained", "save_pretrained",
]
