"""`python -m tbjax.train [--config FILE] [--mesh AxB] [--dry-run [--publish-probe]] [--verbose] [key=value ...]`

With no flags: the embedded default (configs/tiny-cpu.yaml). It resolves the config, checks what needs no
model (tasks, endpoints, files), joins the multi-host job, builds the mesh, loads the policy sharded, and runs
the default pipeline (tbjax.pipeline) or plain synchronous GRPO (tbjax.trainer.loop) with checkpoints, weight
publication to the rollout engine, and a final HF export.

Only the config is imported up front, so `--help` and config mistakes answer at once; JAX, the models and
the trainer load once the config is known to be usable. The terminal shows the banners, progress bars, step
lines, warnings and errors; every log record, libraries' INFO included, goes to <run directory>/log.txt
(rollout.log_routing; `--verbose`: to the terminal too).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape

from rollout.log_routing import add_verbose_flag, route_logs
from rollout.task_choice import MissingTaskInput, TaskChoiceError, training_tasks
from tbjax.config import Config, ConfigError, load_config
from tbjax.trainer.suite_setup import task_source

console = Console()


def parse_args(argv: list[str]) -> tuple[Config, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="python -m tbjax.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="a YAML file, or a shipped config by name: tiny-cpu (the default), smoke, "
                        "qwen3-8b-1x8, qwen3-27b-3x8-h100, qwen3-27b-tpu-v5p")
    parser.add_argument("--mesh", help="device mesh, e.g. 3x8 = hosts x local devices (data x fsdp)")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config, memory plan and "
                        "publish-time estimate, then exit")
    parser.add_argument("--publish-probe", action="store_true", help="with --dry-run: measure this machine's write "
                        "and read rates for the publish-time estimate (a real publish of a ~200 MB model, about 2 s)")
    add_verbose_flag(parser)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. model.remat=none")
    args = parser.parse_intermixed_args(argv)  # flags may sit among the overrides
    if args.publish_probe and not args.dry_run:
        parser.error("--publish-probe measures for the plan --dry-run prints: add --dry-run")
    overrides = list(args.overrides) + ([f"mesh.shape={args.mesh!r}"] if args.mesh else [])
    return load_config(args.config, overrides), args


def check_tasks(config: Config, dry_run: bool) -> None:
    """The domains, templates and selection (or τ²-bench's train split) exist: known before any model loads. A
    missing file (or τ²'s venv) only warns in a dry run, which may plan a cluster's run on a laptop."""
    try:
        training_tasks(task_source(config))
    except MissingTaskInput as error:
        if not dry_run:
            raise
        console.print(f"[yellow]warning:[/yellow] {escape(str(error))} (the run needs it, --dry-run does not)")


def main(argv: list[str] | None = None) -> int:
    try:
        config, args = parse_args(sys.argv[1:] if argv is None else argv)
        route_logs(None, verbose=args.verbose)  # the run's log file once the launch knows this process's
        check_tasks(config, args.dry_run)
    except (ConfigError, TaskChoiceError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")  # messages quote lists: not markup
        return 2
    from tbjax.pipeline.launch import MACHINE_ERRORS, USAGE_ERRORS, launch  # JAX starts here

    try:
        return launch(config, args.dry_run, console, publish_probe=args.publish_probe, verbose=args.verbose)
    except USAGE_ERRORS as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")
        return 2
    except MACHINE_ERRORS as error:
        console.print(f"[red]error:[/red] {escape(str(error))}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
