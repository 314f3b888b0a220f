"""The GRPO update as two jitted programs over the mesh, with explicit shardings and donated buffers.

`accumulate` scans over micro-batches of packed rows, adding each one's float32 gradient of the loss
numerators into an accumulator sharded like the parameters; `apply` divides once by the batch's denominator
(so any split gives the full-batch gradient), clips by global norm and applies AdamW. Two programs rather
than one, because memory decides what the largest models can do:
- the accumulator comes in as a donated argument (zeros from a program of its own): XLA keeps two copies of
  a scan carry that starts as zeros inside the program, and one copy of a donated one;
- AdamW's moments (twice the float32 parameters) are not needed until `apply`: with `offload_optimizer`
  they wait in pinned host memory while gradients accumulate, which the reference run needs to fit an H100.
`micro_batches_per_call` says how many micro-batches one `accumulate` call scans (0: all of the step's). One
call per step is fastest where dispatch and fresh buffers cost (CPU; scripts/bench/grpo_step.py measures
it); one micro-batch per call compiles once whatever a step's count, and keeps XLA from hoisting
loop-invariant work on the parameters out of the micro-batch loop, which costs large sharded models memory
(`python -m tbjax.compile` shows how much for a target).
Optimizer state is float32 whatever the parameter dtype, and so are the weights AdamW steps: parameters
narrower than float32 (the bfloat16 GPU configs) are the cast of float32 master weights, which the train
state keeps beside them (sharded like them, waiting in host memory with the moments under
`offload_optimizer`) and `apply` steps and casts again. Without them a step below half an ulp of its weight
rounds to nothing: at lr 1e-6 and weights of scale 0.02, most of a bfloat16 policy's updates are lost, not
deferred. `optim.master_dtype=none` adds AdamW's update to the parameters in their own dtype instead.

One rollout batch gives `ppo_epochs` x `mini_batches` optimizer steps: its episodes are dealt into
`mini_batches` batches of their own (trainer.packing.split_episodes; each with its own loss denominator),
and each epoch steps once on each. What the ratio, the truncated importance sampling (TIS) weight and the KL term
compare against:
- one step per batch (the default): the "old" log-probs are the gradient program's own, under stop-gradient,
  so the ratio is exactly 1 and the clip never binds; the objective is the advantage-weighted policy gradient
  with TIS, the old policy being the one that sampled up to engine/trainer numerics, which TIS corrects. No
  extra forward pass runs.
- several steps: before the first, a forward program (`logprobs`, no gradient) computes the pre-update
  policy's log-probs of every mini-batch once (OLD_LOGPROBS); every step's ratio and TIS weight use them, so
  from the second step on the ratio leaves 1 and the clip acts.
- KL (`GRPOSection.kl_coef` > 0): the same forward program with the reference parameters (the policy's at the
  start of training, `keep_reference`, kept on the device or in pinned host memory) gives REF_LOGPROBS once
  per batch, for the k1 or k3 penalty of tbjax.trainer.objective.

A model with LoRA adapters (tbjax.models.lora) trains its adapters alone: the train state's parameters, their
gradients and AdamW's moments are the adapters' (`nnx.LoRAParam`, float32, so no master copy), and the base
weights stay `frozen` on the trainer in their own dtype, an argument of every program and never donated. The KL
reference is the same model with its adapters off (adapters of zeros): no second copy of the weights.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterator, Mapping
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from tbjax.config import Config
from tbjax.models import Qwen
from tbjax.parallel.offload import HostOffload
from tbjax.parallel.sharding import ShardingRules, param_shardings
from tbjax.sections.training import GRPOSection, OptimSection
from tbjax.trainer.objective import OLD_LOGPROBS, REF_LOGPROBS, step_metrics
from tbjax.trainer.packing import FIELD_DTYPES, FIELDS, HEAD_INDEX, PackedBatch, split_episodes
from tbjax.trainer.param_views import adapters_off, model_view, sharded_shape
from tbjax.trainer.programs import Objective, PolicyStructure, Sums, UpdateShardings, build_programs
from tbjax.trainer.train_state import Params, TrainState, keeps_master, make_optimizer, to_f32

log = logging.getLogger(__name__)
Arrays = Mapping[str, np.ndarray | jax.Array]  # a batch's [micro_batches, ...] arrays, on the host or the devices


@dataclasses.dataclass(frozen=True)
class LoweredUpdate:
    """The update's two programs lowered for one batch shape (tbjax.plan.aot compiles them)."""

    accumulate: jax.stages.Lowered
    apply: jax.stages.Lowered


@dataclasses.dataclass(frozen=True)
class PreparedBatch:
    """A rollout batch ready for `GRPOTrainer.update`: its mini-batches, each holding the log-probs its steps
    compare against (`GRPOTrainer.added_logprob_arrays`), computed before the first step changed the policy."""

    mini_batches: list[PackedBatch]


class GRPOTrainer:
    """Owns the model structure, the optimizer and the compiled update for one mesh.

    `offload_optimizer`: send the optimizer state to pinned host memory while gradients accumulate; it comes
    back for `apply` and stays on the device after it, where checkpoints save it (a no-op, logged, where the
    backend has no host memory kind); the master weights travel with it. `ppo_epochs` x `mini_batches`:
    optimizer steps per batch (module docstring). `reference_placement`: where the KL reference waits between
    batches (`keep_reference`)."""

    def __init__(self, model: Qwen, grpo: GRPOSection | None = None, optim: OptimSection | None = None, *,
                 temperature: float = 1.0, logprob_chunk: int = 8192, mesh: Mesh | None = None,
                 rules: ShardingRules | None = None, offload_optimizer: bool = False, micro_batches_per_call: int = 0,
                 ppo_epochs: int = 1, mini_batches: int = 1,
                 reference_placement: Literal["device", "host"] = "device"):
        if ppo_epochs < 1 or mini_batches < 1:
            raise ValueError(f"train.ppo_epochs={ppo_epochs} and train.mini_batches={mini_batches} must be >= 1 "
                             "(1 and 1: one optimizer step per rollout batch)")
        self.grpo, self.temperature, self.logprob_chunk = grpo or GRPOSection(), temperature, logprob_chunk
        self.ppo_epochs, self.mini_batches, self.reference_placement = ppo_epochs, mini_batches, reference_placement
        self.reference: Params | None = None  # the KL reference's parameters (keep_reference)
        abstract_model = nnx.eval_shape(lambda: model)
        # what the update trains: the adapters where the model has any, else every parameter (module docstring)
        self.lora = bool(jax.tree.leaves(nnx.state(abstract_model, nnx.LoRAParam)))
        self.trains = nnx.LoRAParam if self.lora else nnx.Param
        self.graphdef, abstract, self.abstract_frozen = nnx.split(abstract_model, self.trains, ...)
        self.abstract_state = abstract
        self.frozen: Params = {}  # the base weights under LoRA (init_state), read by every program, never updated
        optim = optim or OptimSection()
        self.optimizer = make_optimizer(optim)
        self.keeps_master = keeps_master(nnx.to_pure_dict(abstract), optim.master_dtype)
        self.compute_dtype = model.config.compute_dtype
        self.offload_optimizer, self.micro_batches_per_call = offload_optimizer, micro_batches_per_call
        self.mesh = mesh if mesh is not None else model.mesh
        self.rules = rules or model.rules  # the model's activations and the state must agree
        self.shardings = None if self.mesh is None else self._shardings(self.mesh)
        self.programs = build_programs(
            PolicyStructure(self.graphdef, abstract, self.abstract_frozen, self.compute_dtype),
            Objective(self.grpo, temperature, logprob_chunk), self.optimizer, self.shardings)

    def _shardings(self, mesh: Mesh | AbstractMesh) -> UpdateShardings:
        """The state shards like the parameters (AdamW's moments and the masters too; its counters are
        replicated), the base weights like theirs, and a batch's rows over the batch mesh axes."""
        params = nnx.to_pure_dict(param_shardings(self.abstract_state, mesh, self.rules))
        replicated = NamedSharding(mesh, PartitionSpec())
        abstract_opt = jax.eval_shape(self.optimizer.init, jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, jnp.float32), nnx.to_pure_dict(self.abstract_state)))
        opt_state = optax.tree_utils.tree_map_params(self.optimizer, lambda _, sharding: sharding, abstract_opt,
                                                     params, transform_non_params=lambda _: replicated)
        return UpdateShardings(
            params=params, frozen=nnx.to_pure_dict(param_shardings(self.abstract_frozen, mesh, self.rules)),
            state=TrainState(params, opt_state, replicated, params if self.keeps_master else None),
            batch=NamedSharding(mesh, PartitionSpec(None, self.rules.mesh_axes("batch") or None, None)))

    # --------------------------------------------------------------- state
    def init_state(self, model: Qwen) -> TrainState:
        """The state takes over the model's parameter buffers (the update donates them): use `model_for`
        for a model over the current parameters afterwards. Under LoRA the state holds the adapters, and the
        base weights become the trainer's `frozen` (on its shardings)."""
        _, trained, frozen = nnx.split(model, self.trains, ...)
        params = nnx.to_pure_dict(trained)
        self.frozen = nnx.to_pure_dict(frozen)
        if self.shardings is not None:
            self.frozen = jax.device_put(self.frozen, self.shardings.frozen)
        master = jax.jit(to_f32)(params) if self.keeps_master else None
        opt_state = jax.jit(self.optimizer.init)(to_f32(params))
        return TrainState(params, opt_state, jnp.zeros((), jnp.int32), master)

    def model_for(self, params: Params, frozen: Params | None = None) -> Qwen:
        """A model view over `params` and the base weights (for engines and evaluation); shares the arrays.
        Inside a traced program, pass the program's own `frozen` argument: a closed-over base would be
        captured as constants."""
        return model_view(self.graphdef, self.abstract_state, self.abstract_frozen, params,
                     self.frozen if frozen is None else frozen)

    @property
    def batch_sharding(self) -> NamedSharding | None:
        """Where a batch's rows go: over the batch mesh axes (None without a mesh)."""
        return None if self.shardings is None else self.shardings.batch

    @property
    def rows_multiple(self) -> int:
        """Rows per micro-batch must split evenly over the batch mesh axes."""
        if self.mesh is None:
            return 1
        return int(np.prod([self.mesh.shape[a] for a in self.rules.mesh_axes("batch")]))

    @functools.cached_property
    def _host_offload(self) -> HostOffload:
        return HostOffload()

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps per rollout batch."""
        return self.ppo_epochs * self.mini_batches

    @property
    def added_logprob_arrays(self) -> tuple[str, ...]:
        """The per-token arrays `prepare` adds to every mini-batch before its first step."""
        return (*((OLD_LOGPROBS,) if self.optimizer_steps > 1 else ()),
                *((REF_LOGPROBS,) if self.grpo.uses_reference else ()))

    # --------------------------------------------------------------- the KL reference
    def keep_reference(self, params: Params) -> None:
        """Keeps a copy of `params` (the policy at the start of training) as the KL reference: sharded like the
        policy, in device memory or, with reference_placement "host", in pinned host memory (on the device,
        logged, where the backend has none). A copy, because the update donates the policy's buffers. Under
        LoRA the reference is the base, the adapters off: adapters of zeros, wherever `params` started."""
        if self.lora:
            self.reference = adapters_off(params)
            return
        if self.reference_placement == "host" and self._host_offload.supported:
            self.reference = self._host_offload.to_host(params, free=False)
            return
        if self.reference_placement == "host":
            log.info("train.reference_placement=host: no pinned host memory here, the KL reference stays on the "
                     "device")
        self.reference = jax.device_put(params, jax.tree.map(lambda x: x.sharding, params), may_alias=False)

    def _reference_params(self) -> Params:
        """The reference in device memory: a temporary copy when it waits in host memory."""
        if self.reference is None:
            raise ValueError("grpo.kl_coef > 0 needs a reference policy: call GRPOTrainer.keep_reference with the "
                             "parameters at the start of training (tbjax.trainer.run_setup does), or set "
                             "grpo.kl_coef=0")
        return self._host_offload.to_device(self.reference, free=False)

    # --------------------------------------------------------------- the update
    def prepare(self, params: Params, batch: PackedBatch) -> PreparedBatch:
        """`batch` dealt into its mini-batches, with the log-probs their steps compare against computed now,
        before the first step: OLD_LOGPROBS under `params` when there are several steps, REF_LOGPROBS when KL
        acts. With one step and no KL, the batch as it is: no forward pass. A caller that reads the old
        log-probs too (tbjax.trainer.mismatch) finds them here."""
        parts = [batch] if self.mini_batches == 1 else split_episodes(batch, self.mini_batches, self.grpo,
                                                                      self.rows_multiple)
        if self.optimizer_steps > 1:
            parts = [_with_array(part, OLD_LOGPROBS, self.logprobs(params, part)) for part in parts]
        if self.grpo.uses_reference:
            reference = self._reference_params()  # a host-held reference's device copy lives only this long
            parts = [_with_array(part, REF_LOGPROBS, self.logprobs(reference, part)) for part in parts]
        return PreparedBatch(parts)

    def update(self, state: TrainState, batch: PreparedBatch) -> tuple[TrainState, dict[str, float]]:
        """`optimizer_steps` optimizer steps over a prepared batch (module docstring): each epoch steps once on
        each mini-batch. The state's buffers are donated.

        Metrics are the mean over the steps (clip_fraction included), but `trained_tokens`: the batch's, and
        `optimizer_steps`. With one step they are that step's."""
        steps = []
        for _ in range(self.ppo_epochs):
            for part in batch.mini_batches:
                state, metrics = self._step(state, part)
                steps.append(metrics)
        return state, {**{k: sum(m[k] for m in steps) / len(steps) for k in steps[0]},
                       "trained_tokens": sum(m["trained_tokens"] for m in steps[:len(batch.mini_batches)]),
                       "optimizer_steps": len(steps)}

    def _step(self, state: TrainState, batch: PackedBatch) -> tuple[TrainState, dict[str, float]]:
        """One optimizer step over every micro-batch of `batch`; the state's buffers are donated.

        The parameters must be in device memory; the optimizer state and the master weights may be in host
        memory (colocated runs leave them there between steps, tbjax.trainer.handover) and are brought to the
        device only for `apply`."""
        held = (state.opt_state, state.master)
        if self.offload_optimizer:
            held = self._host_offload.to_host(held)
        grads, sums = self._accumulate_all(state.params, batch.arrays)
        opt_state, master = self._host_offload.to_device(held)
        state = TrainState(state.params, opt_state, state.step, master)
        state, sums = self.programs.apply(state, grads, sums, jnp.float32(batch.denominator))
        return state, step_metrics(jax.device_get(sums), batch.denominator)

    def logprobs(self, params: Params, batch: PackedBatch) -> jax.Array:
        """Per-token float32 log-probs of `batch`'s trained targets under `params`, [micro_batches, rows,
        row_len] like its FIELDS (0 where nothing is trained): one forward pass, no gradient."""
        forward = self.programs.forward
        return jnp.concatenate([forward(params, self.frozen, chunk) for chunk in self._calls(batch.arrays)])

    def gradients(self, params: Params, batch: Arrays, denominator: jax.Array) -> tuple[Params, Sums]:
        """The float32 gradient of the batch loss and the metric sums (what `update` applies), for tests and
        analyses; `batch` holds [micro_batches, ...] arrays."""
        grads, sums = self._accumulate_all(params, batch)
        return jax.tree.map(lambda g: g / denominator, grads), sums

    def _accumulate_all(self, params: Params, batch: Arrays) -> tuple[Params, Sums]:
        grads, sums = self.programs.zeros()
        for chunk in self._calls(batch):
            grads, sums = self.programs.accumulate(params, self.frozen, grads, sums, chunk)
        return grads, sums

    def _calls(self, batch: Arrays) -> Iterator[dict[str, np.ndarray | jax.Array]]:
        """The batch's micro-batches in groups of `micro_batches_per_call`, one per program call, on the batch
        sharding. Fields go to the devices in name order: with several processes each `device_put` is a
        collective, and the driver's batch and the broadcast copies hold their fields in different orders."""
        count = len(batch["tokens"])
        per_call = self.micro_batches_per_call or count
        for start in range(0, count, per_call):
            chunk = {k: batch[k][start:start + per_call] for k in sorted(batch)}
            if self.batch_sharding is not None:
                chunk = {k: jax.device_put(v, self.batch_sharding) for k, v in chunk.items()}
            yield chunk

    def state_shapes(self) -> TrainState:
        """The state as ShapeDtypeStructs on this trainer's shardings: what ahead-of-time compilation
        (tbjax.compile) lowers the update with, so a 27B plan allocates nothing."""
        params = nnx.to_pure_dict(self.abstract_state)
        opt_state = jax.eval_shape(lambda p: self.optimizer.init(to_f32(p)), params)
        step = jax.ShapeDtypeStruct((), jnp.int32)
        master = jax.eval_shape(to_f32, params) if self.keeps_master else None
        if self.shardings is None:
            return TrainState(params, opt_state, step, master)
        return jax.tree.map(lambda s, sharding: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding),
                            TrainState(params, opt_state, step, master), self.shardings.state)

    def frozen_shapes(self) -> Params:
        """The frozen base (LoRA; empty otherwise) as ShapeDtypeStructs on its shardings."""
        frozen = nnx.to_pure_dict(self.abstract_frozen)
        return frozen if self.shardings is None else jax.tree.map(sharded_shape, frozen, self.shardings.frozen)

    def lower(self, batch_shape: tuple[int, int, int]) -> LoweredUpdate:
        """The very programs `update` runs, lowered for one `accumulate` call's [micro_batches, rows, row_len]
        from abstract inputs (nothing allocated); `.compile()` gives their memory and cost analyses."""
        batch = {k: jax.ShapeDtypeStruct(batch_shape, FIELD_DTYPES[k], sharding=self.batch_sharding) for k in FIELDS}
        batch.update({k: jax.ShapeDtypeStruct(batch_shape, np.float32, sharding=self.batch_sharding)
                      for k in self.added_logprob_arrays})
        micro_batches, rows, row_len = batch_shape  # the head's widest case: every position trained
        shards = self.rows_multiple
        batch[HEAD_INDEX] = jax.ShapeDtypeStruct((micro_batches, shards, rows // shards * row_len), np.int32,
                                                 sharding=self.batch_sharding)
        state, frozen = self.state_shapes(), self.frozen_shapes()
        grads, sums = jax.eval_shape(self.programs.zeros)
        if self.shardings is not None:
            grads = jax.tree.map(sharded_shape, grads, self.shardings.params)
        return LoweredUpdate(self.programs.accumulate.lower(state.params, frozen, grads, sums, batch),
                             self.programs.apply.lower(state, grads, sums, jax.ShapeDtypeStruct((), jnp.float32)))

    def shard_state(self, state: TrainState) -> TrainState:
        """Places a (restored or fresh) state on this trainer's shardings."""
        if self.shardings is None:
            return state
        return jax.device_put(state, self.shardings.state)


def _with_array(batch: PackedBatch, name: str, values: jax.Array) -> PackedBatch:
    """`batch` with one more per-token array."""
    return dataclasses.replace(batch, arrays={**batch.arrays, name: values})


def make_trainer(config: Config, model: Qwen) -> GRPOTrainer:
    """The update as a run configures it; `python -m tbjax.compile` compiles this very one ahead of time."""
    return GRPOTrainer(model, config.grpo, config.optim, temperature=config.episode.temperature,
                       logprob_chunk=config.train.logprob_chunk,
                       offload_optimizer=config.train.offload_optimizer or config.rollout.placement == "colocated",
                       micro_batches_per_call=config.train.micro_batches_per_call,
                       ppo_epochs=config.train.ppo_epochs, mini_batches=config.train.mini_batches,
                       reference_placement=config.train.reference_placement)
