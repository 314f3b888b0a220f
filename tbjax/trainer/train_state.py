"""What the update carries from step to step: the parameters the forward pass reads, AdamW's state, the step
count and, for parameters narrower than float32, the float32 master weights AdamW steps (tbjax.trainer.update
says why); and the optimizer that makes that state."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

from tbjax.sections.training import OptimSection

Params = dict[str, Any]


def make_optimizer(config: OptimSection) -> optax.GradientTransformation:
    schedule = optax.constant_schedule(config.learning_rate)
    if config.warmup_steps:
        schedule = optax.join_schedules(
            [optax.linear_schedule(0.0, config.learning_rate, config.warmup_steps), schedule], [config.warmup_steps])
    return optax.chain(
        optax.clip_by_global_norm(config.grad_clip),
        optax.adamw(schedule, b1=config.b1, b2=config.b2, eps=config.eps, weight_decay=config.weight_decay),
    )


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
    """A pytree of arrays; the same structure over ShapeDtypeStructs or shardings describes a state's shapes or
    placement (tbjax.trainer.update), hence the loose leaf types."""

    params: Params  # nested dict of arrays, the model's nnx.Param values (what the forward pass reads)
    opt_state: Any
    step: Any  # int32 scalar array: optimizer updates applied
    # float32 master weights, of which `params` is the cast (module docstring); None when the parameters are
    # float32 already, or with optim.master_dtype=none
    master: Params | None = None


def to_f32(tree: Params) -> Params:
    return jax.tree.map(lambda x: x.astype(jnp.float32), tree)


TrainStateT = TypeVar("TrainStateT", bound=TrainState)


def upcast_masters(state: TrainStateT) -> TrainStateT:
    """`state` with master weights made from its parameters (on their shardings): a checkpoint saved before
    train states kept them, resumed."""
    return dataclasses.replace(state, master=jax.jit(to_f32)(state.params))


def keeps_master(params: Params, master_dtype: str) -> bool:
    """Whether the state keeps float32 master weights: some parameter is narrower than float32, unless
    `optim.master_dtype=none` says to update the parameters in their own dtype (which must then be narrower,
    or the setting could not act)."""
    narrow = any(np.dtype(leaf.dtype).itemsize < 4 for leaf in jax.tree.leaves(params))
    if master_dtype == "none" and not narrow:
        raise ValueError("optim.master_dtype=none: every parameter is float32 already, so there are no master "
                         "weights to do without; drop the setting, or train with model.param_dtype=bfloat16")
    return narrow and master_dtype == "float32"
