"""Reads tensors (or slices of them) from an HF directory of one or many safetensors files.

Files are opened lazily and kept open, so loading reads only the bytes each device's shard needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import safe_open

from tbjax.models.hf.safetensors_writer import NUMPY_DTYPES

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class CheckpointError(ValueError):
    """The checkpoint directory is incomplete or inconsistent."""


class SafetensorsReader:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        index = self.directory / INDEX_FILE
        if index.is_file():
            self.weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        elif (self.directory / SINGLE_FILE).is_file():
            with safe_open(self.directory / SINGLE_FILE, "np") as f:
                self.weight_map = dict.fromkeys(f.keys(), SINGLE_FILE)
        else:
            raise CheckpointError(
                f"{self.directory} has neither {SINGLE_FILE} nor {INDEX_FILE}: not an HF safetensors checkpoint "
                "(convert .bin checkpoints with transformers' save_pretrained(safe_serialization=True))"
            )
        missing = sorted({f for f in self.weight_map.values() if not (self.directory / f).is_file()})
        if missing:
            raise CheckpointError(
                f"{self.directory}: shard file(s) {', '.join(missing)} named in {INDEX_FILE} are missing; "
                "the download or copy is incomplete - fetch the missing files again."
            )
        self._handles: dict[str, safe_open] = {}

    def _handle(self, name: str) -> safe_open:
        if name not in self.weight_map:
            raise CheckpointError(f"{self.directory}: tensor {name!r} is not in the checkpoint; is the "
                                  "config.json from the same model as the weights?")
        file = self.weight_map[name]
        if file not in self._handles:
            self._handles[file] = safe_open(self.directory / file, "np")
        return self._handles[file]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._handle(name).get_slice(name).get_shape())

    def dtype(self, name: str) -> np.dtype:
        return NUMPY_DTYPES[self._handle(name).get_slice(name).get_dtype()]

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        return self._handle(name).get_slice(name)[index]

    def names(self) -> set[str]:
        return set(self.weight_map)
