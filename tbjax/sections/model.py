"""The `model` and `mesh` sections: which checkpoint, how it runs (dtypes, attention kernel, remat, scanned
layers) and on which devices. `RuntimeConfig` is the models' own record of how to run an architecture, here
because parsing a config imports no JAX."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from tbjax.sections.base import Section

AttentionImpl = Literal["xla", "cudnn", "splash", "triton"]
RematPolicy = Literal["none", "full", "dots", "dots_no_batch"]


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How to run an architecture (our choices, not the checkpoint's); `ModelSection.runtime()` gives a run's.
    Its own defaults are the plainest (float32, no remat, no scan), which parity tests compare against."""

    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    attention_impl: AttentionImpl = "xla"
    remat: RematPolicy = "none"
    scan_layers: bool = False
    # Gated DeltaNet: tokens solved in parallel per chunk (a power of two; the recurrence runs across chunks),
    # and chunks whose parallel part is done at once (None: all; a few keep a CPU's working set in cache)
    linear_chunk_size: int = 64
    linear_chunks_per_step: int | None = 4


class ModelSection(Section):
    # An HF directory, or "tiny:<arch>" for a tiny random Qwen made on the spot (tbjax.assets.tiny).
    path: str = "tiny:qwen3"
    # The HF config.json contents, for planning (--dry-run) on a machine without the checkpoint.
    architecture: dict[str, Any] | None = None
    param_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    compute_dtype: Literal["float32", "bfloat16"] = "bfloat16"
    attention_impl: AttentionImpl = "xla"
    remat: RematPolicy = "full"
    scan_layers: bool = True

    def runtime(self) -> RuntimeConfig:
        return RuntimeConfig(self.param_dtype, self.compute_dtype, self.attention_impl, self.remat, self.scan_layers)


class MeshSection(Section):
    shape: str = "1"  # "3x8" = hosts x local devices
    layout: list[str] | None = None  # which axes the shape's numbers fill; default data, fsdp[, tensor]
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
