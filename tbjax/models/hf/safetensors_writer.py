"""Safetensors files written in place: the header first, from the names, shapes and dtypes known ahead, then
each tensor's bytes written straight to their offset in the file, in any order, from any thread.

safetensors' own `save_file` needs every tensor of a file in memory at once and copies each again into its
output buffer; a publish of the policy would hold a whole shard (gigabytes) in host memory and copy it twice.
Here a tensor costs one copy, the kernel's from the caller's array into the page cache, and the caller
produces the next tensors meanwhile.

The files hold `save_file`'s bytes for the same tensors and metadata: tensors ordered by dtype (safetensors'
own order, widest first) then name, the same compact JSON header, the same data. Only the header's padding of
spaces differs: `save_file` pads it to 8 bytes, this to where the data starts on a `DATA_ALIGNMENT` boundary.
Tensors whose sizes are multiples of it (every weight matrix and norm of a Qwen) then lie aligned in the file,
and a memory-mapped one can be used where it lies: JAX's CPU client takes an aligned host array without
copying it, which spares an in-place load on CPU a copy of every tensor. Readers parse the header as JSON, for
which the extra spaces are whitespace.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

import ml_dtypes
import numpy as np

# safetensors' dtype names, in the order of its Dtype enum: a file lists its tensors by this order, last first
DTYPE_NAMES: dict[np.dtype, str] = {np.dtype(t): name for t, name in (
    (np.bool_, "BOOL"), (np.uint8, "U8"), (np.int8, "I8"), (ml_dtypes.float8_e5m2, "F8_E5M2"),
    (ml_dtypes.float8_e4m3fn, "F8_E4M3"), (np.int16, "I16"), (np.uint16, "U16"), (np.float16, "F16"),
    (ml_dtypes.bfloat16, "BF16"), (np.int32, "I32"), (np.uint32, "U32"), (np.float32, "F32"), (np.float64, "F64"),
    (np.int64, "I64"), (np.uint64, "U64"),
)}
DTYPE_RANK = {dtype: rank for rank, dtype in enumerate(DTYPE_NAMES)}
NUMPY_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
HEADER_LENGTH_BYTES = 8  # the little-endian u64 that precedes the JSON header
DATA_ALIGNMENT = 64  # bytes: where the data starts in the file; what JAX's CPU client needs to take it uncopied


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """A tensor as a file's header describes it."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def file_header(specs: Iterable[TensorSpec], metadata: Mapping[str, str]) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """The bytes a safetensors file starts with (length, JSON header, padding) and each tensor's (start, end)
    within the data that follows."""
    ordered = sorted(specs, key=lambda s: (-_rank(s.dtype), s.name))
    header: dict[str, object] = {"__metadata__": dict(sorted(metadata.items()))} if metadata else {}
    offsets: dict[str, tuple[int, int]] = {}
    start = 0
    for spec in ordered:
        offsets[spec.name] = (start, start + spec.nbytes)
        header[spec.name] = {"dtype": DTYPE_NAMES[spec.dtype], "shape": list(spec.shape),
                             "data_offsets": [start, start + spec.nbytes]}
        start += spec.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-(HEADER_LENGTH_BYTES + len(text)) % DATA_ALIGNMENT)
    return struct.pack("<Q", len(text)) + text, offsets


def _rank(dtype: np.dtype) -> int:
    if dtype not in DTYPE_RANK:
        raise TypeError(f"safetensors has no dtype for {dtype}; export in one of "
                        f"{', '.join(str(d) for d in DTYPE_NAMES)}")
    return DTYPE_RANK[dtype]


class SafetensorsFile:
    """One safetensors file being written: the header is on disk when this is built, and `write` puts a tensor
    (or a range of its rows) at its place with one positioned write, from any thread. Nothing is fsynced: a
    publish is rewritten by a resumed run, and an export is renamed into place only once complete."""

    def __init__(self, path: str | Path, specs: Iterable[TensorSpec], metadata: Mapping[str, str]) -> None:
        specs = list(specs)
        self.path = Path(path)
        self.specs = {spec.name: spec for spec in specs}
        head, self.offsets = file_header(specs, metadata)
        self.data_start = len(head)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        _write_all(self._fd, memoryview(head), 0)
        os.ftruncate(self._fd, self.data_start + sum(spec.nbytes for spec in specs))

    def write(self, name: str, values: np.ndarray, first_row: int = 0) -> None:
        """Writes `values` as tensor `name` (its rows from `first_row` on, for a part of a fused tensor)."""
        spec = self.specs[name]
        if values.dtype != spec.dtype or values.shape[1:] != spec.shape[1:] or (
                first_row + (values.shape[0] if values.ndim else 1) > (spec.shape[0] if spec.shape else 1)):
            raise ValueError(f"{name}: {values.dtype}{list(values.shape)} from row {first_row} does not fit the "
                             f"header's {spec.dtype}{list(spec.shape)}")
        row_bytes = spec.nbytes // spec.shape[0] if spec.shape and spec.shape[0] else 0
        data = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
        _write_all(self._fd, data.data, self.data_start + self.offsets[name][0] + first_row * row_bytes)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    """pwrite until every byte is written (a regular file may take fewer bytes at a time)."""
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written
