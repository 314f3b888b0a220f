"""Who plays the agent in an evaluation, one entry per `--engine` choice (`SOURCES`): how its flags are checked,
what the trial records name the model, the longest sequence its servers hold, and how its trial runner opens and
closes. `rollout.evaluation.engine_flags` reads the flags and asks this table; nothing else switches on the name.

The embedded engine is started as server processes through `rollout.launch_sglang`'s Supervisor, so this
package never imports tbjax (the trainer passes its in-process engine to the library instead).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import yaml

from envs.chat_endpoint import ChatEndpointConfig
from rollout.engines.sglang import SGLangEngine
from rollout.episode import EpisodeConfig, SessionOpener
from rollout.evaluation.chat import ChatAgent, ChatAgentConfig, chat_trial_runner
from rollout.evaluation.runner import TrialRunner, token_trial_runner
from rollout.interpret import Interpreter
from rollout.launch_sglang import LaunchConfig, Supervisor, start_supervised

EMBEDDED_MAX_LEN = 4096  # tbjax.serve's --max-len when --server-args leaves it out
AGENT_TIMEOUT_S = 300.0  # one turn of an API model, which may reason for minutes before it answers

Runner = Callable[[argparse.Namespace, EpisodeConfig, SessionOpener | None], AbstractAsyncContextManager[TrialRunner]]


@dataclasses.dataclass(frozen=True)
class AgentSource:
    """One `--engine` choice."""

    token_level: bool  # tokens in, tokens out through our episode loop (seeds, --from-run); else an API's chat
    default_name: Callable[[argparse.Namespace], str]  # the model's name in the records without --model-name
    max_len: Callable[[argparse.Namespace], int | None]  # the longest sequence its servers hold (None: unknown)
    open: Runner  # the trial runner the flags describe, its servers and clients stopped on exit


def model_name(args: argparse.Namespace) -> str:
    return args.model_name or SOURCES[args.engine].default_name(args)


def embedded_max_len(server_args: str) -> int:
    """The --max-len that --server-args gives each embedded server: its own, or the rollout section's of the
    run config it names (--run-config), else tbjax.serve's default."""
    flags = shlex.split(server_args)
    if "--max-len" in flags[:-1]:
        return int(flags[flags.index("--max-len") + 1])
    if "--run-config" in flags[:-1]:
        return int(yaml.safe_load(Path(flags[flags.index("--run-config") + 1]).read_text())["rollout"]["max_len"])
    return EMBEDDED_MAX_LEN


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


def served_vocab_size(model_dir: str, tokenizer_size: int) -> int:
    """The served model's vocabulary (its config.json's, padded past the tokenizer's in most checkpoints), or
    the tokenizer's where the directory holds no config: an output id at or past it is the server's error."""
    config = Path(model_dir) / "config.json"
    if not config.is_file():
        return tokenizer_size
    values = json.loads(config.read_text())
    return int(values.get("vocab_size") or values.get("text_config", {}).get("vocab_size") or tokenizer_size)


@contextlib.asynccontextmanager
async def _on_servers(args: argparse.Namespace, urls: Sequence[str], tokenizer: str, config: EpisodeConfig,
                      opener: SessionOpener | None) -> AsyncIterator[TrialRunner]:
    """Token-level trials on the servers at `urls` (any that speak SGLang's API), the policy's tokenizer in
    `tokenizer`."""
    engine = None
    try:
        interpreter = Interpreter.from_pretrained(tokenizer, tool_call_format=args.tool_call_format)
        engine = SGLangEngine.from_urls(urls, vocab_size=served_vocab_size(tokenizer, len(interpreter.tokenizer)))
        yield token_trial_runner(engine, interpreter, model=model_name(args), config=config, opener=opener,
                                 seed=args.seed)
    finally:
        if engine is not None:
            await engine.close()


@contextlib.asynccontextmanager
async def _embedded(args: argparse.Namespace, config: EpisodeConfig,
                    opener: SessionOpener | None) -> AsyncIterator[TrialRunner]:
    if not args.model:
        raise SystemExit("--engine embedded needs --model DIR (an HF model directory with its tokenizer)")
    if not (Path(args.model) / "config.json").is_file():
        raise SystemExit(f"--model {args.model}: no HF model directory there (config.json missing); give the "
                         "directory a checkpoint was downloaded or exported to")
    check_budget_fits(config, args.server_args)
    supervisor = start_embedded(args.model, servers=args.servers, server_args=args.server_args)
    try:
        async with _on_servers(args, supervisor.urls, args.model, config, opener) as runner:
            yield runner
    finally:
        supervisor.stop()


@contextlib.asynccontextmanager
async def _sglang(args: argparse.Namespace, config: EpisodeConfig,
                  opener: SessionOpener | None) -> AsyncIterator[TrialRunner]:
    if not (args.url and args.tokenizer):
        raise SystemExit("--engine sglang needs --url (one per server) and --tokenizer DIR (the policy's)")
    async with _on_servers(args, args.url, args.tokenizer, config, opener) as runner:
        yield runner


@contextlib.asynccontextmanager
async def _openai(args: argparse.Namespace, config: EpisodeConfig,
                  opener: SessionOpener | None) -> AsyncIterator[TrialRunner]:
    if args.seed is not None:
        raise SystemExit("--seed seeds token-level sampling; an API model (--engine openai) takes no seed here: "
                         "drop --seed")
    if not (args.base_url and args.model):
        raise SystemExit("--engine openai needs --base-url and --model (and --api-key-env if it needs a key)")
    endpoint = ChatEndpointConfig(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env,
                                  timeout_s=AGENT_TIMEOUT_S)
    agent = ChatAgent.from_config(ChatAgentConfig(endpoint=endpoint, episode=config))
    try:
        yield chat_trial_runner(agent, opener=opener, model_name=model_name(args))
    finally:
        await agent.aclose()


DEFAULT_SOURCE = "embedded"  # --from-run's, where no --engine is given: the run's own policy, served here
SOURCES: dict[str, AgentSource] = {
    "embedded": AgentSource(True, lambda args: Path(args.model).name, lambda args: embedded_max_len(args.server_args),
                            _embedded),
    "sglang": AgentSource(True, lambda args: Path(args.tokenizer).name, lambda args: None, _sglang),
    "openai": AgentSource(False, lambda args: args.model, lambda args: None, _openai),
}
