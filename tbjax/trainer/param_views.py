"""The two halves of a model the update sees: the parameters it trains (every weight, or under LoRA the
adapters alone) and the frozen rest (empty unless LoRA), and the model viewed over both without copying."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from tbjax.models import Qwen
from tbjax.trainer.train_state import Params


def adapters_off(params: Params) -> Params:
    """LoRA adapters of zeros in the shape and placement of `params`: with them, the model is its base."""
    return jax.tree.map(lambda x: jnp.zeros_like(x, device=x.sharding), params)


def sharded_shape(shape: jax.ShapeDtypeStruct, sharding: jax.sharding.Sharding) -> jax.ShapeDtypeStruct:
    """`shape` placed on `sharding` (for lowering programs from abstract inputs)."""
    return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=sharding)


def model_view(graphdef: nnx.GraphDef, abstract: nnx.State, abstract_frozen: nnx.State, params: Params,
          frozen: Params) -> Qwen:
    """The model over the trained `params` and the `frozen` rest (empty unless LoRA), sharing their arrays."""
    trained, rest = jax.tree.map(lambda x: x, abstract), jax.tree.map(lambda x: x, abstract_frozen)
    nnx.replace_by_pure_dict(trained, params)
    nnx.replace_by_pure_dict(rest, frozen)
    return nnx.merge(graphdef, trained, rest)
