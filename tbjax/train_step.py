"""The GRPO update as two jitted programs over the mesh, with explicit shardings and donated buffers.

`accumulate` scans over micro-batches of packed rows, adding each one's float32 gradient of the loss
numerators into an accumulator sharded like the parameters; `apply` divides once by the batch's denominator
(so any split gives the full-batch gradient), clips by global norm and applies AdamW. Two programs rather
than one, because memory decides what the largest models can do:
- the accumulator comes in as a donated argument (zeros from a program of its own): XLA kept two copies of
  a scan carry that started as zeros inside the program, 13.6 GB more per H100 for the 27B reference, and
  one copy of a donated one (TPU v5p compiles of that layout: 37 GB of temporaries either way, the
  accumulator outside them);
- AdamW's moments (twice the float32 parameters) are not needed until `apply`: with `offload_optimizer`
  they wait in pinned host memory while gradients accumulate, which the reference run needs to fit 80 GB.
`micro_batches_per_call` says how many micro-batches one `accumulate` call scans (0: all of the step's). One
call per step is fastest where dispatch and fresh buffers cost (CPU: 10% faster than one call per
micro-batch, measured on scripts/bench/grpo_step.py); one micro-batch per call compiles once whatever a
step's count, and keeps XLA from hoisting loop-invariant work on the parameters out of the micro-batch loop
(27B on a TPU v5p-64 slice, fsdp 4: 67.6 GB per chip at one per call, 86.6 GB with the step's 18 scanned).
Optimizer state is float32 whatever the parameter dtype: gradients and updates are computed in float32 and
the result is cast back to the parameter dtype.

The ratio's "old" log-probs are the trainer's own, recomputed in this step (stop-gradient): with one
optimizer update per rollout batch they are the policy that sampled, up to engine/trainer numerics, which
truncated importance sampling against the engine's behaviour log-probs corrects.
"""

from __future__ import annotations

import dataclasses
import functools
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
from tbjax.offload import HostOffload
from tbjax.packing import FIELD_DTYPES, FIELDS, HEAD_INDEX, PackedBatch
from tbjax.sharding import ShardingRules, param_shardings

Params = dict[str, Any]
Sums = dict[str, jax.Array]  # metric and loss numerators, float32 scalars


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


@dataclasses.dataclass(frozen=True)
class UpdatePrograms:
    """The update's two programs lowered for one batch shape (tbjax.aot compiles them)."""

    accumulate: jax.stages.Lowered
    apply: jax.stages.Lowered


class GRPOTrainer:
    """Owns the model structure, the optimizer and the compiled update for one mesh.

    `offload_optimizer`: send the optimizer state to pinned host memory while gradients accumulate; it comes
    back for `apply` and stays on the device after it, where checkpoints save it (a no-op, logged, where the
    backend has no host memory kind)."""

    def __init__(self, model: Qwen, loss: LossConfig | None = None, optim: OptimConfig | None = None, *,
                 temperature: float = 1.0, logprob_chunk: int = 8192, mesh: Mesh | None = None,
                 rules: ShardingRules | None = None, offload_optimizer: bool = False, micro_batches_per_call: int = 0):
        self.loss, self.temperature, self.logprob_chunk = loss or LossConfig(), temperature, logprob_chunk
        self.graphdef, abstract = nnx.split(nnx.eval_shape(lambda: model))
        self.abstract_state = abstract
        self.optimizer = make_optimizer(optim or OptimConfig())
        self.offload_optimizer, self.micro_batches_per_call = offload_optimizer, micro_batches_per_call
        self.mesh = mesh if mesh is not None else model.mesh
        self.rules = rules or model.rules  # the model's activations and the state must agree
        if self.mesh is not None:
            self.param_shardings = nnx.to_pure_dict(param_shardings(abstract, self.mesh, self.rules))
            self.batch_sharding = NamedSharding(
                self.mesh, PartitionSpec(None, self.rules.mesh_axes("batch") or None, None))
        else:
            self.param_shardings = self.batch_sharding = None
        self._zeros, self._accumulate, self._apply = self._compile()

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

    @functools.cached_property
    def _host_offload(self) -> HostOffload:
        return HostOffload()

    # --------------------------------------------------------------- the update
    def update(self, state: TrainState, batch: PackedBatch) -> tuple[TrainState, dict[str, float]]:
        """One optimizer step over every micro-batch of `batch`; the state's buffers are donated.

        The parameters must be in device memory; the optimizer state may be in host memory (colocated runs
        leave it there between steps, tbjax.colocate) and is brought to the device only for `apply`."""
        opt_state = self._host_offload.to_host(state.opt_state) if self.offload_optimizer else state.opt_state
        grads, sums = self._accumulate_all(state.params, {k: batch.arrays[k] for k in (*FIELDS, HEAD_INDEX)})
        state = TrainState(state.params, self._host_offload.to_device(opt_state), state.step)
        state, sums = self._apply(state, grads, sums, jnp.float32(batch.denominator))
        return state, summarise(jax.device_get(sums), batch.denominator)

    def gradients(self, params: Params, batch: dict[str, Any], denominator: jax.Array) -> tuple[Params, Sums]:
        """The float32 gradient of the batch loss and the metric sums (what `update` applies), for tests and
        analyses; `batch` holds [micro_batches, ...] arrays."""
        grads, sums = self._accumulate_all(params, batch)
        return jax.tree.map(lambda g: g / denominator, grads), sums

    def _accumulate_all(self, params: Params, batch: dict[str, Any]) -> tuple[Params, Sums]:
        grads, sums = self._zeros()
        count = len(batch["tokens"])
        per_call = self.micro_batches_per_call or count
        for start in range(0, count, per_call):
            chunk = {k: v[start:start + per_call] for k, v in batch.items()}
            if self.batch_sharding is not None:
                chunk = {k: jax.device_put(v, self.batch_sharding) for k, v in chunk.items()}
            grads, sums = self._accumulate(params, grads, sums, chunk)
        return grads, sums

    def state_shapes(self) -> TrainState:
        """The state as ShapeDtypeStructs on this trainer's shardings: what ahead-of-time compilation
        (tbjax.compile) lowers the update with, so a 27B plan allocates nothing."""
        params = nnx.to_pure_dict(self.abstract_state)
        opt_state = jax.eval_shape(lambda p: self.optimizer.init(_to_f32(p)), params)
        step = jax.ShapeDtypeStruct((), jnp.int32)
        if self.mesh is None:
            return TrainState(params, opt_state, step)
        return jax.tree.map(lambda s, sharding: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
                            TrainState(params, opt_state, step), self._state_shardings())

    def lower(self, batch_shape: tuple[int, int, int]) -> UpdatePrograms:
        """The very programs `update` runs, lowered for one `accumulate` call's [micro_batches, rows, row_len]
        from abstract inputs (nothing allocated); `.compile()` gives their memory and cost analyses."""
        batch = {k: jax.ShapeDtypeStruct(batch_shape, FIELD_DTYPES[k], sharding=self.batch_sharding) for k in FIELDS}
        micro_batches, rows, row_len = batch_shape  # the head's widest case: every position trained
        shards = self.rows_multiple
        batch[HEAD_INDEX] = jax.ShapeDtypeStruct((micro_batches, shards, rows // shards * row_len), np.int32,
                                                 sharding=self.batch_sharding)
        state = self.state_shapes()
        grads, sums = jax.eval_shape(self._zeros)
        if self.param_shardings is not None:
            grads = jax.tree.map(lambda s, sharding: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
                                 grads, self.param_shardings)
        return UpdatePrograms(self._accumulate.lower(state.params, grads, sums, batch),
                              self._apply.lower(state, grads, sums, jax.ShapeDtypeStruct((), jnp.float32)))

    def _compile(self):
        loss_config, temperature, chunk = self.loss, self.temperature, self.logprob_chunk
        optimizer, graphdef, abstract = self.optimizer, self.graphdef, self.abstract_state

        def micro_terms(params: Params, micro: dict[str, jax.Array]) -> tuple[jax.Array, Sums]:
            state = jax.tree.map(lambda x: x, abstract)
            nnx.replace_by_pure_dict(state, params)
            model = nnx.merge(graphdef, state)
            hidden = model.hidden_states(micro["tokens"], micro["positions"], micro["segments"])
            table = (model.embed_tokens if model.lm_head is None else model.lm_head)[...]
            logprobs, entropy = trained_logprobs(hidden, table, micro["targets"], micro[HEAD_INDEX], temperature,
                                                 chunk)
            terms = loss_terms(logprobs, entropy, micro, loss_config)
            return terms["loss"], terms

        def zeros() -> tuple[Params, Sums]:
            grads = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), nnx.to_pure_dict(abstract))
            token = {k: jax.ShapeDtypeStruct((1,), FIELD_DTYPES[k]) for k in FIELDS}
            one = jax.ShapeDtypeStruct((1,), jnp.float32)
            sums = jax.eval_shape(functools.partial(loss_terms, config=loss_config), one, one, token)
            return grads, jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), sums)

        def accumulate(params: Params, grads: Params, sums: Sums, batch: dict[str, jax.Array]) -> tuple[Params, Sums]:
            def micro_batch(carry: tuple[Params, Sums], micro: dict[str, jax.Array]):
                grads, sums = carry
                g, terms = jax.grad(micro_terms, has_aux=True)(params, micro)
                grads = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), grads, g)
                return (grads, {k: sums[k] + terms[k] for k in sums}), None

            return jax.lax.scan(micro_batch, (grads, sums), batch)[0]

        def apply(state: TrainState, grads: Params, sums: Sums, denominator: jax.Array) -> tuple[TrainState, Sums]:
            grads = jax.tree.map(lambda g: g / denominator, grads)
            updates, opt_state = optimizer.update(grads, state.opt_state, _to_f32(state.params))
            new_params = jax.tree.map(lambda p, u: (p.astype(jnp.float32) + u).astype(p.dtype), state.params, updates)
            return TrainState(new_params, opt_state, state.step + 1), {**sums, "grad_norm": optax.tree.norm(grads)}

        if self.mesh is None:
            return (jax.jit(zeros), jax.jit(accumulate, donate_argnums=(1, 2)),
                    jax.jit(apply, donate_argnums=(0,)))
        params, state = self.param_shardings, self._state_shardings()
        batch = dict.fromkeys((*FIELDS, HEAD_INDEX), self.batch_sharding)
        return (jax.jit(zeros, out_shardings=(params, None)),
                jax.jit(accumulate, in_shardings=(params, params, None, batch), out_shardings=(params, None),
                        donate_argnums=(1, 2)),
                jax.jit(apply, in_shardings=(state, params, None, None), out_shardings=(state, None),
                        donate_argnums=(0,)))

    def _state_shardings(self) -> TrainState:
        return TrainState(self.param_shardings, self._opt_shardings(), NamedSharding(self.mesh, PartitionSpec()))

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
        return jax.device_put(state, self._state_shardings())


def loss_terms(logprobs: jax.Array, entropy: jax.Array, micro: dict[str, jax.Array], config: LossConfig) -> Sums:
    """The loss numerator and the metric sums of one micro-batch from its trained log-probs and entropies."""
    behaviour = micro["behaviour_logprobs"]
    old = jax.lax.stop_gradient(logprobs)
    terms = policy_loss_terms(logprobs, old, behaviour, micro["advantages"], micro["mask"], micro["weights"], config)
    mask = micro["mask"].astype(jnp.float32)
    gap = jnp.where(jnp.isnan(behaviour), 0.0, jnp.abs(old - behaviour))
    terms["nll"] = -jnp.sum(old * mask)
    terms["entropy"] = jnp.sum(entropy * mask)
    terms["logprob_gap"] = jnp.sum(gap * mask)
    return terms


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


