"""End to end on CPU: the tiny policy on the JaxEngine, in process and through `tbjax.serve` over HTTP with
the SGLang client, runs G=4 episodes per task against telecom with the scripted user; published weights show
in later episodes; a server killed mid-batch gets its groups refilled, never scored 0."""

import asyncio
import os
import signal
import sys
import threading

import portpicker
import pytest

from rollout.engines.sglang import SGLangEngine
from rollout.episode import run_episode
from rollout.groups import GroupConfig, GroupScheduler
from rollout.interpret import Interpreter
from rollout.launch_sglang import LaunchConfig, Supervisor
from tbjax.engine.jax_engine import JaxEngine
from tbjax.models import from_pretrained
from tbjax.models.hf.versions import publish_weights
from tests.rollout.e2e_support import EPISODE, check_trajectory, telecom_tasks

G = 4


@pytest.fixture(scope="module")
def policy_dir(tiny_dir):
    return tiny_dir("qwen3")


@pytest.fixture(scope="module")
def model(policy_dir):
    return from_pretrained(policy_dir)


@pytest.fixture(scope="module")
def interpreter(policy_dir):
    return Interpreter.from_pretrained(policy_dir)


async def run_groups(engine, interpreter, tasks):
    episodes = [run_episode(task, engine, interpreter, group_id=f"g{i}", config=EPISODE,
                            session_id=f"g{i}/{member}")
                for i, task in enumerate(tasks) for member in range(G)]
    return await asyncio.gather(*episodes)


def test_in_process_engine_runs_groups_of_episodes(model, interpreter):
    async def scenario():
        engine = JaxEngine(model, slots=8, max_len=4096)
        results = await run_groups(engine, interpreter, telecom_tasks(3))
        await engine.close()
        return results

    results = asyncio.run(scenario())
    assert len(results) == 3 * G
    for result in results:
        check_trajectory(result.trajectory, model, interpreter)
        assert result.verdict is not None and result.verdict.task_id == result.trajectory.task_id
        assert result.trajectory.weight_versions == ["0"] * result.trajectory.turns


def start_servers(policy_dir, port: int, servers: int = 1) -> Supervisor:
    config = LaunchConfig(model_path=str(policy_dir), tp=1, servers=servers, port=port,
                          server_command=(sys.executable, "-m", "tbjax.serve"),
                          extra_args=("--slots", "8", "--max-len", "4096"),
                          startup_timeout_s=120, restart_backoff_s=0.5, poll_s=0.25)
    supervisor = Supervisor(config)
    supervisor.start()
    return supervisor


def test_http_server_episodes_and_a_publish(policy_dir, model, interpreter, tmp_path):
    supervisor = start_servers(policy_dir, portpicker.pick_unused_port())
    trained = from_pretrained(policy_dir)
    trained.lm_head[...] = trained.lm_head[...] * 1.25  # stands in for an updated policy
    try:
        async def scenario():
            engine = SGLangEngine.from_urls(supervisor.urls)
            before = await run_groups(engine, interpreter, telecom_tasks(2))
            await engine.update_weights(str(publish_weights(trained, tmp_path, 1)), "1")
            after = await run_groups(engine, interpreter, telecom_tasks(1))
            await engine.close()
            return before, after

        before, after = asyncio.run(scenario())
    finally:
        supervisor.stop()
    for result in before:
        check_trajectory(result.trajectory, model, interpreter)
    for result in after:
        assert set(result.trajectory.weight_versions) == {"1"}
        check_trajectory(result.trajectory, trained, interpreter)  # log-probs of the published weights


def supervise(supervisor: Supervisor, stop: threading.Event) -> None:
    """What `python -m rollout.launch_sglang` does in its main loop: restart servers that die."""
    while not stop.wait(0.25):
        supervisor.check()


def test_server_killed_mid_batch_refills_groups(policy_dir, interpreter):
    supervisor = start_servers(policy_dir, portpicker.pick_unused_port())
    stop = threading.Event()
    watcher = threading.Thread(target=supervise, args=(supervisor, stop))
    watcher.start()
    try:
        async def scenario():
            engine = SGLangEngine.from_urls(supervisor.urls, max_attempts=1)  # a dead server fails fast
            turns = 0

            async def episode(task, group_id, member):
                nonlocal turns
                result = await run_episode(task, engine, interpreter, group_id=group_id, config=EPISODE,
                                           session_id=f"{group_id}/{member}")
                turns += 1
                if turns == 2:  # kill the server while the rest of the batch is in flight
                    os.kill(supervisor.servers[0].process.pid, signal.SIGKILL)
                return result.trajectory

            scheduler = GroupScheduler(iter(telecom_tasks(6)), episode, GroupConfig(
                groups=2, group_size=G, max_concurrency=4, system_error_retries=3, max_extra_rounds=0,
                refill_delay_s=4.0))
            batch = await scheduler.next_batch()
            await engine.close()
            return batch

        batch = asyncio.run(scenario())
    finally:
        stop.set()
        watcher.join()
        supervisor.stop()
    counts = batch.counts
    assert counts.refilled >= 1 and sum(counts.system_errors.values()) >= 1
    assert supervisor.servers[0].restarts == 1
    scored = [t for group in batch.groups for t in group.trajectories]
    assert all(t.system_error is None and t.reward is not None for t in scored)
    assert counts.informative + counts.dropped_all_equal + counts.replaced == counts.tasks_drawn
