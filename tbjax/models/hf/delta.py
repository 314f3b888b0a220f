"""Delta publishing: between whole versions, a publish writes only what changed since the version before it.

Two granularities, compared bit for bit in the published dtype:
- `tensors`: the HF tensors with any changed element, as an HF directory holding just those (config.json and
  the tokenizer beside them). A loader that sets the tensors a directory holds and leaves the others applies it
  as is: `tbjax.serve` does, and so does SGLang's stock `/update_weights_from_disk` by its code (its model
  loader iterates over the tensors the files hold and loads each into its parameter; nothing checks that all
  are there). Its rollback after a failed load re-reads the previous path, which for a delta is not a whole
  model; the trainer's weight probe then fails the step.
- `elements`: each changed tensor's changed elements, as their flat indices (uint32) and new values, in one
  file (`delta.safetensors`: `<name>.indices`, `<name>.values`); `tbjax.serve` applies it in place. With float32
  master weights most of a step's updates round away in a bfloat16 publish, so few elements change.

`delta.json` in a delta's directory names the version it applies on (`previous`) and the whole version its
chain starts from (`base`); a server serving another version refuses it. A whole version comes first (a
resumed run's first publish too, as the publisher starts empty) and every `full_every` publishes. The publisher
keeps the last published tensors in host memory to compare against: the published dtype's bytes of the model.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Literal

import numpy as np

from tbjax.models.hf.exporter import Sink, export_dtype, fill_hf_tensors, hf_specs, write_hf_directory
from tbjax.models.hf.safetensors_writer import SafetensorsFile, TensorSpec
from tbjax.models.hf.versions import DELTA_FILE, publish_version
from tbjax.models.qwen import Qwen
from tbjax.parallel.distributed import is_driver

ELEMENTS_FILE = "delta.safetensors"
Granularity = Literal["tensors", "elements"]


class DeltaPublisher:
    """Publishes a model's versions under one root: whole ones every `full_every` publishes, deltas between."""

    def __init__(self, granularity: Granularity, full_every: int) -> None:
        if full_every < 1:
            raise ValueError(f"full_every={full_every}: a whole version comes at least every publish (1)")
        self.granularity, self.full_every = granularity, full_every
        self.published: dict[str, np.ndarray] = {}  # HF name -> the values last published
        self.version: str | None = None  # the version last published
        self.base: str | None = None  # the newest whole version
        self.since_full = 0

    def publish(self, model: Qwen, root: str | Path, version: int | str, *, dtype: str | None = None,
                tokenizer_dir: str | Path | None = None, replicas: bool = False, keep: int | None = None,
                ) -> Path:
        """Writes `model` as root/v{version}, whole or as a delta on the version published before, and points
        root/latest at it (tbjax.models.hf.versions' protocol). Every process calls it."""
        np_dtype = export_dtype(model.config, dtype)
        owner = replicas or is_driver()
        whole = self.version is None or self.since_full + 1 >= self.full_every
        changes = _Changes(self.published, hf_specs(model, np_dtype), compare=not whole)

        def write(staging: Path) -> None:
            if not owner:
                fill_hf_tensors(model, np_dtype, None)
            elif whole:
                write_hf_directory(model, staging, np_dtype, hf_specs(model, np_dtype),
                                   lambda to: fill_hf_tensors(model, np_dtype, _tee(changes.receive, to)),
                                   tokenizer_dir=tokenizer_dir)
            else:
                fill_hf_tensors(model, np_dtype, changes.receive)
                self._write_delta(model, staging, np_dtype, changes, tokenizer_dir)
        path = publish_version(root, version, write, owner=owner, collective=True, keep=keep)
        self.version, self.since_full = f"v{version}", 0 if whole else self.since_full + 1
        self.base = self.version if whole else self.base
        return path

    def _write_delta(self, model: Qwen, staging: Path, dtype: np.dtype, changes: _Changes,
                     tokenizer_dir: str | Path | None) -> None:
        changed = changes.changed()
        if self.granularity == "tensors":
            specs = [spec for spec in changes.specs if spec.name in changed]

            def produce(sink: Sink) -> None:
                for spec in specs:
                    sink(spec.name, 0, self.published[spec.name])
            write_hf_directory(model, staging, dtype, specs, produce, tokenizer_dir=tokenizer_dir,
                               unmodelled=False)
        else:
            staging.mkdir(parents=True, exist_ok=True)
            _write_elements(staging / ELEMENTS_FILE, {name: self.published[name] for name in changed}, changed)
            write_hf_directory(model, staging, dtype, [], lambda sink: None, tokenizer_dir=tokenizer_dir,
                               unmodelled=False)
        record = {"previous": self.version, "base": self.base, "granularity": self.granularity,
                  "tensors": sorted(changed), "elements": int(sum(len(i) for i in changed.values()))}
        (staging / DELTA_FILE).write_text(json.dumps(record, indent=1))


class _Changes:
    """The tensors of one publish as they arrive (from the copy threads), compared with and written over the
    publisher's last published values; which elements changed, by tensor."""

    def __init__(self, published: dict[str, np.ndarray], specs: list[TensorSpec], compare: bool) -> None:
        self.published, self.specs, self.compare = published, specs, compare
        for spec in specs:
            if spec.name not in published or published[spec.name].dtype != spec.dtype:
                published[spec.name] = np.zeros(spec.shape, spec.dtype)  # a first publish is whole
        self._changed: dict[str, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def receive(self, name: str, first_row: int, values: np.ndarray) -> None:
        held = self.published[name]
        region = held.reshape(-1) if held.ndim == 0 else held[first_row:first_row + values.shape[0]]
        if self.compare:
            self._record(name, first_row, region, values.reshape(region.shape))
        np.copyto(region, values.reshape(region.shape))

    def _record(self, name: str, first_row: int, region: np.ndarray, values: np.ndarray) -> None:
        held = self.published[name]
        bits = np.dtype(f"u{values.dtype.itemsize}")
        differ = np.flatnonzero(region.view(bits) != values.view(bits))
        if len(differ):
            offset = first_row * (held[0].size if held.ndim else 1)
            with self._lock:
                self._changed.setdefault(name, []).append(differ + offset)

    def changed(self) -> dict[str, np.ndarray]:
        """The changed tensors' changed elements (flat indices, ascending)."""
        return {name: np.sort(np.concatenate(parts)).astype(np.int64) for name, parts in self._changed.items()}


def _tee(first: Sink, second: Sink) -> Sink:
    """A sink that hands each tensor to `first`, then to `second`."""
    def both(name: str, first_row: int, values: np.ndarray) -> None:
        first(name, first_row, values)
        second(name, first_row, values)
    return both


def _write_elements(path: Path, values: dict[str, np.ndarray], indices: dict[str, np.ndarray]) -> None:
    """The changed elements of each tensor: flat indices (uint32, or int64 for tensors of 2**32 elements or
    more) and their new values."""
    kinds = {name: np.dtype(np.uint32 if values[name].size < 2**32 else np.int64) for name in indices}
    specs = [TensorSpec(f"{name}.indices", (len(where),), kinds[name]) for name, where in indices.items()]
    specs += [TensorSpec(f"{name}.values", (len(where),), values[name].dtype) for name, where in indices.items()]
    out = SafetensorsFile(path, specs, {"format": "tbjax-delta"})
    try:
        for name, where in indices.items():
            out.write(f"{name}.indices", where.astype(kinds[name]))
            out.write(f"{name}.values", values[name].reshape(-1)[where])
    finally:
        out.close()
