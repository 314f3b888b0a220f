"""Only infrastructure failures are system errors (rollout.failures): real episodes of built-in telecom tasks
on SGLangEngine over the stand-in SGLang server (tests/rollout/sglang_stub_support.py), evaluated and scheduled as in
a campaign or a training step. A bug (NotImplementedError, RecursionError, TypeError, KeyError) or a missing
judge stops the run with its own exception and every opened session closed; a connection failure, a timeout
or a dead server voids only the episodes it hit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from envs import Rubric, load_tasks, open_session
from envs.errors import ConfigError
from rollout import evaluate
from rollout.engines.protocol import Engine, SamplingParams
from rollout.engines.sglang import SGLangEngine
from rollout.episode import EpisodeConfig, run_episode
from rollout.evaluation.runner import token_trial_runner
from rollout.groups import GroupConfig, GroupScheduler
from rollout.interpret import Interpreter
from rollout.records import read_records
from tbjax.assets.tokenizer import train_tokenizer
from tests.rollout.sglang_stub_support import StubModel, ThreadServer, free_port

# One agent turn of a few stub tokens, then the scripted user answers and max_turns ends the episode.
EPISODE = EpisodeConfig(max_turns=1, max_tokens_per_turn=8, token_budget=50_000, timeout_s=120)
K = 2


@pytest.fixture(scope="module")
def interpreter():
    return Interpreter(train_tokenizer())


@pytest.fixture(scope="module")
def server_url():
    server = ThreadServer(StubModel())
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(domain="telecom", split="train")[:5]


class Sessions:
    """The default session opener, remembering every session it opened (to check none is left open)."""

    def __init__(self) -> None:
        self.opened = []

    async def __call__(self, task):
        session = await open_session(task)
        self.opened.append(session)
        return session

    @property
    def leaked(self) -> list[str]:
        return [s.task.id for s in self.opened if not s._closed]


class Raising:
    """An Engine whose every call raises `error()` (a backend bug, or a failure its client let through)."""

    def __init__(self, error: Callable[[], Exception]) -> None:
        self.error = error

    async def generate(self, input_ids, sampling: SamplingParams, *, session_id: str | None = None):
        raise self.error()

    async def end_session(self, session_id: str) -> None:
        pass  # bookkeeping of the client's own, which a failing backend cannot break

    async def update_weights(self, hf_dir: str, version: str) -> None:
        raise self.error()

    async def health(self) -> bool:
        return False

    async def close(self) -> None:
        pass


class Routed:
    """An Engine that sends each call to the engine of the first key its session id contains, else to
    `default`: one campaign's tasks meet different failures."""

    def __init__(self, default: Engine, routes: dict[str, Engine]) -> None:
        self.default, self.routes = default, routes

    def _engine(self, session_id: str | None) -> Engine:
        return next((e for key, e in self.routes.items() if session_id and key in session_id), self.default)

    async def generate(self, input_ids, sampling: SamplingParams, *, session_id: str | None = None):
        return await self._engine(session_id).generate(input_ids, sampling, session_id=session_id)

    async def end_session(self, session_id: str) -> None:
        await self._engine(session_id).end_session(session_id)

    async def update_weights(self, hf_dir: str, version: str) -> None:
        await self.default.update_weights(hf_dir, version)

    async def health(self) -> bool:
        return await self.default.health()

    async def close(self) -> None:
        for engine in (self.default, *self.routes.values()):
            await engine.close()


def stub_engine(url: str) -> SGLangEngine:
    return SGLangEngine.from_urls([url], max_attempts=1, backoff_s=0.0)


def campaign(tasks, engine: Engine, interpreter: Interpreter, sessions: Sessions, out: Path) -> dict:
    """`evaluate` K trials of `tasks` (summary.json's content), the engine closed at the end."""
    async def run() -> dict:
        try:
            runner = token_trial_runner(engine, interpreter, model="stub", config=EPISODE, opener=sessions)
            return await evaluate.evaluate(tasks, runner, out=out, k=K, concurrency=4)
        finally:
            await engine.close()

    return asyncio.run(run())


BUGS = {"not implemented": lambda: NotImplementedError("a backend without this feature"),
        "recursion": lambda: RecursionError("maximum recursion depth exceeded"),
        "type": lambda: TypeError("generate() got an unexpected keyword argument"),
        "key": lambda: KeyError("meta_info")}


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_bug_in_an_episode_stops_the_evaluation_with_every_session_closed(bug, tasks, server_url, interpreter,
                                                                           tmp_path):
    sessions = Sessions()
    broken = tasks[1].id
    engine = Routed(stub_engine(server_url), {broken: Raising(BUGS[bug])})
    with pytest.raises(ExceptionGroup) as caught:
        campaign(tasks[:3], engine, interpreter, sessions, tmp_path)
    assert caught.group_contains(type(BUGS[bug]()))
    assert sessions.opened and sessions.leaked == []
    assert all(r.task_id != broken for r in read_records(tmp_path / evaluate.TRIALS_FILE))  # never a record


def connection_refused() -> Exception:
    return httpx.ConnectError("[Errno 111] Connection refused")


def test_connection_failures_and_a_dead_server_are_system_errors(tasks, server_url, interpreter, tmp_path):
    sessions = Sessions()
    failing = {tasks[0].id: Raising(connection_refused), tasks[1].id: Raising(lambda: httpx.ReadTimeout("timed out")),
               tasks[2].id: Raising(lambda: ConnectionResetError(104, "Connection reset by peer")),
               tasks[3].id: stub_engine(f"http://127.0.0.1:{free_port()}")}  # nothing listens: EngineError
    ok = tasks[4]
    summary = campaign(tasks, Routed(stub_engine(server_url), failing), interpreter, sessions, tmp_path)
    records = read_records(tmp_path / evaluate.TRIALS_FILE)
    assert {r.key: r.system_error for r in records if r.task_id != ok.id} == {
        (task_id, trial): "engine" for task_id in failing for trial in range(K)}
    assert all(r.passed is not None and r.system_error is None for r in records if r.task_id == ok.id)
    assert summary["system_errors"] == {"total": K * len(failing), "by_kind": {"engine": K * len(failing)}}
    assert summary["trials"] == K and len(sessions.opened) == K * len(tasks) and sessions.leaked == []


def test_an_llm_rubric_without_a_judge_stops_the_evaluation(tasks, server_url, interpreter, tmp_path):
    judged = tasks[0].model_copy(update={"rubrics": (
        *tasks[0].rubrics, Rubric(kind="llm_yes_no", question="Did the agent confirm the change?"))})
    sessions = Sessions()
    with pytest.raises(ExceptionGroup) as caught:
        campaign([judged, *tasks[1:]], stub_engine(server_url), interpreter, sessions, tmp_path)
    assert caught.group_contains(ConfigError, match="no judge was configured")
    assert sessions.leaked == []


def schedule(tasks, engine: Engine, interpreter: Interpreter, sessions: Sessions):
    """One batch of a training step's GroupScheduler over real episodes (groups of 2, one group wanted)."""
    async def episode(task, group_id: str, member: int):
        result = await run_episode(task, engine, interpreter, group_id=group_id, config=EPISODE, opener=sessions,
                                   session_id=f"{task.id}/{group_id}/{member}")
        return result.trajectory

    async def run():
        try:
            config = GroupConfig(groups=1, group_size=2, max_concurrency=4, max_extra_rounds=0)
            return await GroupScheduler(iter(tasks), episode, config).next_batch()
        finally:
            await engine.close()

    return asyncio.run(run())


def test_a_bug_in_an_episode_stops_the_group_scheduler_with_every_session_closed(tasks, server_url, interpreter):
    sessions = Sessions()
    engine = Routed(stub_engine(server_url), {tasks[0].id: Raising(BUGS["not implemented"])})
    with pytest.raises(NotImplementedError, match="a backend without this feature"):
        schedule(tasks, engine, interpreter, sessions)
    assert sessions.opened and sessions.leaked == []


def test_a_connection_failure_in_an_episode_refills_its_group(tasks, server_url, interpreter):
    sessions = Sessions()
    engine = Routed(stub_engine(server_url), {f"{tasks[0].id}/g0/0": Raising(connection_refused)})
    batch = schedule(tasks, engine, interpreter, sessions)
    counts = batch.counts
    assert (counts.refilled, counts.replaced, dict(counts.system_errors)) == (1, 0, {"engine": 1})
    assert counts.episodes == 4 and counts.scored_episodes == 2 and sessions.leaked == []
