"""Engines chosen by command-line flags, shared by `rollout.evaluate` and `rollout.select`.

    --engine sglang   --url U [--url U2 ...] --tokenizer DIR      running SGLang (or tbjax.serve) servers
    --engine embedded --model DIR                                  starts `python -m tbjax.serve` servers
    --engine openai   --base-url URL --model NAME --api-key-env VAR  an API model, chat level

The embedded engine is started as server processes through `rollout.launch_sglang`'s Supervisor, so this
package never imports tbjax (the trainer passes its in-process JaxEngine to the library instead).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import socket
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import get_args

import yaml

from envs import open_session
from envs.chat_endpoint import ChatClient, ChatEndpointConfig
from envs.session import PromptStyle
from envs.users.llm import LlmUser
from rollout.engines.sglang import SGLangEngine
from rollout.episode import EpisodeConfig, SessionOpener
from rollout.evaluation.chat import ChatAgent, ChatAgentConfig, chat_trial_runner
from rollout.evaluation.runner import TrialRunner, token_trial_runner
from rollout.interpret import Interpreter
from rollout.launch_sglang import LaunchConfig, Supervisor, start_supervised

EMBEDDED_MAX_LEN = 4096  # tbjax.serve's --max-len when --server-args leaves it out
AGENT_TIMEOUT_S = 300.0  # one turn of an API model, which may reason for minutes before it answers
USER_TEMPERATURE = 0.3  # the simulated user's when --user-temperature is unset (τ²-bench's own user: 0.0)


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument("--engine", choices=["embedded", "sglang", "openai"], help="who plays the agent")
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
        budget = EpisodeConfig().token_budget
        settings["token_budget"] = min(budget, embedded_max_len(args.server_args)) if args.engine == "embedded" \
            else budget
    return EpisodeConfig(**settings)


def embedded_max_len(server_args: str) -> int:
    """The --max-len that --server-args gives each embedded server: its own, or the rollout section's of the
    run config it names (--run-config), else tbjax.serve's default."""
    flags = shlex.split(server_args)
    if "--max-len" in flags[:-1]:
        return int(flags[flags.index("--max-len") + 1])
    if "--run-config" in flags[:-1]:
        return int(yaml.safe_load(Path(flags[flags.index("--run-config") + 1]).read_text())["rollout"]["max_len"])
    return EMBEDDED_MAX_LEN


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


def model_name(args: argparse.Namespace) -> str:
    if args.model_name:
        return args.model_name
    if args.engine == "embedded":
        return Path(args.model).name
    if args.engine == "sglang":
        return Path(args.tokenizer).name
    return args.model


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_embedded(model_dir: str | Path, *, servers: int = 1, server_args: str = "--slots 8 --max-len 4096",
                   startup_timeout_s: float = 600.0) -> Supervisor:
    """Starts `servers` processes of `python -m tbjax.serve --model DIR` on free local ports and waits until
    all are healthy; the caller stops them (`supervisor.stop()`)."""
    return start_supervised(LaunchConfig(
        model_path=str(model_dir), tp=1, servers=servers, port=_free_port(),
        server_command=(sys.executable, "-m", "tbjax.serve"), extra_args=tuple(shlex.split(server_args)),
        startup_timeout_s=startup_timeout_s, restart_backoff_s=1.0))


def check_budget_fits(config: EpisodeConfig, server_args: str) -> None:
    """An embedded server holds at most --max-len tokens a sequence (tbjax.serve's default: 4096); an episode
    may grow to --token-budget. A budget past it would turn long episodes into refused requests, so the
    mismatch stops the command before any server starts."""
    max_len = embedded_max_len(server_args)
    if config.token_budget > max_len:
        raise SystemExit(f"--token-budget {config.token_budget} exceeds the embedded servers' --max-len {max_len} "
                         f"(--server-args {server_args!r}): an episode could outgrow its sequence. Pass "
                         f"--token-budget {max_len} or less, or a larger --max-len in --server-args")


@contextlib.asynccontextmanager
async def trial_runner_from_flags(args: argparse.Namespace, opener: SessionOpener | None = None
                                  ) -> AsyncIterator[TrialRunner]:
    """The trial runner the flags describe (episodes opened by `opener`, e.g. a suite's, else by the built-in
    domains' opener with the user the flags name); servers and clients it starts are stopped on exit."""
    config, name = episode_config(args), model_name(args)
    if opener is not None and args.prompt != "full":
        raise SystemExit(f"--prompt {args.prompt} styles the built-in domains' instructions, and this suite opens "
                         "its own sessions: drop --prompt")
    opener = opener or session_opener(args)
    if args.engine == "openai":
        if args.seed is not None:
            raise SystemExit("--seed seeds token-level sampling; an API model (--engine openai) takes no seed here: "
                             "drop --seed")
        if not (args.base_url and args.model):
            raise SystemExit("--engine openai needs --base-url and --model (and --api-key-env if it needs a key)")
        endpoint = ChatEndpointConfig(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env,
                                      timeout_s=AGENT_TIMEOUT_S)
        agent = ChatAgent.from_config(ChatAgentConfig(endpoint=endpoint, episode=config))
        try:
            yield chat_trial_runner(agent, opener=opener, model_name=name)
        finally:
            await agent.aclose()
        return
    supervisor = None
    if args.engine == "embedded":
        if not args.model:
            raise SystemExit("--engine embedded needs --model DIR (an HF model directory with its tokenizer)")
        if not (Path(args.model) / "config.json").is_file():
            raise SystemExit(f"--model {args.model}: no HF model directory there (config.json missing); give the "
                             "directory a checkpoint was downloaded or exported to")
        check_budget_fits(config, args.server_args)
        supervisor = start_embedded(args.model, servers=args.servers, server_args=args.server_args)
        urls, tokenizer = supervisor.urls, args.model
    elif args.engine == "sglang":
        if not (args.url and args.tokenizer):
            raise SystemExit("--engine sglang needs --url (one per server) and --tokenizer DIR (the policy's)")
        urls, tokenizer = args.url, args.tokenizer
    else:
        raise SystemExit("choose --engine embedded, sglang or openai (or --from-trials FILE)")
    engine = None
    try:
        interpreter = Interpreter.from_pretrained(tokenizer, tool_call_format=args.tool_call_format)
        engine = SGLangEngine.from_urls(urls, vocab_size=served_vocab_size(tokenizer, len(interpreter.tokenizer)))
        yield token_trial_runner(engine, interpreter, model=name, config=config, opener=opener, seed=args.seed)
    finally:
        if engine is not None:
            await engine.close()
        if supervisor is not None:
            supervisor.stop()


def served_vocab_size(model_dir: str, tokenizer_size: int) -> int:
    """The served model's vocabulary (its config.json's, padded past the tokenizer's in most checkpoints), or
    the tokenizer's where the directory holds no config: an output id at or past it is the server's error."""
    config = Path(model_dir) / "config.json"
    if not config.is_file():
        return tokenizer_size
    values = json.loads(config.read_text())
    return int(values.get("vocab_size") or values.get("text_config", {}).get("vocab_size") or tokenizer_size)
