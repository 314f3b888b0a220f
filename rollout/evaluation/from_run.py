"""`rollout.evaluate --from-run RUN_DIR`: evaluate as a tbjax run evaluated, so that a campaign run later repeats
the run's own trial for trial.

A run directory is a training run's (`python -m tbjax.train` with no stages: config.yaml and summary.json at its
top) or the pipeline's (the same under grpo/, and the held-out tasks its evaluation ran in eval/heldout.jsonl).
From it come:
- the settings that decide what a trial does: the episode section, the prompt style (tasks.prompt), the tool-call
  format (rollout.tool_call_format), the sampling seeds (evaluate.seed) and the simulated user (user: scripted, or
  the LLM endpoint and its temperature). A flag that names another value is refused, never silently overridden;
- what it did unless a flag says otherwise: k and concurrency (evaluate.k, .concurrency), the tasks (the
  pipeline's held-out ones), the policy (the run's chosen export, named "trained" as the pipeline names it;
  `--model runs/<name>/warm_start/export/v<N> --model-name base` repeats the base policy's campaign instead);
- the engine: embedded servers start as `tbjax.serve --run-config`, the run's dtypes, slots, sequence length,
  decode steps and determinism. In deterministic mode each episode keeps its own cache row over HTTP
  (rollout.engines.sglang_wire's session headers), as in the trainer's in-process engine.

The run's config is read as plain YAML: this package never imports tbjax. Runs of a suite with sessions of its own
are refused (τ²-bench's: evaluate them with `--suite tau2`).
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from envs.suite_registry import get_suite
from rollout.episode import EpisodeConfig
from rollout.evaluation.agent_sources import DEFAULT_SOURCE, SOURCES
from rollout.evaluation.suites import brings_own_tasks

CONFIG_FILE, SUMMARY_FILE = "config.yaml", "summary.json"
HELDOUT_TASKS = Path("eval") / "heldout.jsonl"  # the pipeline's held-out tasks (envs.write_jsonl), under the run
TRAINED = "trained"  # the name the pipeline gives the trained policy's campaign, its records and its engine


class _Unset(list):
    """The preset value of every flag when finding which flags were given (a list, so that append actions can
    copy it)."""


def given_flags(parser: argparse.ArgumentParser, argv: list[str], parsed: argparse.Namespace) -> set[str]:
    """The destinations of the flags `argv` gives (`parsed`: `argv` parsed): parsed again into a namespace where
    every destination is already set, argparse fills in no default, so what changed was given (an explicit flag
    equal to its default included)."""
    unset = _Unset()
    given = parser.parse_args(argv, namespace=argparse.Namespace(**dict.fromkeys(vars(parsed), unset)))
    return {name for name, value in vars(given).items() if value is not unset}


@dataclass(frozen=True)
class RunSettings:
    """What --from-run reads from a run directory."""

    directory: Path  # as given
    training: Path  # the directory holding the training run's config.yaml and summary.json
    export: Path  # the policy the run chose (summary.json's `export`, found under `training`)
    owned: dict[str, Any]  # the evaluate flags (destinations) the run's settings decide, with the run's values
    evaluated: dict[str, int]  # k and concurrency, the run's unless flags choose others

    @property
    def config_file(self) -> Path:
        return self.training / CONFIG_FILE

    @property
    def heldout_tasks(self) -> Path:
        return self.directory / HELDOUT_TASKS


def read_run(directory: Path) -> RunSettings:
    """The run at `directory`: a training run's directory or the pipeline's (its grpo/ holding the training
    run). ValueError naming what is missing when it is neither, its config lacks a setting tbjax writes, or its
    export is gone."""
    training = directory if (directory / CONFIG_FILE).is_file() else directory / "grpo"
    for name in (CONFIG_FILE, SUMMARY_FILE):
        if not (training / name).is_file():
            raise ValueError(f"--from-run {directory}: no {name} in {training}; give the directory of a finished "
                             "tbjax run (runs/<name>, the pipeline's or a training run's)")
    config = yaml.safe_load((training / CONFIG_FILE).read_text()) or {}

    def setting(dotted: str) -> Any:
        value: Any = config
        for key in dotted.split("."):
            if not isinstance(value, dict) or key not in value:
                raise ValueError(f"--from-run {directory}: {training / CONFIG_FILE} has no {dotted}; it is not a "
                                 "config a tbjax run wrote")
            value = value[key]
        return value

    suite = get_suite(setting("tasks.suite"))
    if suite.settings_type is not None:
        raise ValueError(f"--from-run {directory}: a {suite.title} run; evaluate it with --suite {suite.name} and "
                         f"its flags (its sessions are {suite.title}'s own)")
    recorded = Path(json.loads((training / SUMMARY_FILE).read_text())["export"])
    try:  # recorded relative to where the run was launched, or absolute: found under the directory as it is now
        export = training / recorded.relative_to(Path(setting("run.root")) / setting("run.name"))
    except ValueError:
        export = recorded
    if not (export / "config.json").is_file():
        raise ValueError(f"--from-run {directory}: the run's export {export} is not an HF model directory "
                         "(config.json missing); was it moved or deleted?")
    owned: dict[str, Any] = {name: type(default)(setting(f"episode.{name}"))
                             for name, default in vars(EpisodeConfig()).items()}
    owned |= {"prompt": setting("tasks.prompt"), "tool_call_format": setting("rollout.tool_call_format"),
              "seed": setting("evaluate.seed")}
    endpoint = setting("user.endpoint") if setting("user.kind") == "llm" else None
    owned |= {"user_base_url": None, "user_model": None, "user_api_key_env": None, "user_temperature": None} \
        if endpoint is None else {"user_base_url": endpoint["base_url"], "user_model": endpoint["model"],
                                  "user_api_key_env": endpoint.get("api_key_env"),
                                  "user_temperature": float(setting("user.temperature"))}
    return RunSettings(directory=directory, training=training, export=export, owned=owned,
                       evaluated={name: int(setting(f"evaluate.{name}")) for name in ("k", "concurrency")})


def apply_run(parser: argparse.ArgumentParser, args: argparse.Namespace, given: set[str]) -> RunSettings:
    """Fills `args` from the run --from-run names (module docstring); a given flag that contradicts the run, or
    that cannot act with it, is the parser's error."""
    for flag, why in (("from_trials", "recomputes reports from records"),
                      ("server_args", "sets the servers as the run did (tbjax.serve --run-config)")):
        if flag in given:
            parser.error(f"--{flag.replace('_', '-')} {why}; --from-run cannot act with it: drop one")
    if brings_own_tasks(args) or (args.engine is not None and not SOURCES[args.engine].token_level):
        parser.error("--from-run evaluates as the run did, on token-level engines with the built-in domains: drop "
                     f"{args.suite_flag if brings_own_tasks(args) else f'--engine {args.engine}'}")
    try:
        run = read_run(args.from_run)
    except ValueError as error:
        parser.error(str(error))
    for name, value in run.owned.items():
        if name in given and getattr(args, name) != value:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: the run {run.directory} evaluated with "
                         f"{value}, and --from-run evaluates as it did; drop the flag (or drop --from-run)")
        setattr(args, name, value)
    for name, value in run.evaluated.items():
        if name not in given:
            setattr(args, name, value)
    args.engine = args.engine or DEFAULT_SOURCE
    if "model" not in given:
        args.model = str(run.export)
        args.model_name = args.model_name or TRAINED
    args.tokenizer = args.tokenizer or str(run.export)  # the policy's, for engines whose servers run elsewhere
    name = args.model_name or Path(args.model).name
    args.server_args = shlex.join(["--run-config", str(run.config_file), "--weight-version", name])
    if not given & {"tasks", "domain", "split"}:
        if not run.heldout_tasks.is_file():
            parser.error(f"--from-run {run.directory}: no {HELDOUT_TASKS} (the pipeline's held-out tasks) there; "
                         "choose the tasks with --tasks, --domain or --split")
        args.tasks = run.heldout_tasks
    return run
