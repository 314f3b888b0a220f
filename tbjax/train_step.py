"""The GRPO update: one jitted function over the mesh with explicit shardings and donated buffers.

It scans over micro-batches of packed rows, accumulating float32 gradients of the loss numerators, divides
once by the batch's denominator (so any split gives the full-batch gradient), clips by global norm and
applies AdamW. Optimizer state is float32 whatever the parameter dtype: gradients and updates are computed
in float32 and the result is cast back to the parameter dtype.

The ratio's "old" log-probs are the trainer's own, recomputed in this step (stop-gradient): with one
optimizer update per rollout batch they are the policy that sampled, up to engine/trainer numerics, which
truncated importance sampling against the engine's behaviour log-probs corrects.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tbjax.grpo import LossConfig, policy_loss_terms
from tbjax.logprobs import trained_logprobs
from tbjax.models import Qwen
from tbjax.packing import FIELD_DTYPES, FIELDS, HEAD_INDEX, PackedBatch
from tbjax.sharding import ShardingRules, param_shardings

Params = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """The seed run's AdamW: lr 1e-6, no weight decay, global-norm clipping at 1.0."""

    learning_rate: float = 1e-6
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    warmup_steps: int = 0
    grad_clip: float = 1.0


def make_optimizer(config: OptimConfig) -> optax.GradientTransformation:
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
    params: Params  # nested dict of arrays, the model's nnx.Param values
    opt_state: Any
    step: jax.Array  # int32 scalar: optimizer updates applied


class GRPOTrainer:
    """Owns the model structure, the optimizer and the compiled update for one mesh."""

    def __init__(self, model: Qwen, loss: LossConfig | None = None, optim: OptimConfig | None = None, *,
                 temperature: float = 1.0, logprob_chunk: int = 8192, mesh: Mesh | None = None,
                 rules: ShardingRules | None = None):
        self.loss, self.temperature, self.logprob_chunk = loss or LossConfig(), temperature, logprob_chunk
        self.graphdef, abstract = nnx.split(nnx.eval_shape(lambda: model))
        self.abstract_state = abstract
        self.optimizer = make_optimizer(optim or OptimConfig())
        self.mesh = mesh if mesh is not None else model.mesh
        self.rules = rules or model.rules  # the model's activations and the state must agree
        if self.mesh is not None:
            self.param_shardings = nnx.to_pure_dict(param_shardings(abstract, self.mesh, self.rules))
            self.batch_sharding = NamedSharding(
                self.mesh, PartitionSpec(None, self.rules.mesh_axes("batch") or None, None))
        else:
            self.param_shardings = self.batch_sharding = None
        self._update = self._compile()

    # --------------------------------------------------------------- state
    def init_state(self, model: Qwen) -> TrainState:
        """The state takes over the model's parameter buffers (the update donates them): use `model_for`
        for a model over the current parameters afterwards."""
        params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
        opt_state = jax.jit(self.optimizer.init)(_to_f32(params))
        return TrainState(params, opt_state, jnp.zeros((), jnp.int32))

    def model_for(self, params: Params) -> Qwen:
        """A model view over `params` (for engines and evaluation); shares the arrays."""
        state = jax.tree.map(lambda x: x, self.abstract_state)
        nnx.replace_by_pure_dict(state, params)
        return nnx.merge(self.graphdef, state)

    @property
    def rows_multiple(self) -> int:
        """Rows per micro-batch must split evenly over the batch mesh axes."""
        if self.mesh is None:
            return 1
        return int(np.prod([self.mesh.shape[a] for a in self.rules.mesh_axes("batch")]))

    # --------------------------------------------------------------- the update
    def update(self, state: TrainState, batch: PackedBatch) -> tuple[TrainState, dict[str, float]]:
        arrays = {k: batch.arrays[k] for k in (*FIELDS, HEAD_INDEX)}
        if self.batch_sharding is not None:
            arrays = {k: jax.device_put(v, self.batch_sharding) for k, v in arrays.items()}
        state, sums = self._update(state, arrays, jnp.float32(batch.denominator))
        return state, summarise(jax.device_get(sums), batch.denominator)

    def state_shapes(self) -> TrainState:
        """The state as ShapeDtypeStructs on this trainer's shardings: what ahead-of-time compilation
        (tbjax.compile) lowers the update with, so a 27B plan allocates nothing."""
        params = nnx.to_pure_dict(self.abstract_state)
        opt_state = jax.eval_shape(lambda p: self.optimizer.init(_to_f32(p)), params)
        step = jax.ShapeDtypeStruct((), jnp.int32)
        if self.mesh is None:
            return TrainState(params, opt_state, step)
        shardings = TrainState(self.param_shardings, self._opt_shardings(), NamedSharding(self.mesh, PartitionSpec()))
        return jax.tree.map(lambda s, sharding: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
                            TrainState(params, opt_state, step), shardings)

    def lower(self, batch_shape: tuple[int, int, int]) -> jax.stages.Lowered:
        """The very update `update` runs, lowered for a packed batch of [micro_batches, rows, row_len] from
        abstract inputs (nothing allocated); `.compile()` gives its memory and cost analyses."""
        batch = {k: jax.ShapeDtypeStruct(batch_shape, FIELD_DTYPES[k], sharding=self.batch_sharding) for k in FIELDS}
        micro_batches, rows, row_len = batch_shape  # the head's widest case: every position trained
        shards = self.rows_multiple
        batch[HEAD_INDEX] = jax.ShapeDtypeStruct((micro_batches, shards, rows // shards * row_len), np.int32,
                                                 sharding=self.batch_sharding)
        return self._update.lower(self.state_shapes(), batch, jax.ShapeDtypeStruct((), jnp.float32))

    def _compile(self):
        loss_config, temperature, chunk = self.loss, self.temperature, self.logprob_chunk
        optimizer, graphdef, abstract = self.optimizer, self.graphdef, self.abstract_state

        def micro_terms(params: Params, micro: dict[str, jax.Array]) -> tuple[jax.Array, dict[str, jax.Array]]:
            state = jax.tree.map(lambda x: x, abstract)
            nnx.replace_by_pure_dict(state, params)
            model = nnx.merge(graphdef, state)
            hidden = model.hidden_states(micro["tokens"], micro["positions"], micro["segments"])
            table = (model.embed_tokens if model.lm_head is None else model.lm_head)[...]
            logprobs, entropy = trained_logprobs(hidden, table, micro["targets"], micro[HEAD_INDEX], temperature,
                                                 chunk)
            behaviour = micro["behaviour_logprobs"]
            terms = policy_loss_terms(logprobs, jax.lax.stop_gradient(logprobs), behaviour, micro["advantages"],
                                      micro["mask"], micro["weights"], loss_config)
            mask = micro["mask"].astype(jnp.float32)
            gap = jnp.where(jnp.isnan(behaviour), 0.0, jnp.abs(jax.lax.stop_gradient(logprobs) - behaviour))
            terms["nll"] = -jnp.sum(jax.lax.stop_gradient(logprobs) * mask)
            terms["entropy"] = jnp.sum(entropy * mask)
            terms["logprob_gap"] = jnp.sum(gap * mask)
            return terms["loss"], terms

        def gradients(params: Params, batch: dict[str, jax.Array], denominator: jax.Array):
            """float32 gradient of the batch loss and the metric sums, accumulated over micro-batches."""
            grad_fn = jax.grad(micro_terms, has_aux=True)

            def accumulate(carry, micro):
                grads, sums = carry
                g, terms = grad_fn(params, micro)
                grads = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), grads, g)
                return (grads, {k: sums[k] + terms[k] for k in sums}), None

            zero_sums = jax.eval_shape(lambda: micro_terms(params, jax.tree.map(lambda a: a[0], batch)))[1]
            zero_sums = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), zero_sums)
            (grads, sums), _ = jax.lax.scan(accumulate, (_to_f32(jax.tree.map(jnp.zeros_like, params)),
                                                         zero_sums), batch)
            return jax.tree.map(lambda g: g / denominator, grads), sums

        self.gradients = jax.jit(gradients)

        def update(state: TrainState, batch: dict[str, jax.Array], denominator: jax.Array):
            grads, sums = gradients(state.params, batch, denominator)
            params32 = _to_f32(state.params)
            updates, opt_state = optimizer.update(grads, state.opt_state, params32)
            new_params = jax.tree.map(lambda p, u: (p.astype(jnp.float32) + u).astype(p.dtype), state.params, updates)
            sums["grad_norm"] = optax.tree.norm(grads)
            return TrainState(new_params, opt_state, state.step + 1), sums

        if self.mesh is None:
            return jax.jit(update, donate_argnums=(0,))
        state_shardings = TrainState(self.param_shardings, self._opt_shardings(), NamedSharding(
            self.mesh, PartitionSpec()))
        batch_shardings = dict.fromkeys((*FIELDS, HEAD_INDEX), self.batch_sharding)
        return jax.jit(update, in_shardings=(state_shardings, batch_shardings, None),
                       out_shardings=(state_shardings, None), donate_argnums=(0,))

    def _opt_shardings(self):
        """Optimizer moments shard like their parameters; counters are replicated."""
        abstract_params = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, jnp.float32),
                                       nnx.to_pure_dict(self.abstract_state))
        abstract_opt = jax.eval_shape(self.optimizer.init, abstract_params)
        replicated = NamedSharding(self.mesh, PartitionSpec())
        return optax.tree_utils.tree_map_params(
            self.optimizer, lambda _, sharding: sharding, abstract_opt, self.param_shardings,
            transform_non_params=lambda _: replicated)

    def shard_state(self, state: TrainState) -> TrainState:
        """Places a (restored or fresh) state on this trainer's shardings."""
        if self.mesh is None:
            return state
        shardings = TrainState(self.param_shardings, self._opt_shardings(), NamedSharding(self.mesh, PartitionSpec()))
        return jax.device_put(state, shardings)


def _to_f32(tree: Params) -> Params:
    return jax.tree.map(lambda x: x.astype(jnp.float32), tree)


def summarise(sums: dict[str, np.ndarray], denominator: float) -> dict[str, float]:
    """Sums over trained tokens -> the step's metrics."""
    tokens = max(float(sums["tokens"]), 1.0)
    return {
        "loss": float(sums["loss"]) / max(denominator, 1e-12),
        "grad_norm": float(sums["grad_norm"]),
        "clip_fraction": float(sums["clipped"]) / tokens,
        "tis_truncated_fraction": float(sums["tis_truncated"]) / tokens,
        "tis_weight_mean": float(sums["tis_weight"]) / tokens,
        "nll": float(sums["nll"]) / tokens,  # mean negative log-likelihood of the trained tokens
        "entropy": float(sums["entropy"]) / tokens,
        "logprob_gap": float(sums["logprob_gap"]) / tokens,
        "kl": float(sums["kl"]) / tokens,
        "trained_tokens": float(sums["tokens"]),
    }


