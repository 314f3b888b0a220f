"""Engines chosen by command-line flags, shared by `rollout.evaluate` and `rollout.select`.

    --engine sglang   --url U [--url U2 ...] --tokenizer DIR      running SGLang (or tbjax.serve) servers
    --engine embedded --model DIR                                  starts `python -m tbjax.serve` servers
    --engine openai   --base-url URL --model NAME --api-key-env VAR  an API model, chat level

Each choice is an entry of rollout.evaluation.agent_sources.SOURCES, which these flags ask.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import get_args

from envs import open_session
from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.session import PromptStyle
from envs.users.llm import LlmUser
from rollout.episode import EpisodeConfig, SessionOpener
from rollout.evaluation.agent_sources import SOURCES
from rollout.evaluation.runner import TrialRunner

USER_TEMPERATURE = 0.3  # the simulated user's when --user-temperature is unset (τ²-bench's own user: 0.0)


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument("--engine", choices=list(SOURCES), help="who plays the agent")
    group.add_argument("--model", help="embedded: HF model directory; openai: the API's model name")
    group.add_argument("--url", action="append", default=[], help="sglang: a server URL (repeat for several)")
    group.add_argument("--tokenizer", help="sglang: directory with the policy's tokenizer and chat template")
    group.add_argument("--tool-call-format", default="hermes", choices=["hermes", "qwen3_xml"])
    group.add_argument("--servers", type=int, default=1, help="embedded: server processes to start")
    group.add_argument("--server-args", default="--slots 8 --max-len 4096",
                       help="embedded: extra flags for each `python -m tbjax.serve`")
    group.add_argument("--base-url", help="openai: e.g. https://api.example.com/v1")
    group.add_argument("--api-key-env", help="openai: NAME of the environment variable holding the API key")
    group.add_argument("--model-name", help="name recorded in the trial records (default from the engine flags)")
    group.add_argument("--seed", type=int, help="sampling seeds: trial i of a task samples with a seed derived from "
                       "(seed, task, i), so two policies face the same draws and a rerun repeats itself on engines "
                       "that honour seeds (default: the engine's own randomness); token-level engines only")
    group.add_argument("--prompt", choices=get_args(PromptStyle), default="full",
                       help="the built-in domains' instructions: full (policy and tool schemas) or compact (the "
                            "domain's one-line description, as the laptop default trains with)")
    episode = parser.add_argument_group("episode")
    for name, default in vars(EpisodeConfig()).items():
        episode.add_argument(f"--{name.replace('_', '-')}", type=type(default),
                             default=None if name == "token_budget" else default,
                             help=f"default {default}" + (" (embedded: at most the servers' --max-len)"
                                                          if name == "token_budget" else ""))
    user = parser.add_argument_group("simulated user (default: the scripted user)")
    user.add_argument("--user-base-url", help="an OpenAI-compatible endpoint playing the user")
    user.add_argument("--user-model")
    user.add_argument("--user-api-key-env")
    user.add_argument("--user-temperature", type=float,
                      help=f"default {USER_TEMPERATURE}; τ²-bench's user (--suite tau2) 0.0, τ²'s own default")


def episode_config(args: argparse.Namespace) -> EpisodeConfig:
    """The episode flags; an unset --token-budget is the seed's, or on embedded servers their --max-len when
    that is shorter (an episode must fit one sequence: a budget set past it is refused by check_budget_fits)."""
    settings = {name: getattr(args, name) for name in vars(EpisodeConfig())}
    if settings["token_budget"] is None:
        max_len = SOURCES[args.engine].max_len(args) if args.engine is not None else None
        settings["token_budget"] = min(EpisodeConfig().token_budget, max_len or EpisodeConfig().token_budget)
    return EpisodeConfig(**settings)


def session_opener(args: argparse.Namespace) -> SessionOpener | None:
    """The built-in domains' sessions in the --prompt style, with the LLM user when --user-base-url is given;
    None where the episode's default (scripted user, full prompt) is what the flags ask for."""
    if not args.user_base_url:
        return None if args.prompt == "full" else partial(open_session, prompt=args.prompt)
    if not args.user_model:
        raise SystemExit("--user-base-url needs --user-model (the user simulator's model name)")
    client = ChatClient.from_config(ChatEndpointConfig(base_url=args.user_base_url, model=args.user_model,
                                                       api_key_env=args.user_api_key_env))
    temperature = USER_TEMPERATURE if args.user_temperature is None else args.user_temperature
    return partial(open_session, user=lambda scenario: LlmUser(scenario, client, temperature), prompt=args.prompt)


@contextlib.asynccontextmanager
async def trial_runner_from_flags(args: argparse.Namespace, opener: SessionOpener | None = None
                                  ) -> AsyncIterator[TrialRunner]:
    """The trial runner the flags describe (episodes opened by `opener`, e.g. a suite's, else by the built-in
    domains' opener with the user the flags name); servers and clients it starts are stopped on exit."""
    if args.engine is None:
        raise SystemExit(f"choose --engine {', '.join(SOURCES)} (or --from-trials FILE)")
    config = episode_config(args)
    if opener is not None and args.prompt != "full":
        raise SystemExit(f"--prompt {args.prompt} styles the built-in domains' instructions, and this suite opens "
                         "its own sessions: drop --prompt")
    async with SOURCES[args.engine].open(args, config, opener or session_opener(args)) as runner:
        yield runner
