"""An HF safetensors directory read through memory maps, for loading weights in place (weight_loading.py).

A safetensors file is 8 bytes of little-endian header length, the JSON header (each tensor's dtype, shape and
`data_offsets` in the data that follows), then the data. Each file's data is memory-mapped, and a tensor (or a
range of its rows) is a numpy view of the mapped bytes: no host copy is made before the bytes go to the
device. Every file is checked complete when the directory is opened: its size must be 8 + the header length +
the largest offset its header names, so a file cut short (an interrupted copy) is refused before any tensor is
read, not found out halfway through a load.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from tbjax.models.hf.safetensors_reader import CheckpointError, SafetensorsReader
from tbjax.models.hf.safetensors_writer import HEADER_LENGTH_BYTES, NUMPY_DTYPES


@dataclasses.dataclass(frozen=True)
class StoredTensor:
    """Where one tensor's bytes lie: in `file`'s data, from `start` to `stop`."""

    file: str
    dtype: np.dtype
    shape: tuple[int, ...]
    start: int
    stop: int


class MappedCheckpoint(SafetensorsReader):
    """The tensors of an HF directory as views of its memory-mapped files. Opening it reads every file's header
    and refuses (CheckpointError) a file whose size its header does not account for."""

    def __init__(self, directory: str | Path):
        super().__init__(directory)
        self._stored: dict[str, StoredTensor] = {}
        self._data: dict[str, np.memmap] = {}  # file -> its data region, mapped on first read
        self._data_offset: dict[str, int] = {}
        for file in sorted(set(self.weight_map.values())):
            self._data_offset[file] = self._read_header(file)

    def _read_header(self, file: str) -> int:
        """Records `file`'s tensors and checks that its size is what its header says -> where its data starts."""
        path = self.directory / file
        size = path.stat().st_size
        with path.open("rb") as f:
            length = int.from_bytes(f.read(HEADER_LENGTH_BYTES), "little")
            if length > size - HEADER_LENGTH_BYTES:
                raise CheckpointError(f"{path}: its header claims {length} bytes, more than the file's {size}")
            header = json.loads(f.read(length))
        if not isinstance(header, dict):
            raise CheckpointError(f"{path}: its header is {type(header).__name__}, not an object")
        stop = 0
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            start, end = entry["data_offsets"]
            stop = max(stop, end)
            if entry["dtype"] not in NUMPY_DTYPES:
                raise CheckpointError(f"{path}: tensor {name} has dtype {entry['dtype']}, which is none of "
                                      f"safetensors' ({', '.join(NUMPY_DTYPES)})")
            if self.weight_map.get(name) == file:  # the index decides which file's copy is the tensor
                self._stored[name] = StoredTensor(file, NUMPY_DTYPES[entry["dtype"]], tuple(entry["shape"]), start,
                                                  end)
        expected = HEADER_LENGTH_BYTES + length + stop
        if size != expected:
            raise CheckpointError(f"{path} is {size} bytes but its header accounts for {expected}: the file is "
                                  f"{'incomplete (a copy or download cut short)' if size < expected else 'damaged'}; "
                                  "write or fetch it again")
        return HEADER_LENGTH_BYTES + length

    def rows(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows [start, stop) of tensor `name` (its first dim; stop None: to the end), a view of the mapped file."""
        stored = self._stored_tensor(name)
        row_bytes = stored.dtype.itemsize * math.prod(stored.shape[1:])
        stop = stored.shape[0] if stop is None else stop
        if stored.stop - stored.start != row_bytes * stored.shape[0] or not 0 <= start <= stop <= stored.shape[0]:
            raise CheckpointError(f"{self.directory}: tensor {name}'s offsets do not match its shape "
                                  f"{list(stored.shape)} and dtype {stored.dtype}")
        data = self._mapped(stored.file)
        first = stored.start + start * row_bytes
        rows = data[first:first + (stop - start) * row_bytes].view(stored.dtype)
        return rows.reshape(stop - start, *stored.shape[1:])

    def _stored_tensor(self, name: str) -> StoredTensor:
        if name not in self._stored:
            raise CheckpointError(f"{self.directory}: tensor {name!r} is not in the checkpoint")
        return self._stored[name]

    def _mapped(self, file: str) -> np.memmap:
        if file not in self._data:
            self._data[file] = np.memmap(self.directory / file, np.uint8, "r", offset=self._data_offset[file])
        return self._data[file]
