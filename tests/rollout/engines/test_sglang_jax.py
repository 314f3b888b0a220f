"""SGLangEngine against real SGLang servers: sglang-jax, SGLang's JAX port and the one SGLang that serves on a
CPU, run from its own Python 3.12 venv (scripts/sglang_jax_venv.py, built on first use and cached outside
the repository; the module skips, saying why, where it cannot be built). Two servers on 127.0.0.1 serve our
tiny Qwen3 (head_dim 128, which sglang-jax's attention needs), exported by `tbjax.export` with a
transformers-4 config.json; one JaxEngine serves the same weights in process as the reference for the whole
module (its compiled programs are reused), in its deterministic mode so that the reference does not depend
on what else it batched. How the two are compared, and why the tolerances: sglang_jax_support.py.

The tests run in file order and the last two change the servers: new weights by restart, then kills.
"""

import asyncio
import functools
import os
import signal
import time

import numpy as np
import pytest

from envs import open_session
from envs.users.base import UserTurn
from rollout.engines.protocol import EngineError, Generation, SamplingParams
from rollout.episode import EpisodeConfig, run_episode
from rollout.interpret import Interpreter
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import from_pretrained
from tbjax.models.hf.versions import publish_weights
from tests.rollout.e2e_support import check_trajectory, telecom_tasks
from tests.rollout.engines.sglang_jax_support import Recording, assert_greedy_agree, export_for_sglang_jax, launch
from tests.rollout.sglang_stub_support import on_engine

pytestmark = pytest.mark.slow
GREEDY = EpisodeConfig(max_turns=3, max_tokens_per_turn=32, token_budget=480, timeout_s=300, temperature=0.0)
TASKS = 4  # one greedy episode per task: greedy episodes of one task are identical
MAX_LEN = 512  # the reference engine's cache rows: fewer shapes to compile than the model's 2048


class InsistingUser:
    """Answers every agent turn the same way and never stops, so that each episode runs GREEDY.max_turns turns
    of growing prefixes (the scripted user stops at the random policy's first statement)."""

    def __init__(self, scenario) -> None:
        self.scenario = scenario

    def opening(self) -> str:
        return self.scenario.opening

    async def reply(self, agent_text: str) -> UserTurn:
        return UserTurn("That did not work, please check my account again.", done=False)


# The compact prompt (~100 tokens) keeps the episodes within the reference's MAX_LEN.
OPENER = functools.partial(open_session, prompt="compact", user=InsistingUser)


@pytest.fixture(scope="module")
def sglang_jax_python():
    from sglang_jax_venv import VenvUnavailable, ensure_venv

    try:
        return ensure_venv(say=print)
    except VenvUnavailable as error:
        pytest.skip(f"sglang-jax cannot be installed here: {error}")


@pytest.fixture(scope="module")
def model_dir(tiny_dir, tmp_path_factory):
    return export_for_sglang_jax(tiny_dir("qwen3-hd128"), tmp_path_factory.mktemp("sglang-jax") / "v0")


@pytest.fixture(scope="module")
def servers(sglang_jax_python, model_dir):
    start = time.perf_counter()
    supervisor = launch(sglang_jax_python, model_dir, servers=2)
    print(f"\ntwo sglang-jax servers healthy in {time.perf_counter() - start:.1f} s")
    yield supervisor
    supervisor.stop()


@pytest.fixture(scope="module")
def interpreter(model_dir):
    return Interpreter.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def reference(model_dir):
    """The JaxEngine the servers are compared with; it follows the weights published to the servers."""
    engine = JaxEngine(from_pretrained(model_dir), slots=4, max_len=MAX_LEN, deterministic=True)
    yield engine
    asyncio.run(engine.close())


def on_jax_engine(engine, scenario):
    """Runs `scenario(engine)` on the reference JaxEngine."""
    async def main():
        return await scenario(engine)
    return asyncio.run(main())


def episodes(interpreter, tasks):
    """A scenario: one greedy episode per task, all at once, each its own session."""
    async def scenario(engine):
        return await asyncio.gather(*(
            run_episode(task, engine, interpreter, group_id=task.id, config=GREEDY, opener=OPENER,
                        session_id=f"{task.id}/0") for task in tasks))
    return scenario


def generations_agree(model, prompt, ours: Generation, theirs: Generation) -> bool:
    padding = [0.0] * len(prompt)
    agree = assert_greedy_agree(model, [*prompt, *ours.output_ids], [*prompt, *theirs.output_ids],
                                padding + list(ours.logprobs), padding + list(theirs.logprobs))
    assert not agree or ours.finish_reason == theirs.finish_reason
    return agree


def test_greedy_episodes_equal_the_jax_engine_over_two_servers(servers, reference, model_dir, interpreter):
    tasks = telecom_tasks(TASKS)
    expected = on_jax_engine(reference, episodes(interpreter, tasks))

    async def recorded(engine):
        recording = Recording(engine)
        start = time.perf_counter()
        results = await episodes(interpreter, tasks)(recording)
        seconds = time.perf_counter() - start
        return results, recording.calls, seconds, [s.assigned for s in engine.pool.servers]
    results, calls, seconds, assigned = on_engine(servers.urls, recorded)
    print(f"\n{TASKS} greedy episodes ({len(calls)} requests) on two sglang-jax servers: {seconds:.1f} s")

    model = from_pretrained(model_dir)
    for ours, theirs in zip(expected, results, strict=True):
        a, b = ours.trajectory, theirs.trajectory
        assert b.system_error is None and b.turns == GREEDY.max_turns
        check_trajectory(b, model, interpreter)  # the trainer recomputes sglang-jax's behaviour log-probs
        if assert_greedy_agree(model, a.token_ids, b.token_ids, a.logprobs, b.logprobs):
            assert (a.loss_mask, a.termination, theirs.verdict.passed) == (
                b.loss_mask, b.termination, ours.verdict.passed)
    assert assigned == [len(calls) // 2] * 2  # episodes spread evenly over both servers
    for session in {s for s, _ in calls}:
        turns = [g for s, g in calls if s == session]
        for before, after in zip(turns, turns[1:], strict=False):  # the same server, whose cache holds the turn
            assert after.cached_tokens >= before.prompt_tokens + len(before.output_ids) - 1


def test_stop_tokens_and_finish_reasons_agree(servers, reference, model_dir):
    prompts = [[11, 12, 13, 14, 15], list(range(200, 460)), [7, 7, 7]]

    async def continuations(engine, stops=None):
        out = []
        for i, prompt in enumerate(prompts):
            stop = () if stops is None else (stops[i],)
            out.append(await engine.generate(prompt, SamplingParams(max_new_tokens=12, temperature=0.0,
                                                                    stop_token_ids=stop)))
        return out
    free = on_jax_engine(reference, continuations)
    stops = [g.output_ids[5] for g in free]  # a token each prompt's greedy continuation reaches
    ours = on_jax_engine(reference, lambda e: continuations(e, stops))

    async def timed(engine):
        start = time.perf_counter()
        result = await continuations(engine, stops), await continuations(engine)
        return result, (time.perf_counter() - start) / (2 * len(prompts)), engine.missing_logprobs
    (theirs, theirs_free), per_request, missing = on_engine(servers.urls[:1], timed)
    print(f"\nsglang-jax, one request of <= 12 tokens at a time: {per_request:.3f} s per request")

    model = from_pretrained(model_dir)
    for prompt, a, b, stop in zip(prompts, ours, theirs, stops, strict=True):
        if generations_agree(model, prompt, a, b):
            assert b.finish_reason == "stop" and b.output_ids[-1] == stop  # trimmed by sglang-jax, put back by us
    for prompt, a, b in zip(prompts, free, theirs_free, strict=True):
        assert b.finish_reason == "length" and len(b.output_ids) == 12
        generations_agree(model, prompt, a, b)
    assert missing == 0  # sglang-jax sends the stop token's log-prob even when it trims the token


def test_a_publish_restarts_sglang_jax_on_the_new_weights(servers, reference, model_dir, tmp_path):
    trained = from_pretrained(model_dir)
    trained.lm_head[...] = trained.lm_head[...] * 1.25  # stands in for an updated policy
    v1 = str(publish_weights(trained, tmp_path, 1, transformers4_config=True))
    prompt, sampling = [5, 6, 7], SamplingParams(max_new_tokens=8, temperature=0.0)

    with pytest.raises(EngineError, match="no /update_weights_from_disk"):
        on_engine(servers.urls, lambda e: e.update_weights(v1, "1"))

    async def publish(engine):
        start = time.perf_counter()
        await engine.update_weights(v1, "1")
        seconds = time.perf_counter() - start
        return seconds, engine.publish_by_restart, await engine.generate(prompt, sampling, session_id="a")
    seconds, by_restart, theirs = on_engine(servers.urls, publish, restart_servers=servers.restart_on)
    print(f"\npublish by restarting two sglang-jax servers: {seconds:.1f} s")
    before = on_jax_engine(reference, lambda e: e.generate(prompt, sampling))
    on_jax_engine(reference, lambda e: e.update_weights(v1, "1"))
    ours = on_jax_engine(reference, lambda e: e.generate(prompt, sampling))

    assert by_restart and theirs.weight_version == "1" and servers.config.model_path == v1
    generations_agree(trained, prompt, ours, theirs)
    assert not np.allclose(before.logprobs, theirs.logprobs, atol=1e-3)  # the old weights are gone


def test_killed_server_fails_over_then_all_dead_is_a_system_error(servers, reference, interpreter):
    sampling = SamplingParams(max_new_tokens=200, temperature=0.0)  # long enough to be in flight at the kill
    prompts = [[20 + k, 21, 22] for k in range(4)]
    survivors = on_jax_engine(reference, lambda e: asyncio.gather(
        *(e.generate(p, sampling) for p in prompts)))

    async def batch(engine):
        requests = [asyncio.create_task(engine.generate(p, sampling, session_id=f"s{k}"))
                    for k, p in enumerate(prompts)]
        await asyncio.sleep(0.3)
        os.killpg(servers.servers[0].process.pid, signal.SIGKILL)
        generations = await asyncio.gather(*requests)
        os.killpg(servers.servers[1].process.pid, signal.SIGKILL)
        dead = await run_episode(telecom_tasks(1)[0], engine, interpreter, group_id="g", config=GREEDY,
                                 opener=OPENER, session_id="g/0")
        return generations, engine.pool.servers, dead
    generations, (victim, survivor), dead = on_engine(servers.urls, batch, max_attempts=3, backoff_s=0.2,
                                                          cooldown_s=60)

    model = from_pretrained(servers.config.model_path)
    for prompt, ours, theirs in zip(prompts, survivors, generations, strict=True):
        generations_agree(model, prompt, ours, theirs)  # the moved requests were decoded again, identically
    assert victim.failures >= 1 and survivor.assigned > len(prompts) // 2  # the victim's requests moved over
    trajectory = dead.trajectory
    assert dead.verdict is None and trajectory.reward is None and trajectory.termination == "system_error"
    assert trajectory.system_error == "engine"  # infrastructure, never scored as the agent failing
