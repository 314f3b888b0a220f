"""Ahead-of-time compilation of the trainer's GRPO update and the engine's decode step for a mesh, from
abstract inputs only: parameters and optimizer state come from nnx.eval_shape / jax.eval_shape and reach the
compiler as ShapeDtypeStructs with shardings, so planning a 27B run allocates nothing. The update is the one
the run jits (tbjax.trainer.update.make_trainer), the decode step the engine's own (tbjax.engine.device_step.step).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding

from tbjax.config import Config
from tbjax.engine.device_step import step as engine_step
from tbjax.engine.sampling import RowSampling
from tbjax.models import ModelConfig, Qwen
from tbjax.models.decoding import KVCache
from tbjax.models.lora import add_adapters
from tbjax.parallel.mesh import MeshSpec
from tbjax.parallel.sharding import ShardingRules, param_shardings
from tbjax.plan.memory import MemoryPlan, UpdateShape, estimate_update, shard_bytes
from tbjax.trainer.update import GRPOTrainer, make_trainer


class OutOfMemory(RuntimeError):
    """The compiler refused the program: it needs more device memory than the target has."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        # "... required for HLO temporaries (151.30G) exceeds available HBM (95.74G)": binary units
        found = re.search(r"required for [^(]*\(([\d.]+)([KMGT])\)", message)
        self.required = int(float(found[1]) * 1024 ** "KMGT".index(found[2]) * 1024) if found else None


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """What the compiler says about one program, per device."""

    arguments: int
    outputs: int
    aliased: int  # outputs written into donated arguments
    temporaries: int
    code: int
    flops: float | None  # XLA's cost analysis: each loop body (scan over layers, micro-batches) counted once
    seconds: float

    @property
    def peak(self) -> int:
        return self.arguments + self.outputs - self.aliased + self.temporaries + self.code


@dataclasses.dataclass(frozen=True)
class CompiledUpdate:
    """The update's two programs (tbjax.trainer.update) and what stays on the device beside `accumulate` without
    being one of its arguments: the optimizer state and the master weights, unless they wait in host memory,
    and the KL reference's parameters where they are kept on the device."""

    accumulate: CompiledStep
    apply: CompiledStep
    resident: int

    @property
    def accumulate_peak(self) -> int:
        return self.accumulate.peak + self.resident

    @property
    def peak(self) -> int:
        return max(self.accumulate_peak, self.apply.peak)

    @property
    def flops(self) -> float | None:
        """XLA's count per device, each scanned loop body counted once."""
        if self.accumulate.flops is None or self.apply.flops is None:
            return None
        return self.accumulate.flops + self.apply.flops

    @property
    def seconds(self) -> float:
        return self.accumulate.seconds + self.apply.seconds


def update_shape(config: Config, trainer: GRPOTrainer) -> UpdateShape:
    """The batch of the run's largest step: every episode of the step's groups in a row of its own (packing
    only ever needs fewer rows)."""
    rows_per_micro = config.train.micro_batch_rows * trainer.rows_multiple
    episodes = config.groups.groups * config.groups.group_size
    return UpdateShape(config.train.row_len, config.train.micro_batch_rows, math.ceil(episodes / rows_per_micro),
                       config.train.logprob_chunk, trainer.rows_multiple, trainer.micro_batches_per_call,
                       len(trainer.added_logprob_arrays))


def abstract_trainer(config: Config, cfg: ModelConfig, mesh: Mesh | AbstractMesh,
                     rules: ShardingRules) -> GRPOTrainer:
    """The run's trainer over a model that exists only as shapes."""
    def adapted() -> Qwen:
        model = Qwen(cfg, nnx.Rngs(0), mesh=mesh, rules=rules)
        if config.lora.enabled:  # as tbjax.trainer.run_setup.build_run adds them
            add_adapters(model, config.lora.spec(), config.lora.seed)
        return model
    return make_trainer(config, nnx.eval_shape(adapted))


def planned_update(config: Config, cfg: ModelConfig, spec: MeshSpec, mesh: Mesh | AbstractMesh,
                   rules: ShardingRules) -> tuple[GRPOTrainer, UpdateShape, MemoryPlan]:
    """The run's update on the mesh: its trainer over abstract parameters, the shape of its largest step, and
    the analytic memory estimate of that step (what --dry-run prints and tbjax.compile checks)."""
    trainer = abstract_trainer(config, cfg, mesh, rules)
    shape = update_shape(config, trainer)
    return trainer, shape, estimate_update(cfg, spec, rules, trainer.state_shapes(), shape, trainer.offload_optimizer,
                                           trainer.frozen_shapes())


def compile_update(trainer: GRPOTrainer, shape: UpdateShape, fast: bool = True) -> CompiledUpdate:
    """Both programs of the run's update for the mesh's devices; OutOfMemory when either does not fit."""
    programs = trainer.lower((shape.call_micro_batches, shape.micro_batch_rows * shape.batch_shards, shape.row_len))
    state = trainer.state_shapes()
    resident = 0 if trainer.offload_optimizer else shard_bytes((state.opt_state, state.master))
    if trainer.grpo.uses_reference and trainer.reference_placement == "device":
        resident += shard_bytes(state.params)
    return CompiledUpdate(compile_lowered(programs.accumulate, fast), compile_lowered(programs.apply, fast),
                          resident)


def lower_decode(cfg: ModelConfig, mesh: Mesh, rules: ShardingRules, slots: int, max_len: int) -> jax.stages.Lowered:
    """One decode step of the embedded engine: every slot feeds one token and attends over the whole cache
    (the largest shape it compiles). Parameters shard as in training. The KV cache is planned with its slots
    split over the batch axes and its kv heads over the tensor axis; the engine allocates it unsharded today,
    so on a mesh of several devices this is a plan for it, not a picture of it."""
    model = nnx.eval_shape(lambda: Qwen(cfg, nnx.Rngs(0), mesh=mesh, rules=rules))
    graphdef, state = nnx.split(model)
    shardings = nnx.to_pure_dict(param_shardings(state, mesh, rules))
    nnx.replace_by_pure_dict(state, jax.tree.map(
        lambda s, sharding: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), nnx.to_pure_dict(state),
        shardings))
    cache = jax.tree.map(lambda s: _sharded(s, mesh, rules, _cache_axes(s.ndim)),
                         jax.eval_shape(lambda: KVCache.zeros(cfg, slots, max_len)))
    rows = {"tokens": ((slots, 1), jnp.int32), "slots": ((slots,), jnp.int32), "starts": ((slots,), jnp.int32),
            "last_index": ((slots,), jnp.int32), "seeds": ((slots,), jnp.uint32), "counters": ((slots,), jnp.int32)}
    inputs = {k: _sharded(jax.ShapeDtypeStruct(s, t), mesh, rules, ("batch",) + (None,) * (len(s) - 1))
              for k, (s, t) in rows.items()}
    sampling = jax.tree.map(lambda s: _sharded(s, mesh, rules, ("batch",)),
                            jax.eval_shape(lambda: RowSampling.stack([(1.0, 0, 1.0, 0.0)] * slots)))
    return engine_step.lower(graphdef, state, cache, inputs["tokens"], inputs["slots"], inputs["starts"],
                             inputs["last_index"], inputs["seeds"], inputs["counters"], sampling, kv_len=max_len)


def _cache_axes(ndim: int) -> tuple[str | None, ...]:
    """KV cache leaves are [layers, slots, ...]; keys and values end in [..., kv_heads, head_dim]."""
    if ndim == 5:
        return (None, "batch", None, "kv_heads", None)
    return (None, "batch") + (None,) * (ndim - 2)


def _sharded(s: jax.ShapeDtypeStruct, mesh: Mesh, rules: ShardingRules,
             logical: tuple[str | None, ...]) -> jax.ShapeDtypeStruct:
    spec = rules.activation_spec(s.shape, logical, mesh)
    return jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=NamedSharding(mesh, spec))


def compile_lowered(lowered: jax.stages.Lowered, fast: bool = True) -> CompiledStep:
    """Compiles for the lowered program's devices; OutOfMemory when the compiler finds it does not fit.

    `fast` sets XLA's execution-time optimisation effort to its minimum: scheduling for speed is what takes a
    TPU compile minutes, and it barely moves memory (`--full-optimization` compiles at full effort to compare);
    memory-fitting effort stays at its default.
    """
    # an XLA option's value has the option's own type, here a float: jax's CompilerOptions (str | bool values) is
    # too narrow, and the string "-1.0" is refused by XLA's build options
    options: dict[str, Any] | None = {"exec_time_optimization_effort": -1.0} if fast else None
    start = time.perf_counter()
    try:
        compiled = lowered.compile(options)
    except Exception as error:  # XlaRuntimeError; its message is all the compiler tells
        if "RESOURCE_EXHAUSTED" in str(error):
            raise OutOfMemory(str(error).split("\n")[0]) from None
        raise
    seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    if memory is None:
        raise RuntimeError("the backend gives no memory analysis of the compiled program: nothing to plan with")
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return CompiledStep(memory.argument_size_in_bytes, memory.output_size_in_bytes, memory.alias_size_in_bytes,
                        memory.temp_size_in_bytes, memory.generated_code_size_in_bytes,
                        (cost or {}).get("flops"), seconds)
