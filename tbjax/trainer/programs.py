"""The update's four jitted programs (tbjax.trainer.update says how they make one optimizer step), built once
per trainer from what they need and nothing else: the model's structure, the objective, the optimizer and,
on a mesh, the shardings of what goes in and out.

- `zeros`: the gradient accumulator and the metric sums, zero; sharded like the parameters.
- `accumulate`: scans micro-batches, adding each one's float32 gradient of the loss numerators and its sums
  to the accumulator (donated, so XLA keeps one copy of it).
- `apply`: divides by the batch's denominator, clips and steps AdamW on the float32 weights (the master
  copy where the state keeps one), casting them back to the parameters' dtype; the state is donated.
- `forward`: the per-token log-probs of a batch under given parameters, without gradient (the old and the
  reference log-probs of tbjax.trainer.update).

Every program takes the base weights (`frozen`, the LoRA base; empty otherwise) as an argument: closed over,
they would be captured as constants.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding

from tbjax.sections.training import GRPOSection
from tbjax.trainer.logprobs import trained_logprobs
from tbjax.trainer.objective import OLD_LOGPROBS, REF_LOGPROBS, loss_terms
from tbjax.trainer.packing import FIELD_DTYPES, FIELDS, HEAD_INDEX
from tbjax.trainer.param_views import model_view
from tbjax.trainer.train_state import Params, TrainState, to_f32

Sums = dict[str, jax.Array]  # metric and loss numerators, float32 scalars
Batch = dict[str, jax.Array]  # per-token arrays, [micro_batches, rows, row_len] (HEAD_INDEX: its own shape)


class UpdatePrograms(NamedTuple):
    """The jitted programs, in the order a step calls them (signatures in the module docstring's terms)."""

    zeros: jax.stages.Wrapped  # () -> (grads, sums)
    accumulate: jax.stages.Wrapped  # (params, frozen, grads, sums, batch) -> (grads, sums)
    apply: jax.stages.Wrapped  # (state, grads, sums, denominator) -> (state, sums)
    forward: jax.stages.Wrapped  # (params, frozen, batch) -> log-probs like the batch's fields


@dataclasses.dataclass(frozen=True)
class PolicyStructure:
    """The model without its values: what a program rebuilds a model view from (tbjax.trainer.param_views)."""

    graphdef: nnx.GraphDef
    trained: nnx.State  # abstract: the adapters under LoRA, else every parameter
    frozen: nnx.State  # abstract: the base weights under LoRA, else nothing
    compute_dtype: Any


@dataclasses.dataclass(frozen=True)
class UpdateShardings:
    """Where the programs' inputs and outputs live on a mesh."""

    params: Any  # a pytree of NamedShardings like the trained parameters (gradients and masters too)
    frozen: Any  # like the base weights
    state: TrainState  # of NamedShardings
    batch: NamedSharding


@dataclasses.dataclass(frozen=True)
class Objective:
    """What the loss of a micro-batch depends on besides the parameters."""

    grpo: GRPOSection
    temperature: float
    logprob_chunk: int


def build_programs(policy: PolicyStructure, objective: Objective, optimizer: optax.GradientTransformation,
                   shardings: UpdateShardings | None) -> UpdatePrograms:
    """The four programs, jitted with their donations and, on a mesh, their shardings."""
    zeros = functools.partial(_zeros, policy, objective.grpo)
    accumulate = functools.partial(_accumulate, policy, objective)
    apply = functools.partial(_apply, optimizer)
    forward = functools.partial(_forward, policy, objective)
    if shardings is None:
        return UpdatePrograms(jax.jit(zeros), jax.jit(accumulate, donate_argnums=(2, 3)),
                              jax.jit(apply, donate_argnums=(0,)), jax.jit(forward))
    params, frozen, state, batch = shardings.params, shardings.frozen, shardings.state, shardings.batch
    return UpdatePrograms(
        jax.jit(zeros, out_shardings=(params, None)),
        jax.jit(accumulate, in_shardings=(params, frozen, params, None, batch), out_shardings=(params, None),
                donate_argnums=(2, 3)),
        jax.jit(apply, in_shardings=(state, params, None, None), out_shardings=(state, None), donate_argnums=(0,)),
        jax.jit(forward, in_shardings=(params, frozen, batch), out_shardings=batch))


def _micro_logprobs(policy: PolicyStructure, objective: Objective, params: Params, frozen: Params,
                    micro: Batch) -> tuple[jax.Array, jax.Array]:
    model = model_view(policy.graphdef, policy.trained, policy.frozen, params, frozen)
    hidden = model.hidden_states(micro["tokens"], micro["positions"], micro["segments"])
    table = (model.embed_tokens if model.lm_head is None else model.lm_head)[...]
    return trained_logprobs(hidden, table, micro["targets"], micro[HEAD_INDEX], objective.temperature,
                            objective.logprob_chunk)


def _micro_terms(policy: PolicyStructure, objective: Objective, params: Params, frozen: Params,
                 micro: Batch) -> tuple[jax.Array, Sums]:
    terms = loss_terms(*_micro_logprobs(policy, objective, params, frozen, micro), micro, objective.grpo)
    return terms["loss"], terms


def _zeros(policy: PolicyStructure, grpo: GRPOSection) -> tuple[Params, Sums]:
    grads = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), nnx.to_pure_dict(policy.trained))
    one = jax.ShapeDtypeStruct((1,), jnp.float32)  # one token of every array a micro-batch may hold
    token = {**{k: jax.ShapeDtypeStruct((1,), FIELD_DTYPES[k]) for k in FIELDS}, OLD_LOGPROBS: one,
             REF_LOGPROBS: one}
    sums = jax.eval_shape(functools.partial(loss_terms, config=grpo), one, one, token)
    return grads, jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), sums)


def _accumulate(policy: PolicyStructure, objective: Objective, params: Params, frozen: Params, grads: Params,
                sums: Sums, batch: Batch) -> tuple[Params, Sums]:
    # differentiated where the forward pass computes: bfloat16 parameters under float32 compute get float32
    # gradients, not ones rounded to the parameters' dtype before they are summed
    wide = jax.tree.map(lambda p: p.astype(jnp.promote_types(p.dtype, policy.compute_dtype)), params)
    gradient = jax.grad(functools.partial(_micro_terms, policy, objective), has_aux=True)

    def micro_batch(carry: tuple[Params, Sums], micro: Batch) -> tuple[tuple[Params, Sums], None]:
        grads, sums = carry
        g, terms = gradient(wide, frozen, micro)
        grads = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), grads, g)
        return (grads, {k: sums[k] + terms[k] for k in sums}), None

    return jax.lax.scan(micro_batch, (grads, sums), batch)[0]


def _forward(policy: PolicyStructure, objective: Objective, params: Params, frozen: Params,
             batch: Batch) -> jax.Array:
    def micro_batch(_: None, micro: Batch) -> tuple[None, jax.Array]:
        return None, _micro_logprobs(policy, objective, params, frozen, micro)[0]

    return jax.lax.scan(micro_batch, None, batch)[1]


def _apply(optimizer: optax.GradientTransformation, state: TrainState, grads: Params, sums: Sums,
           denominator: jax.Array) -> tuple[TrainState, Sums]:
    grads = jax.tree.map(lambda g: g / denominator, grads)
    weights = state.master if state.master is not None else to_f32(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, weights)
    stepped = jax.tree.map(jnp.add, weights, updates)
    params = jax.tree.map(lambda w, p: w.astype(p.dtype), stepped, state.params)
    master = stepped if state.master is not None else None
    return TrainState(params, opt_state, state.step + 1, master), {**sums, "grad_norm": optax.tree.norm(grads)}
