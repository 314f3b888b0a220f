"""`python -m tbjax.train [--config FILE] [--mesh AxB] [--dry-run] [key=value ...]`

With no flags: the embedded default (configs/tiny-cpu.yaml). It resolves the config, joins the multi-host
job, builds the mesh, loads the policy sharded, and runs synchronous GRPO (tbjax.trainer.loop) with checkpoints,
weight publication to the rollout engine, and a final HF export.
"""

from __future__ import annotations

import argparse
import logging
import sys

import jax
from flax import nnx
from rich.console import Console
from rich.filesize import decimal
from rich.markup import escape
from rich.table import Table

from rollout.formats import count
from tbjax.assets.model_source import planned_model_config, resolve_model_dir
from tbjax.config import ConfigError, MissingInputError, TrainConfig, load_config
from tbjax.models import CheckpointError, ModelConfig, Qwen, UnsupportedModelError, from_pretrained
from tbjax.models.placement import check_mesh_divides, checked_mesh
from tbjax.parallel.mesh import DistributedConfig, MeshError, initialize_distributed, parse_mesh_spec
from tbjax.parallel.sharding import ShardingError, ShardingRules, memory_summary
from tbjax.pipeline.stages import has_stages, run_pipeline
from tbjax.plan.aot import abstract_trainer, update_shape
from tbjax.plan.memory import estimate_update
from tbjax.trainer.checkpoint import ResumeError
from tbjax.trainer.handover import configure_xla_memory
from tbjax.trainer.loop import run_training, training_tasks
from tbjax.trainer.packing import PackingError

console = Console()


def parse_args(argv: list[str]) -> tuple[TrainConfig, bool]:
    parser = argparse.ArgumentParser(prog="python -m tbjax.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (default: configs/tiny-cpu.yaml)")
    parser.add_argument("--mesh", help="device mesh, e.g. 3x8 = hosts x local devices (data x fsdp)")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and memory plan, then exit")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. model.remat=none")
    args = parser.parse_intermixed_args(argv)  # flags may sit among the overrides
    overrides = list(args.overrides) + ([f"mesh.shape={args.mesh!r}"] if args.mesh else [])
    return load_config(args.config, overrides), args.dry_run


def print_plan(config: TrainConfig, model_config: ModelConfig) -> None:
    """The resolved config and the update's memory per device by tbjax.plan.memory's estimate of the largest
    step (`python -m tbjax.compile` compiles it for a target machine)."""
    spec = parse_mesh_spec(config.mesh.shape, config.mesh.layout)
    rules = ShardingRules()
    check_mesh_divides(model_config, spec, rules)
    trainer = abstract_trainer(config, model_config, spec.abstract(), rules)
    plan = estimate_update(model_config, spec, rules, trainer.state_shapes(), update_shape(config, trainer),
                           trainer.offload_optimizer)
    console.print(config.to_yaml())
    console.print(f"model: {model_config.model_type}, {count(model_config.num_params())} parameters")
    optimizer = "in host memory" if plan.optimizer_on_host else decimal(plan.optimizer)
    console.print(f"mesh {spec.describe()}, per device (estimate): backward pass: parameters {decimal(plan.params)} "
                  f"+ optimizer state {optimizer} + gradients {decimal(plan.gradients)} + activations "
                  f"{decimal(plan.activations + plan.batch)} = {decimal(plan.backward_peak)}; AdamW apply: "
                  f"parameters + optimizer state {decimal(plan.optimizer)} + gradient accumulator = "
                  f"{decimal(plan.apply_peak)}; peak {decimal(plan.total)}", soft_wrap=True)


def summarise(model: Qwen, config: TrainConfig) -> Table:
    cfg = model.config
    table = Table(title=f"policy: {config.model.path}", show_header=False)
    rows = {
        "architecture": f"{cfg.model_type}, {cfg.num_layers} layers, hidden {cfg.hidden_size}, "
                        f"{cfg.num_heads} heads / {cfg.num_kv_heads} kv x {cfg.head_dim}",
        "parameters": f"{count(cfg.num_params())} ({cfg.num_params():,})",
        "experts": f"{cfg.num_experts} (top {cfg.num_experts_per_tok})" if cfg.num_experts else "dense",
        "dtypes": f"params {cfg.runtime.param_dtype}, compute {cfg.runtime.compute_dtype}",
        "runtime": f"attention {cfg.runtime.attention_impl}, remat {cfg.runtime.remat}, "
                   f"scan {cfg.runtime.scan_layers}",
        "mesh": f"{dict(model.mesh.shape) if model.mesh else 'one device'} on {jax.default_backend()}",
        "memory": memory_summary(nnx.state(model, nnx.Param)).describe(),
    }
    for key, value in rows.items():
        table.add_row(key, value)
    return table


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("jax").setLevel(logging.WARNING)
    try:
        config, dry_run = parse_args(sys.argv[1:] if argv is None else argv)
        try:  # the domains, templates and selection exist: known before any model loads
            training_tasks(config)
        except MissingInputError as error:
            if not dry_run:
                raise
            console.print(f"[yellow]warning:[/yellow] {escape(str(error))} (the run needs it, --dry-run does not)")
        configure_xla_memory(config.rollout.placement)  # before JAX starts its backend
        distributed = DistributedConfig(config.mesh.coordinator_address, config.mesh.num_processes,
                                        config.mesh.process_id).merged_over(DistributedConfig.from_environment())
        how = initialize_distributed(distributed)
        if dry_run:
            print_plan(config, planned_model_config(config))
            return 0
        if has_stages(config):
            console.rule(f"tbjax.train: the {config.run.name} pipeline in {config.run.directory}")
            run_pipeline(config)
            console.print(f"[green]done[/green]: results in {config.run.directory / 'results.md'}")
            return 0
        model_dir = resolve_model_dir(config.model.path, config.run.directory)
        mesh = checked_mesh(config.mesh.shape, config.mesh.layout,
                            ModelConfig.from_pretrained(model_dir, config.model.runtime()))
        console.rule(f"tbjax.train: {config.run.name} ({how}, {jax.process_count()} process(es))")
        model = from_pretrained(model_dir, mesh=mesh, runtime=config.model.runtime())
        console.print(summarise(model, config))
        export = run_training(config, model, model_dir)
        console.print(f"[green]done[/green]: {config.train.steps} steps; checkpoints in "
                      f"{config.run.directory / 'checkpoints'}, HF export in {export}")
        return 0
    except (ConfigError, MeshError, ShardingError, UnsupportedModelError, CheckpointError, FileNotFoundError,
            ResumeError, PackingError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")  # messages quote lists: not markup
        return 2


if __name__ == "__main__":
    sys.exit(main())
