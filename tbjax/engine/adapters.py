"""LoRA adapters served by `tbjax.serve --enable-lora`, with SGLang's endpoints and semantics: adapters are
loaded by name from PEFT directories (/load_lora_adapter), dropped by name (/unload_lora_adapter), and a
/generate request names the one it runs under (`lora_path`; none: the base model).

The served model carries adapters of the server's `--max-lora-rank` on `--lora-target-modules`, all zero (the
base) until a request names a loaded adapter. An adapter of rank r <= that maximum and alpha a is padded to
the server's rank (zero columns of A and rows of B leave the product as it is) with its scale a / r folded
into B (the served adapters have alpha = rank, a scale of 1), so every adapter runs the same compiled
programs, and an adapter of the server's own rank and a scale of 1 is served bit for bit as trained.

One adapter decodes at a time: a request naming another waits until the running ones finish, then the engine
swaps that adapter in as it swaps weights (the prefix cache is forgotten: cached keys belong to the adapter
that computed them). Requests for the running adapter that arrive while another waits queue behind it, so
neither starves. In training every request of a step names the adapter just published, which costs one swap
per publish; SGLang instead batches several adapters together, which a CPU test server does not need.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from flax import nnx

from tbjax.engine.jax_engine import JaxEngine
from tbjax.engine.weight_checks import WeightsError
from tbjax.models.hf.peft_adapter import adapter_loras, adapter_values, read_adapter
from tbjax.models.lora import add_adapters
from tbjax.models.qwen import Qwen
from tbjax.sections.lora import LoraError, LoraSpec

# HF module name -> (A [in, rank], B [rank, out]) float32
AdapterValues = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class LoadedAdapter:
    path: str
    values: AdapterValues  # padded to the server's rank, the adapter's scale folded into B


class AdapterServing:
    """The adapters of one engine: what is loaded, which one the engine runs, and the gate every request passes
    (`serving`). Runs on the HTTP server's event loop."""

    def __init__(self, engine: JaxEngine, model: Qwen, max_rank: int, targets: tuple[str, ...],
                 max_loaded: int) -> None:
        if max_loaded < 1:
            raise LoraError(f"--max-loaded-loras {max_loaded}: at least one adapter must fit")
        self.engine, self.model, self.max_loaded = engine, model, max_loaded
        self.spec = LoraSpec(rank=max_rank, alpha=float(max_rank), targets=targets)
        self.loaded: dict[str, LoadedAdapter] = {}
        self.active: str | None = None  # the adapter the engine runs now (None: the base)
        self._running = 0  # requests inside `serving`
        self._waiting_for_swap = 0
        self._turn = asyncio.Condition()

    @classmethod
    def on(cls, model: Qwen, max_rank: int, targets: tuple[str, ...], max_loaded: int,
           **engine_settings) -> AdapterServing:
        """An engine over `model` with zero adapters added, and its AdapterServing."""
        spec = LoraSpec(rank=max_rank, alpha=float(max_rank), targets=targets)
        add_adapters(model, spec)
        _set_values(model, {})
        return cls(JaxEngine(model, **engine_settings), model, max_rank, targets, max_loaded)

    # ----------------------------------------------------------------- the endpoints
    async def load(self, name: str, path: str) -> None:
        """Reads and checks the PEFT adapter at `path` and keeps it under `name` (LoraError when it cannot be
        served: no adapter there, a rank above the server's, modules it does not adapt, a name taken)."""
        if name in self.loaded:
            raise LoraError(f"an adapter named {name!r} is loaded already ({self.loaded[name].path}); unload it "
                            "first or load under another name")
        if len(self.loaded) >= self.max_loaded:
            raise LoraError(f"{len(self.loaded)} adapters are loaded, the server's --max-loaded-loras; unload one "
                            "first")
        values = await asyncio.to_thread(self._read, Path(path))
        if name in self.loaded:  # loaded meanwhile by a concurrent request
            raise LoraError(f"an adapter named {name!r} is loaded already")
        self.loaded[name] = LoadedAdapter(path, values)

    def unload(self, name: str) -> None:
        """Forgets `name`; requests already running under it finish under it."""
        if self.loaded.pop(name, None) is None:
            raise LoraError(f"no adapter named {name!r} is loaded (loaded: {sorted(self.loaded)})")

    async def update_weights(self, hf_dir: str, version: str) -> None:
        """New base weights under the same adapters: the engine's update_weights, which writes the base
        parameters in place and leaves the adapters' as they are. The model then takes the engine's parameters
        (its own arrays may have been written over), so that adapter swaps keep the new base."""
        async with self._exclusive():
            try:
                await self.engine.update_weights(hf_dir, version)
            finally:
                nnx.update(self.model, self.engine.state)

    @contextlib.asynccontextmanager
    async def serving(self, name: str | None) -> AsyncIterator[None]:
        """Holds the engine on adapter `name` (None: the base) while the caller's request runs."""
        self._values(name)  # refuses an unknown name before waiting
        async with self._turn:
            if self.active != name or self._waiting_for_swap:
                self._waiting_for_swap += 1
                try:
                    await self._turn.wait_for(lambda: self._running == 0)
                finally:
                    self._waiting_for_swap -= 1
                if self.active != name:
                    await self._swap(name)
            self._running += 1
        try:
            yield
        finally:
            async with self._turn:
                self._running -= 1
                self._turn.notify_all()

    # ----------------------------------------------------------------- internals
    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        async with self._turn:
            self._waiting_for_swap += 1
            try:
                await self._turn.wait_for(lambda: self._running == 0)
                yield
            finally:
                self._waiting_for_swap -= 1
                self._turn.notify_all()

    async def _swap(self, name: str | None) -> None:
        _set_values(self.model, self._values(name))
        await self.engine.set_state(nnx.state(self.model), self.engine.weight_version, checked=True)
        self.active = name

    def _values(self, name: str | None) -> AdapterValues:
        if name is None:
            return {}
        if name not in self.loaded:
            raise LoraError(f"no adapter named {name!r} is loaded (loaded: {sorted(self.loaded)}); load it with "
                            "/load_lora_adapter first")
        return self.loaded[name].values

    def _read(self, directory: Path) -> AdapterValues:
        spec, tensors = read_adapter(directory)
        if spec.rank > self.spec.rank:
            raise LoraError(f"{directory}: rank {spec.rank} is above the server's --max-lora-rank "
                            f"{self.spec.rank}; start the server with a larger one")
        outside = sorted(spec.modules - self.spec.modules)
        if outside:
            raise LoraError(f"{directory}: adapts {outside}, which the server's --lora-target-modules "
                            f"{sorted(self.spec.modules)} leave out; start the server with them")
        values = adapter_values(self.model, spec, tensors, directory)
        for a, b in values.values():
            if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                raise WeightsError(f"{directory}: the adapter holds NaN or Inf; publish a finite one")
        pad = self.spec.rank - spec.rank
        return {name: (np.pad(a, ((0, 0), (0, pad))), np.pad(b * np.float32(spec.scale), ((0, pad), (0, 0))))
                for name, (a, b) in values.items()}


def _set_values(model: Qwen, values: AdapterValues) -> None:
    """Every adapter of `model` to `values` (zero where `values` has none)."""
    for name, lora in adapter_loras(model).items():
        a, b = values.get(name, (None, None))
        lora.lora_a[...] = jnp.zeros(lora.lora_a.shape, jnp.float32) if a is None else jnp.asarray(a)
        lora.lora_b[...] = jnp.zeros(lora.lora_b.shape, jnp.float32) if b is None else jnp.asarray(b)
