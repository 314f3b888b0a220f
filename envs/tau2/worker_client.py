"""The trainer's side of the τ²-bench worker (envs/tau2/worker.py): worker processes in τ²'s venv, spoken to
over stdio JSON lines, and the pool that spreads episodes over them.

A worker answers one request at a time, so each has a lock; several workers let episodes grade (τ²'s replay
takes about a second) while others call tools. A worker that dies, hangs past `call_timeout_s` or answers out
of protocol is an infrastructure fault (`Tau2WorkerError`, never the agent's failure): it is killed, its
episodes become system errors, and the next episode opened on its slot starts a fresh one. A request the
worker refuses (an unknown task, a malformed request) or a bug inside it (`internal`, with its traceback) is
ours to fix: `Tau2RequestError` stops the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import tempfile
from typing import IO, Any

from envs.errors import EnvSystemError
from envs.tau2.config import Tau2Config
from envs.tau2.tasks import WORKER

STREAM_LIMIT = 64 * 1024 * 1024  # one answer line may hold a whole domain's task listing


class Tau2WorkerError(EnvSystemError):
    """The τ² worker died, hung or broke protocol: the episode is voided, not scored."""

    kind = "tau2_worker"


class Tau2RequestError(RuntimeError):
    """The worker refused a request or failed inside: a bug or a wrong setting, never infrastructure."""


class WorkerProcess:
    """One worker process; `request` sends one op and returns its result."""

    def __init__(self, config: Tau2Config, label: str) -> None:
        self.config, self.label = config, label
        self.sessions = 0  # open sessions served here (the pool opens new ones on the least busy worker)
        self._process: asyncio.subprocess.Process | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # its warnings, quoted when it fails; never a pipe left unread
        try:
            self._process = await asyncio.create_subprocess_exec(
                self.config.interpreter, str(WORKER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=self._stderr, limit=STREAM_LIMIT)
        except OSError as error:
            raise Tau2WorkerError(f"{self.label}: cannot start {self.config.python}: {error}") from error
        await self.request("hello", timeout_s=self.config.start_timeout_s)

    async def request(self, op: str, timeout_s: float | None = None, **fields: Any) -> Any:
        async with self._lock:
            process = self._process
            if process is None or process.returncode is not None or process.stdin is None or process.stdout is None:
                raise Tau2WorkerError(f"{self.label} is not running{self._last_words()}")
            request_id = next(self._ids)
            line = json.dumps({"id": request_id, "op": op, **fields}) + "\n"
            try:
                process.stdin.write(line.encode())
                await process.stdin.drain()
                raw = await asyncio.wait_for(process.stdout.readline(), timeout_s or self.config.call_timeout_s)
            except TimeoutError:
                await self.kill()
                raise Tau2WorkerError(f"{self.label} did not answer {op} within "
                                      f"{timeout_s or self.config.call_timeout_s:.0f} s; killed it") from None
            except (ConnectionError, ValueError) as error:  # a broken pipe, or a line over the stream limit
                await self.kill()
                raise Tau2WorkerError(f"{self.label} broke off during {op}: {error!r}{self._last_words()}") from error
            if not raw:
                await self.kill()
                raise Tau2WorkerError(f"{self.label} exited during {op}{self._last_words()}")
        try:
            answer = json.loads(raw)
        except json.JSONDecodeError:
            await self.kill()
            raise Tau2WorkerError(f"{self.label} answered {op} out of protocol: {raw[:300]!r}") from None
        if answer.get("id") != request_id:
            await self.kill()
            raise Tau2WorkerError(f"{self.label} answered request {answer.get('id')} to request {request_id}")
        if not answer.get("ok"):
            raise Tau2RequestError(f"{self.label} refused {op} ({answer.get('kind')}): {answer.get('error')}")
        return answer.get("result")

    def _last_words(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        tail = self._stderr.read()[-1500:].decode(errors="replace").strip()
        return f"; its last words: {tail}" if tail else ""

    async def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()

    async def close(self) -> None:
        """Ends the worker: its stdin closed, it exits; killed if it does not within a few seconds."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


class WorkerPool:
    """`config.workers` slots, each started on first use and restarted when its worker has died. Bound to the
    event loop it first ran in (asyncio subprocesses are)."""

    def __init__(self, config: Tau2Config) -> None:
        self.config = config
        self._slots: list[WorkerProcess | None] = [None] * config.workers
        self._starting = asyncio.Lock()
        self._generation = itertools.count()

    async def worker(self) -> WorkerProcess:
        """The least busy live worker; a dead or unstarted slot gets a fresh process first."""
        async with self._starting:
            for index, slot in enumerate(self._slots):
                if slot is None or not slot.alive:
                    if slot is not None:
                        await slot.close()
                    fresh = WorkerProcess(self.config, f"tau2 worker {index}.{next(self._generation)}")
                    self._slots[index] = fresh
                    try:
                        await fresh.start()
                    except BaseException:
                        await fresh.close()
                        self._slots[index] = None
                        raise
                    return fresh
            live = [slot for slot in self._slots if slot is not None]
            return min(live, key=lambda worker: worker.sessions)

    async def close(self) -> None:
        for slot in self._slots:
            if slot is not None:
                with contextlib.suppress(Exception):
                    await slot.close()
        self._slots = [None] * len(self._slots)
