"""`rollout.engine=embedded`: the in-process JaxEngine serves the trainer's own parameters, handed over in memory.

With one process the engine serves the trainer's view of the parameters (a copy of its arrays when batches are
produced ahead, since the next update donates the trainer's buffers). The JaxEngine cannot span processes, so
with several it lives on process 0 and serves a single-device copy gathered from the global mesh after each
update: that gather puts the whole model in every host's memory, fine for the tiny and test models this backend
is for; large models are served by SGLang (sglang_backend).
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.config import Config
from tbjax.engine.configured import embedded_engine
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import Qwen
from tbjax.models.hf.importer import abstract_model
from tbjax.models.lora import adapters_spec, add_adapters
from tbjax.parallel.distributed import gather_to_every_process, is_driver
from tbjax.trainer.backends.protocol import MemoryPart, Serve, nothing
from tbjax.trainer.train_state import Params
from tbjax.trainer.update import GRPOTrainer

NOTHING_HANDED_OVER = ("the embedded engine shares the trainer's parameters and hands nothing over "
                       "(rollout.placement=colocated is refused for it)")


class EmbeddedBackend:
    starts_from_base = False  # it starts on the run's own parameters

    def __init__(self, engine: JaxEngine | None, copy: bool) -> None:
        self.engine, self.copy = engine, copy

    def publish(self, trainer: GRPOTrainer, params: Params, version: str) -> Serve:
        model = engine_model(trainer, params, copy=self.copy)
        if self.engine is None:
            return nothing
        assert model is not None, "the driver gathers a model"
        return functools.partial(self.engine.set_state, nnx.state(model), version)

    async def release_memory(self) -> None:
        raise RuntimeError(NOTHING_HANDED_OVER)

    async def resume_memory(self, part: MemoryPart) -> None:
        raise RuntimeError(NOTHING_HANDED_OVER)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()


def build(config: Config, trainer: GRPOTrainer, params: Params, step: int, model_dir: Path) -> EmbeddedBackend:
    """The engine over the run's parameters at `step` (every process joins the gather; the driver serves)."""
    copy = config.rollout.max_staleness > 0
    model = engine_model(trainer, params, copy=copy)
    return EmbeddedBackend(None if model is None else embedded_engine(model, config.rollout, str(step)), copy)


def engine_model(trainer: GRPOTrainer, params: Params, *, copy: bool = False) -> Qwen | None:
    """The model the embedded engine serves: the trainer's own view with one process (`copy`: a copy of its
    arrays, for an engine that serves while the next update donates the trainer's buffers); with several, a
    single-device copy on the driver (None elsewhere). Every process must call it: the gather is collective."""
    view = trainer.model_for(params)
    if jax.process_count() == 1:
        if copy:
            graphdef, state = nnx.split(view)
            return nnx.merge(graphdef, jax.tree.map(jnp.copy, state))
        return view
    trained, frozen = jax.tree.map(jnp.asarray, gather_to_every_process((params, trainer.frozen)))
    if not is_driver():
        return None
    graphdef, state = abstract_model(view.config)
    nnx.replace_by_pure_dict(state, frozen if trainer.lora else trained)
    model = nnx.merge(graphdef, state)
    if trainer.lora:  # the same adapters on the copy, with the trained values
        add_adapters(model, adapters_spec(view))
        adapters = nnx.state(model, nnx.LoRAParam)
        nnx.replace_by_pure_dict(adapters, trained)
        nnx.update(model, adapters)
    return model
