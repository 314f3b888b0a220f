"""Start and supervise this node's SGLang servers: `python -m rollout.launch_sglang --model-path DIR --tp 8`.

Runs `--servers` copies of `python -m sglang.launch_server --model-path DIR --tp N --port P --host H ...`,
each on its own `tp` GPUs (CUDA_VISIBLE_DEVICES), waits until every one answers GET /health, prints
`SGLANG_URLS=url,url,...` for the trainer, and then keeps them alive: a server whose process exits (or
that does not become healthy in time) is restarted after an exponential backoff, at most `--max-restarts`
times each, after which everything is stopped and the launcher exits non-zero (a node that keeps losing
servers needs a person). SIGTERM/SIGINT stop every server's whole process group (tensor-parallel workers
included). `--server-command` swaps in another server program (the tests use a stub, tbjax.serve and
sglang-jax). `--colocated` is for servers that share their GPUs with the trainer (rollout.placement=colocated):
they start with `--enable-memory-saver`, so that they can release and resume their memory around each update.
`--lora-rank R` is for LoRA GRPO (lora.rank > 0): servers start with `--enable-lora --max-lora-rank R
--lora-target-modules ...`, so that they can load each published adapter and serve requests under it.
`Supervisor.restart_on(DIR)` restarts every server on another model directory: how weights are published to
servers that cannot load them in place (sglang-jax), which `SGLangEngine(restart_servers=...)` falls back to.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from typing import NoReturn

log = logging.getLogger("rollout.launch_sglang")


class LaunchError(RuntimeError):
    """The servers could not be brought up or kept up."""


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    model_path: str
    tp: int = 8
    servers: int = 1  # per node
    host: str = "127.0.0.1"
    port: int = 30000  # server i listens on port + i
    gpus: tuple[str, ...] = ()  # device ids to split among the servers; () = CUDA_VISIBLE_DEVICES or 0..n-1
    server_command: tuple[str, ...] = (sys.executable, "-m", "sglang.launch_server")
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set for the servers on top of this process's environment
    colocated: bool = False  # the trainer shares these GPUs: servers must be able to release their memory
    lora_rank: int = 0  # > 0: servers load LoRA adapters of up to this rank (the trainer's lora.rank)
    lora_targets: tuple[str, ...] = ("all",)  # the projections adapters may adapt (SGLang's module names)
    startup_timeout_s: float = 1800.0  # a 27B checkpoint loads in minutes
    max_restarts: int = 3  # per server
    restart_backoff_s: float = 5.0  # doubled after each restart of the same server
    poll_s: float = 1.0

    def __post_init__(self) -> None:
        if self.tp < 1 or self.servers < 1:
            raise ValueError(f"--tp and --servers must be >= 1, got tp={self.tp} servers={self.servers}")
        if self.lora_rank < 0 or not self.lora_targets:
            raise ValueError(f"--lora-rank must be >= 0 and --lora-target-modules non-empty, got {self.lora_rank} "
                             f"and {list(self.lora_targets)}")
        if self.gpus and len(self.gpus) < self.tp * self.servers:
            raise ValueError(f"{self.servers} servers x tp {self.tp} need {self.tp * self.servers} GPUs, but only "
                             f"{len(self.gpus)} are given ({','.join(self.gpus)}); lower --servers or --tp")


@dataclasses.dataclass
class ServerProcess:
    """One supervised server: its command, and the state of its current process."""

    index: int
    url: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen | None = None
    ready: bool = False
    started_at: float = 0.0
    restart_at: float | None = None  # set while waiting out the backoff before a restart
    restarts: int = 0
    was_healthy: bool = False  # once: a later exit is a crash worth a restart, an earlier one a bad command


class Supervisor:
    """Starts, watches and stops the servers. `start()` blocks until all are healthy; `watch()` keeps them
    alive until `stop()` (or a LaunchError)."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        gpus = config.gpus or _visible_gpus(config.tp * config.servers)
        public_host = socket.gethostname() if config.host in ("0.0.0.0", "::") else config.host
        self.servers = []
        for i in range(config.servers):
            port = config.port + i
            argv = [*config.server_command, "--model-path", config.model_path, "--tp", str(config.tp),
                    "--port", str(port), "--host", config.host,
                    *(["--enable-memory-saver"] if config.colocated else []), *_lora_flags(config),
                    *config.extra_args]
            env = {**os.environ, **dict(config.env),
                   "CUDA_VISIBLE_DEVICES": ",".join(gpus[i * config.tp:(i + 1) * config.tp])}
            self.servers.append(ServerProcess(i, f"http://{public_host}:{port}", argv, env))
        self._lock = threading.RLock()  # restart_on from the rollout thread vs check() from a watcher thread

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def start(self) -> list[str]:
        for server in self.servers:
            self._spawn(server)
        while not all(s.ready for s in self.servers):
            time.sleep(self.config.poll_s)
            self.check()
        return self.urls

    def watch(self) -> NoReturn:
        while True:
            time.sleep(self.config.poll_s)
            self.check()

    def restart_on(self, model_path: str) -> None:
        """Stops every server and starts it again on `model_path` (an HF directory of the same architecture);
        returns once all are healthy. Deliberate restarts do not count against --max-restarts."""
        with self._lock:
            self.stop()
            self.config = dataclasses.replace(self.config, model_path=model_path)
            for server in self.servers:
                server.argv[server.argv.index("--model-path") + 1] = model_path
            self.start()

    def check(self) -> None:
        """One supervision pass: restart what died, notice what became healthy."""
        with self._lock:
            self._check()

    def _check(self) -> None:
        now = time.monotonic()
        for server in self.servers:
            if server.restart_at is not None:
                if now >= server.restart_at:
                    self._spawn(server)
                continue
            assert server.process is not None
            code = server.process.poll()
            if code is not None and not server.was_healthy:
                raise LaunchError(f"server {server.index} ({server.url}) exited with code {code} before it was ever "
                                  "healthy: its command, model or port is wrong, which a restart cannot fix; see "
                                  "its log above for the cause")
            if code is not None:
                self._schedule_restart(server, f"exited with code {code}")
            elif not server.ready:
                if healthy(server.url):
                    server.ready = server.was_healthy = True
                    log.info("server %d healthy at %s", server.index, server.url)
                elif now - server.started_at > self.config.startup_timeout_s:
                    _terminate([server.process])
                    self._schedule_restart(server, f"not healthy after {self.config.startup_timeout_s:.0f} s")

    def _spawn(self, server: ServerProcess) -> None:
        log.info("starting server %d: %s", server.index, shlex.join(server.argv))
        server.process = subprocess.Popen(server.argv, env=server.env, start_new_session=True)
        server.started_at, server.ready, server.restart_at = time.monotonic(), False, None

    def _schedule_restart(self, server: ServerProcess, why: str) -> None:
        if server.restarts >= self.config.max_restarts:
            raise LaunchError(f"server {server.index} ({server.url}) {why} and has used all "
                              f"{self.config.max_restarts} restarts; see its log above for the cause")
        delay = self.config.restart_backoff_s * 2 ** server.restarts
        server.restarts += 1
        server.ready = False
        server.restart_at = time.monotonic() + delay
        log.warning("server %d (%s) %s; restart %d/%d in %.1f s", server.index, server.url, why,
                    server.restarts, self.config.max_restarts, delay)

    def stop(self) -> None:
        _terminate([s.process for s in self.servers if s.process is not None])


def start_supervised(config: LaunchConfig) -> Supervisor:
    """A Supervisor whose servers all answer /health; the caller stops them. When they cannot all be
    brought up, those that were started are stopped before the error propagates."""
    supervisor = Supervisor(config)
    try:
        supervisor.start()
    except BaseException:
        supervisor.stop()
        raise
    return supervisor


def _visible_gpus(count: int) -> tuple[str, ...]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return tuple(visible.split(",")) if visible else tuple(str(i) for i in range(count))


def healthy(url: str) -> bool:
    """GET /health answered 200 (what SGLang answers once the model is loaded)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _terminate(processes: Sequence[subprocess.Popen], grace_s: float = 15.0) -> None:
    """SIGTERM every process group at once, SIGKILL the ones still alive after the grace period."""
    alive = [p for p in processes if p.poll() is None]
    for process in alive:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in alive:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()


def _signal_group(process: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _lora_flags(config: LaunchConfig) -> list[str]:
    if not config.lora_rank:
        return []
    return ["--enable-lora", "--max-lora-rank", str(config.lora_rank), "--lora-target-modules", *config.lora_targets]


def parse_args(argv: Sequence[str]) -> tuple[LaunchConfig, bool]:
    """The launch configuration and whether this is a dry run."""
    p = argparse.ArgumentParser(prog="python -m rollout.launch_sglang", description=(__doc__ or "").split("\n")[0],
                                epilog="Arguments after `--` go to every server unchanged.")
    p.add_argument("--model-path", required=True, help="HF directory of the policy")
    p.add_argument("--tp", type=int, default=8, help="tensor parallel size of each server")
    p.add_argument("--servers", type=int, default=1, help="servers on this node")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000, help="server i listens on PORT + i")
    p.add_argument("--gpus", default="", help="comma-separated device ids to split among the servers")
    p.add_argument("--server-command", default=shlex.join(LaunchConfig.server_command))
    p.add_argument("--startup-timeout-s", type=float, default=LaunchConfig.startup_timeout_s)
    p.add_argument("--max-restarts", type=int, default=LaunchConfig.max_restarts)
    p.add_argument("--restart-backoff-s", type=float, default=LaunchConfig.restart_backoff_s)
    p.add_argument("--poll-s", type=float, default=LaunchConfig.poll_s)
    p.add_argument("--colocated", action="store_true",
                   help="the trainer shares these GPUs: start servers with --enable-memory-saver")
    p.add_argument("--lora-rank", type=int, default=0,
                   help="LoRA GRPO (the trainer's lora.rank): servers load adapters of up to this rank")
    p.add_argument("--lora-target-modules", nargs="+", default=list(LaunchConfig.lora_targets),
                   help="projections the adapters adapt (q_proj ... down_proj; default all)")
    p.add_argument("--dry-run", action="store_true", help="print the server commands and exit")
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args, extra = p.parse_args(argv[:split]), argv[split + 1:]
    if not args.lora_rank and tuple(args.lora_target_modules) != LaunchConfig.lora_targets:
        p.error("--lora-target-modules acts only with --lora-rank > 0")
    config = LaunchConfig(
        model_path=args.model_path, tp=args.tp, servers=args.servers, host=args.host, port=args.port,
        gpus=tuple(g for g in args.gpus.split(",") if g), server_command=tuple(shlex.split(args.server_command)),
        extra_args=tuple(extra), colocated=args.colocated, startup_timeout_s=args.startup_timeout_s,
        max_restarts=args.max_restarts, restart_backoff_s=args.restart_backoff_s, poll_s=args.poll_s,
        lora_rank=args.lora_rank, lora_targets=tuple(args.lora_target_modules))
    return config, args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config, dry_run = parse_args(sys.argv[1:] if argv is None else argv)
    supervisor = Supervisor(config)
    if dry_run:
        for server in supervisor.servers:
            print(f"CUDA_VISIBLE_DEVICES={server.env['CUDA_VISIBLE_DEVICES']} {shlex.join(server.argv)}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the finally below
    try:
        print("SGLANG_URLS=" + ",".join(supervisor.start()), flush=True)
        supervisor.watch()
    except LaunchError as e:
        log.error("%s", e)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        supervisor.stop()


if __name__ == "__main__":
    sys.exit(main())
