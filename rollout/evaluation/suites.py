"""External suites for `rollout.evaluate`: ThinkingBox-Bench v1 from a local clone (evaluation only).

    --thinkingbox-data CLONE --thinkingbox-python VENV/bin/python
    [--user-base-url URL --user-model NAME [--user-api-key-env VAR]]      the simulated user (required by its tasks)
    [--judge-base-url URL --judge-model NAME [--judge-api-key-env VAR]]   the yes/no rubric judge (30 tasks)

The suite brings its own tasks and session opener (one MCP server process per episode); the episode loops
are the same as for the built-in domains. `rollout.select` never loads it: its tasks may not be trained on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from envs.chat_endpoint import ChatEndpointConfig
from envs.thinkingbox import ThinkingBoxConfig, ThinkingBoxSuite


def add_suite_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ThinkingBox-Bench (evaluation only)")
    group.add_argument("--thinkingbox-data", type=Path, help="local clone of microsoft/thinkingbox-data")
    group.add_argument("--thinkingbox-python", help="Python 3.12 of the servers' venv (fastmcp<4)")
    group.add_argument("--thinkingbox-test-list", help="test list, relative to the clone (default: the v1 release)")
    group.add_argument("--judge-base-url", help="OpenAI-compatible endpoint judging the yes/no rubrics")
    group.add_argument("--judge-model")
    group.add_argument("--judge-api-key-env")


def _endpoint(base_url: str | None, model: str | None, key_env: str | None, flag: str) -> ChatEndpointConfig | None:
    if not base_url:
        return None
    if not model:
        raise SystemExit(f"--{flag}-base-url needs --{flag}-model (the endpoint's model name)")
    return ChatEndpointConfig(base_url=base_url, model=model, api_key_env=key_env)


def load_thinkingbox(args: argparse.Namespace) -> ThinkingBoxSuite:
    """The suite the flags name (its first --limit tasks); the caller closes it (`await suite.aclose()`)."""
    if not args.thinkingbox_python:
        raise SystemExit("--thinkingbox-data needs --thinkingbox-python (the servers' Python 3.12 interpreter)")
    settings = {"data": args.thinkingbox_data, "python": args.thinkingbox_python,
                "user": _endpoint(args.user_base_url, args.user_model, args.user_api_key_env, "user"),
                "user_temperature": args.user_temperature,
                "judge": _endpoint(args.judge_base_url, args.judge_model, args.judge_api_key_env, "judge")}
    if args.thinkingbox_test_list:
        settings["test_list"] = args.thinkingbox_test_list
    return ThinkingBoxSuite.load(ThinkingBoxConfig(**settings), limit=args.limit)
