"""What `python -m tbjax.train` does once its config is known to be usable: place the XLA allocator, join the
multi-host job, then plan (--dry-run), run the default pipeline, or run plain GRPO on the loaded policy."""

from __future__ import annotations

import jax
from flax import nnx
from rich.console import Console
from rich.table import Table

from rollout.evaluation.coverage import InexactCampaignError
from rollout.log_routing import LOG_FILE, route_logs
from rollout.report_numbers import count
from tbjax.assets.model_source import planned_model_config, resolve_model_dir
from tbjax.config import Config, ConfigError
from tbjax.models import CheckpointError, Qwen, UnsupportedModelError
from tbjax.models.placement import load_policy
from tbjax.parallel.distributed import DistributedConfig, initialize_distributed
from tbjax.parallel.mesh import MeshError
from tbjax.parallel.sharding import ShardingError, memory_summary
from tbjax.parallel.xla_memory import configure_xla_memory
from tbjax.pipeline.stages import has_stages, run_pipeline
from tbjax.plan.report import print_plan
from tbjax.trainer.checkpoint import CheckpointWriteError, ResumeError
from tbjax.trainer.loop import run_training
from tbjax.trainer.packing import PackingError

# mistakes of the config, the mesh, the checkpoint or the batch: a message naming the fix, not a traceback
USAGE_ERRORS = (ConfigError, MeshError, ShardingError, UnsupportedModelError, CheckpointError, FileNotFoundError,
                ResumeError, PackingError)
# the machine's: a checkpoint the disk would not take, an evaluation whose trials system errors kept taking
# (exit 1, one line: nothing is lost, the run resumes and runs them again)
MACHINE_ERRORS = (CheckpointWriteError, InexactCampaignError)


def launch(config: Config, dry_run: bool, console: Console, publish_probe: bool = False,
           verbose: bool = False) -> int:
    """Runs the command; returns its exit code (0: done). `publish_probe`: the dry run measures this machine's
    write and read rates for the publish-time estimate. A run's log records go to its directory's log.txt
    (log.<i>.txt for process i > 0 of a multi-host job); `verbose`: to the terminal too."""
    configure_xla_memory(config.rollout.placement)  # before JAX starts its backend
    distributed = DistributedConfig(config.mesh.coordinator_address, config.mesh.num_processes,
                                    config.mesh.process_id).merged_over(DistributedConfig.from_environment())
    if not dry_run:
        process = distributed.process_id or 0
        route_logs(config.run.directory / (LOG_FILE if not process else f"log.{process}.txt"), verbose=verbose)
    how = initialize_distributed(distributed)
    if dry_run:
        print_plan(config, planned_model_config(config), console, publish_probe)
        return 0
    if has_stages(config):
        console.rule(f"tbjax.train: the {config.run.name} pipeline in {config.run.directory}")
        run_pipeline(config)
        console.print(f"[green]done[/green]: results in {config.run.directory / 'results.md'}")
        return 0
    model_dir = resolve_model_dir(config.model.path, config.run.directory)
    console.rule(f"tbjax.train: {config.run.name} ({how}, {jax.process_count()} process(es))")
    model = load_policy(model_dir, config)
    console.print(policy_table(model, config))
    export = run_training(config, model, model_dir)
    console.print(f"[green]done[/green]: {config.train.steps} steps; checkpoints in "
                  f"{config.run.directory / 'checkpoints'}, HF export in {export}")
    return 0


def policy_table(model: Qwen, config: Config) -> Table:
    """What was loaded, as the run starts: architecture, size, dtypes, runtime, mesh and memory."""
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
