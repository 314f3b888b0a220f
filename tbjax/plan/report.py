"""What `python -m tbjax.compile` does once JAX may start: resolve the config for the target, check the mesh
against the model's shapes, compile (or, for GPUs, estimate) the update and the decode step, and print the
per-device plan with a verdict."""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
from pathlib import Path

import jax
from jax.sharding import AbstractMesh, Mesh
from rich.console import Console
from rich.filesize import decimal
from rich.markup import escape
from rich.table import Table

from rollout.report_numbers import count
from tbjax.assets.model_source import planned_model_config
from tbjax.config import Config, ConfigError, load_config
from tbjax.models import ModelConfig, UnsupportedModelError
from tbjax.models.placement import check_mesh_divides
from tbjax.parallel.mesh import MeshError, MeshSpec, make_mesh, parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules
from tbjax.plan.aot import (
    CompiledStep,
    CompiledUpdate,
    OutOfMemory,
    compile_lowered,
    compile_update,
    lower_decode,
    planned_update,
)
from tbjax.plan.memory import MemoryPlan, UpdateShape
from tbjax.plan.publish_time import PublishEstimate, measured_rates, plan_publish, publish_lines
from tbjax.plan.targets import Target, TargetError, tpu_devices

console = Console(highlight=False, soft_wrap=True)
# The fused attention kernel of each platform; a config written for one platform compiles for another with it.
PLATFORM_ATTENTION = {"tpu": "splash", "cpu": "xla"}


@dataclasses.dataclass(frozen=True)
class Verdict:
    fits: bool | None  # None: no budget to check (CPU)
    peak: int
    budget: int | None
    source: str  # whose figure the peak is


def plan_and_report(args: argparse.Namespace, target: Target) -> int:
    try:
        config, cfg, spec, mesh = prepare(args, target)
    except (ConfigError, MeshError, ShardingError, TargetError, UnsupportedModelError, FileNotFoundError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")
        return 2
    rules = ShardingRules()
    console.rule(f"tbjax.compile: {args.config or 'default config'} on {target.describe()}")
    console.print(f"model: {cfg.model_type}, {count(cfg.num_params())} parameters, {cfg.num_layers} layers, "
                  f"hidden {cfg.hidden_size}; {cfg.runtime.param_dtype} parameters, remat {cfg.runtime.remat}, "
                  f"attention {cfg.runtime.attention_impl}; mesh {spec.describe()}")
    trainer, shape, estimate = planned_update(config, cfg, spec, mesh, rules)
    compiled, refusal = None, None
    if target.compiles:
        with console.status("compiling the GRPO update ahead of time"):
            try:
                compiled = compile_update(trainer, shape, fast=not args.full_optimization)
            except OutOfMemory as error:
                refusal = error
    budget = int(args.memory_gb * 1e9) if args.memory_gb else target.memory_bytes
    verdict = judge(estimate, compiled, refusal, budget)
    print_update(config, cfg, shape, estimate, compiled, target, verdict)
    if refusal:
        console.print(f"the compiler refused the update: {escape(str(refusal))}")
    decode = None
    if config.rollout.traits.in_process or args.decode:
        decode = print_decode(config, cfg, mesh, rules, target, budget)
    publish = plan_publish(config, measured_rates if args.publish_probe else None)
    for line in publish_lines(publish):
        console.print(line, markup=False)
    if args.json:
        write_record(args.json, target, spec, estimate, compiled, decode, verdict, publish)
    if verdict.fits is False:
        console.print(f"[red]does not fit[/red]: {explain(estimate, cfg, shape, verdict)}")
        return 1
    return 0


def print_plan(config: Config, model_config: ModelConfig, out: Console = console, publish_probe: bool = False) -> None:
    """What `python -m tbjax.train --dry-run` prints: the resolved config, the update's memory per device by
    tbjax.plan.memory's estimate of the largest step (`python -m tbjax.compile` compiles it for a machine), and
    the weight publish's time (tbjax.plan.publish_time; this machine's rates measured when `publish_probe`)."""
    spec = parse_mesh_spec(config.mesh.shape, config.mesh.layout)
    rules = ShardingRules()
    check_mesh_divides(model_config, spec, rules)
    _, _, plan = planned_update(config, model_config, spec, spec.abstract(), rules)
    out.print(config.to_yaml())
    out.print(f"model: {model_config.model_type}, {count(model_config.num_params())} parameters")
    held = plan.optimizer + plan.master
    optimizer = "in host memory" if plan.optimizer_on_host else decimal(held)
    masters = f" (float32 master weights {decimal(plan.master)} + AdamW moments)" if plan.master else ""
    base = f"frozen base {decimal(plan.frozen)} + " if plan.frozen else ""
    trained = "LoRA adapters" if plan.frozen else "parameters"
    out.print(f"mesh {spec.describe()}, per device (estimate): backward pass: {base}{trained} {decimal(plan.params)} "
              f"+ optimizer state{masters} {optimizer} + gradients {decimal(plan.gradients)} + activations "
              f"{decimal(plan.activations + plan.batch)} = {decimal(plan.backward_peak)}; AdamW apply: "
              f"{base}{trained} + optimizer state {decimal(held)} + gradient accumulator = "
              f"{decimal(plan.apply_peak)}; peak {decimal(plan.total)}", soft_wrap=True)
    for line in publish_lines(plan_publish(config, measured_rates if publish_probe else None)):
        out.print(line, markup=False, soft_wrap=True)


def prepare(args: argparse.Namespace, target: Target) -> tuple[Config, ModelConfig, MeshSpec, Mesh | AbstractMesh]:
    """Config, model and mesh for the target; every config or mesh mistake surfaces here, before a compile."""
    if target.kind == "cpu":
        request_cpu_devices(target.devices)
    overrides = list(args.overrides) + ([f"mesh.shape={args.mesh!r}"] if args.mesh else [])
    config = load_config(args.config, overrides)
    cfg = for_target(planned_model_config(config), target)
    spec = parse_mesh_spec(config.mesh.shape, config.mesh.layout)
    check_mesh_divides(cfg, spec, ShardingRules())  # seconds, from shapes alone
    if target.compiles and spec.num_devices != target.devices:
        raise MeshError(f"mesh {spec.describe()} needs {spec.num_devices} devices but {target.text} has "
                        f"{target.devices}; pass --mesh with sizes multiplying to {target.devices}")
    return config, cfg, spec, make_mesh(spec, target_devices(target)) if target.compiles else spec.abstract()


def for_target(cfg: ModelConfig, target: Target) -> ModelConfig:
    """The config's model with the target platform's attention kernel (a cuDNN or triton config compiles for
    a TPU with splash), said aloud when it changes."""
    impl = PLATFORM_ATTENTION.get(target.kind)
    if impl is None or cfg.runtime.attention_impl == impl:
        return cfg
    console.print(f"attention_impl {cfg.runtime.attention_impl} -> {impl}: the {target.kind.upper()} target's kernel")
    return cfg.with_runtime(attention_impl=impl)


def request_cpu_devices(count: int) -> None:
    """Before anything starts JAX's backends (resolving a tiny model does)."""
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        pass  # JAX already runs in this process (a test session): target_devices uses the CPU devices it has


def target_devices(target: Target) -> list:
    if target.kind == "tpu":
        return tpu_devices(target)
    devices = jax.devices("cpu")
    if len(devices) < target.devices:
        raise TargetError(f"{target.text} needs {target.devices} CPU devices but this process has {len(devices)}; "
                          "run python -m tbjax.compile in a process of its own")
    return devices[:target.devices]


def judge(estimate: MemoryPlan, compiled: CompiledUpdate | None, refusal: OutOfMemory | None,
          budget: int | None) -> Verdict:
    """The compiler's figure where there is one (also when it refused: its message says what it needed)."""
    if refusal:
        return Verdict(False, refusal.required or estimate.total, budget,
                       "what the compiler needed" if refusal.required else "estimate")
    peak, source = (compiled.peak, "compiled") if compiled else (estimate.total, "analytic estimate")
    return Verdict(None if budget is None else peak <= budget, peak, budget, source)


def print_update(config: Config, cfg: ModelConfig, shape: UpdateShape, estimate: MemoryPlan,
                 compiled: CompiledUpdate | None, target: Target, verdict: Verdict) -> None:
    console.print(f"GRPO update: {shape.micro_batches} micro-batch(es) x {shape.micro_batch_rows} row(s) per batch "
                  f"shard x {shape.row_len} tokens (every episode of {config.groups.groups} x "
                  f"{config.groups.group_size} in a row of its own: the largest step), {shape.call_micro_batches} "
                  "per accumulate call")
    console.print(memory_table(estimate, compiled, target))
    budget = f" of {decimal(verdict.budget)}" if verdict.budget else ""
    status = {True: "[green]fits[/green]", False: "[red]does not fit[/red]", None: "no budget on CPU"}[verdict.fits]
    console.print(f"peak per device {decimal(verdict.peak)} ({verdict.source}){budget}: {status}"
                  + (f"; compiled in {compiled.seconds:.0f} s" if compiled else ""))
    tokens = shape.micro_batches * shape.micro_batch_rows * shape.batch_shards * shape.row_len
    passes = 4 if cfg.runtime.remat != "none" else 3  # forward, backward (twice a forward), remat's re-forward
    flops = tokens * cfg.flops_per_token(shape.row_len) * passes
    line = f"FLOPs per step: {flops:.3g} for {tokens:,} tokens (model arithmetic, {passes} forward passes' worth)"
    if compiled and compiled.flops:
        line += (f"; XLA's cost analysis says {compiled.flops:.3g} per device, counting each scanned loop body "
                 "(layers, micro-batches, vocabulary chunks) once and no Pallas kernel")
    console.print(line)


def memory_table(estimate: MemoryPlan, compiled: CompiledUpdate | None, target: Target) -> Table:
    """The estimate line by line, then each program's peak beside the compiler's (which says only in total
    what its temporaries hold: gradients and activations share one buffer pool)."""
    source = "compiled" if compiled else "analytic estimate: no AOT for GPUs" if not target.compiles else "refused"
    table = Table(title=f"bytes per device ({source})")
    table.add_column("")
    table.add_column("estimate", justify="right")
    if compiled:
        table.add_column("compiled", justify="right")
    for name, value in estimate.lines():
        table.add_row(escape(name), decimal(value), *([""] if compiled else []))
    resident = " + the optimizer state and masters" if not estimate.optimizer_on_host else ""
    peaks = [(f"accumulate (forward and backward, micro-batch by micro-batch{resident})", estimate.backward_peak,
              compiled and compiled.accumulate_peak),
             ("apply (AdamW)", estimate.apply_peak, compiled and compiled.apply.peak),
             ("peak", estimate.total, compiled and compiled.peak)]
    for name, planned, measured in peaks:
        table.add_row(name, decimal(planned), *([decimal(measured)] if measured is not None else []))
    return table


def print_decode(config: Config, cfg: ModelConfig, mesh, rules: ShardingRules, target: Target,
                 budget: int | None) -> CompiledStep | None:
    r = config.rollout
    title = f"decode step (embedded engine, {r.slots} slots x {r.max_len}-token KV cache)"
    if not target.compiles:
        console.print(f"{title}: not estimated for GPUs")
        return None
    try:
        step = compile_lowered(lower_decode(cfg, mesh, rules, r.slots, r.max_len))  # small: effort moot
    except OutOfMemory as error:
        console.print(f"{title}: [red]does not fit[/red]: {escape(str(error))}")
        return None
    fits = "" if budget is None else (" fits" if step.peak <= budget else " [red]does not fit[/red]")
    console.print(f"{title}: parameters, cache and sampling {decimal(step.arguments)} + temporaries "
                  f"{decimal(step.temporaries)} = {decimal(step.peak)} per device;{fits} (compiled in "
                  f"{step.seconds:.0f} s)")
    return step


def write_record(path: Path, target: Target, spec: MeshSpec, estimate: MemoryPlan, update: CompiledUpdate | None,
                 decode: CompiledStep | None, verdict: Verdict, publish: PublishEstimate | None = None) -> None:
    """The plan as JSON, for CI and tests: bytes per device, the compiler's own figures beside the estimate, and
    the weight publish's estimate (None: the embedded engine publishes nothing)."""
    record = {
        "target": target.text, "mesh": dict(spec.sizes), "fits": verdict.fits, "peak": verdict.peak,
        "budget": verdict.budget,
        "estimate": {**dataclasses.asdict(estimate), "backward_peak": estimate.backward_peak,
                     "apply_peak": estimate.apply_peak, "total": estimate.total},
        "update": dataclasses.asdict(update) | {
            "accumulate_peak": update.accumulate_peak, "apply_peak": update.apply.peak, "peak": update.peak,
        } if update else None,
        "decode": dataclasses.asdict(decode) | {"peak": decode.peak} if decode else None,
        "host_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "publish": publish.record() if publish else None,
    }
    path.write_text(json.dumps(record, indent=1))


def explain(estimate: MemoryPlan, cfg: ModelConfig, shape: UpdateShape, verdict: Verdict) -> str:
    """Which parts are large and the levers that shrink them."""
    parts = sorted(estimate.peak_lines(), key=lambda line: -line[1])[:3]
    budget = decimal(verdict.budget) if verdict.budget else "the device's memory"
    text = (f"the update needs {decimal(verdict.peak)} per device, more than {budget}. Largest parts (estimate): "
            + ", ".join(f"{escape(name)} {decimal(value)}" for name, value in parts) + ".")
    names = {name.split(" (")[0] for name, _ in parts}
    if names & {"parameters", "master weights", "optimizer state", "gradient accumulator", "a micro-batch's gradient"}:
        text += (" State shrinks with a wider fsdp x tensor (the data axis replicates it): more devices, or "
                 "mesh.layout putting more of them on fsdp/tensor.")
    if names & {"optimizer state", "master weights"} and not estimate.optimizer_on_host:
        text += (" train.offload_optimizer=true keeps AdamW's moments and the master weights in host memory "
                 "through the backward pass.")
    if names & {"residual checkpoints", "one layer's recompute and backward"}:
        text += (f" Activations scale with train.micro_batch_rows x train.row_len ({shape.micro_batch_rows} x "
                 f"{shape.row_len}) and shrink with tensor parallelism (the sequence splits over it).")
    if "attention" in names and cfg.runtime.attention_impl == "cudnn":
        text += (" cuDNN is handed the packed-segment mask as a dense seq x seq bias per row; for long packed rows "
                 "set model.attention_impl=triton (Pallas's Triton flash attention takes segment ids; rows a "
                 "multiple of 128 tokens).")
    if "attention" in names and cfg.runtime.attention_impl == "xla":
        text += " xla attention materialises seq x seq scores: use the platform's fused kernel."
    return text
