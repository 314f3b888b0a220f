"""τ²-bench sessions on τ²'s real environments (its venv named by TBJAX_TAU2_PYTHON; skipped otherwise):
the scripted agent's gold and spoiled trajectories through the real episode loop, graded both ways (a
disagreement raises), and what a fault becomes: a cut episode scores 0 as τ² scores it, a dead worker, a
failing user endpoint or a replay that diverges is a system error, never a 0."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter

import pytest

from envs.tau2 import Tau2Suite, is_heldout_task
from envs.tau2.directed_user import DirectedUser
from envs.tau2.gold import Variant
from envs.tau2.tasks import WORKER
from rollout.episode import EpisodeConfig
from tests.envs.fake_openai_support import Canned, FakeOpenAI
from tests.tau2_support import GOLD_EPISODE, scripted_episode, tau2_config, tau2_python

PER_DOMAIN = 2  # tasks of each domain's test split


@pytest.fixture(scope="module")
def user():
    with DirectedUser() as directed:
        yield directed


def first_tasks(suite: Tau2Suite, per_domain: int):
    return [task for domain in ("retail", "airline", "telecom")
            for task in [t for t in suite.tasks if t.domain == f"tau2/{domain}"][:per_domain]]


def test_scripted_trajectories_agree_with_tau2_and_gold_passes(user, tiny_interpreter) -> None:
    async def scenario():
        suite = Tau2Suite.load(tau2_config(user.base_url), "test")
        try:
            tasks = first_tasks(suite, PER_DOMAIN)
            plays = [(task, variant) for task in tasks for variant in Variant]
            results = await asyncio.gather(*(scripted_episode(suite, task, tiny_interpreter, variant)
                                             for task, variant in plays))
            return suite, plays, results
        finally:
            await suite.aclose()

    suite, plays, results = asyncio.run(scenario())
    assert all(is_heldout_task(task.id) and task.id.startswith("tau2/") for task, _ in plays)
    outcome = Counter()
    for (task, variant), result in zip(plays, results, strict=True):
        trajectory = result.trajectory
        assert trajectory.system_error is None, (task.id, variant, trajectory.system_error)
        assert trajectory.termination == "user_done"  # the directed user stops after the agent's last words
        assert result.verdict is not None and result.verdict.breakdown is not None
        outcome[variant, trajectory.reward] += 1
        if variant == Variant.GOLD:
            assert trajectory.reward == 1.0, (task.id, result.verdict.report())
    assert outcome[Variant.GOLD, 1.0] == len(plays) // len(Variant)
    assert outcome[Variant.NOTHING, 0.0] >= 4 and outcome[Variant.WRONG_ARGUMENT, 0.0] >= 4


def test_a_cut_episode_scores_zero_though_the_state_is_right(user, tiny_interpreter) -> None:
    """The gold actions made, but the turn cap comes before the agent's last words: τ² scores max_steps 0."""
    async def scenario():
        suite = Tau2Suite.load(tau2_config(user.base_url), "test", ("retail",), limit=1)
        try:
            task = suite.tasks[0]
            turns = len(suite.case(task.id).actions)
            cut = EpisodeConfig(**{**GOLD_EPISODE.__dict__, "max_turns": turns})
            return await scripted_episode(suite, task, tiny_interpreter, Variant.GOLD, cut)
        finally:
            await suite.aclose()

    result = asyncio.run(scenario())
    assert result.trajectory.termination == "max_turns"
    assert result.trajectory.reward == 0.0
    assert result.verdict is not None and any(r.kind == "tau2_ending" for r in result.verdict.rubrics)


def test_a_failing_user_endpoint_is_a_system_error(fake_openai: FakeOpenAI, tiny_interpreter) -> None:
    fake_openai.queue(*[Canned(status=503, text="down")] * 4)

    async def scenario():
        suite = Tau2Suite.load(tau2_config(fake_openai.base_url), "test", ("airline",), limit=1)
        try:
            return await scripted_episode(suite, suite.tasks[0], tiny_interpreter)
        finally:
            await suite.aclose()

    result = asyncio.run(scenario())
    assert result.trajectory.reward is None and result.verdict is None
    assert result.trajectory.system_error is not None and "endpoint" in result.trajectory.system_error


def test_a_dead_worker_voids_its_episode_and_the_next_one_gets_a_fresh_worker(user, tiny_interpreter) -> None:
    async def scenario():
        suite = Tau2Suite.load(tau2_config(user.base_url, workers=1), "test", ("retail",), limit=2)
        try:
            session = await suite.open(suite.tasks[0])
            await session.worker.kill()  # the worker dies mid-episode
            with pytest.raises(Exception) as died:
                await session.call_tool("calculate", {"expression": "1 + 1"})
            await session.abort()
            again = await scripted_episode(suite, suite.tasks[1], tiny_interpreter)
            return died.value, again
        finally:
            await suite.aclose()

    error, again = asyncio.run(scenario())
    assert getattr(error, "kind", None) == "tau2_worker"
    assert again.trajectory.reward == 1.0


def test_a_replay_that_diverges_is_a_system_error_not_a_zero(user) -> None:
    """Telecom mints a random bill id when it charges a customer with no draft bill (C1002 has none); a
    trajectory that reads the id back cannot replay to the same tool results."""
    async def scenario():
        suite = Tau2Suite.load(tau2_config(user.base_url, grading="tau2"), "test", ("telecom",), limit=1)
        try:
            session = await suite.open(suite.tasks[0])
            charged = await session.call_tool("refuel_data", {"customer_id": "C1002", "line_id": "L1004",
                                                              "gb_amount": 1.0})
            assert not charged.is_error
            await session.call_tool("get_bills_for_customer", {"customer_id": "C1002"})
            await session.user_reply("Done, goodbye.")
            return await session.close(termination="user_done")
        finally:
            await suite.aclose()

    verdict = asyncio.run(scenario())
    assert verdict.system_error == "tau2_replay" and verdict.reward is None


def test_the_worker_answers_bad_requests_and_goes_on() -> None:
    lines = ['not json', '[1, 2]', json.dumps({"id": 1, "op": "nope"}),
             json.dumps({"id": 2, "op": "say", "session": "s404", "role": "user", "content": "hi"}),
             json.dumps({"id": 3, "op": "open", "domain": "retail", "task_id": "no-such-task"}),
             json.dumps({"id": 4, "op": "open", "domain": "banking", "task_id": "0"}),
             json.dumps({"id": 5, "op": "open", "domain": "retail", "task_id": "0"}),
             json.dumps({"id": 6, "op": "call", "session": "s0", "requestor": "assistant", "name": "no_such_tool",
                         "arguments": {}}),
             json.dumps({"id": 7, "op": "call", "session": "s0", "requestor": "assistant",
                         "name": "get_order_details", "arguments": {"order_id": 12}}),
             json.dumps({"id": 8, "op": "grade", "session": "s0", "termination": "sideways", "how": "fast"}),
             json.dumps({"id": 9, "op": "grade", "session": "s0", "termination": "user_stop", "how": "fast"})]
    done = subprocess.run([tau2_python(), str(WORKER)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=120, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(lines)
    refused = [a for a in answers if not a["ok"]]
    assert {a["kind"] for a in refused} == {"bad_request"} and len(refused) == 7
    assert "no task 'no-such-task'" in answers[4]["error"] and "banking" in answers[5]["error"]
    unknown_tool, wrong_type = answers[7]["result"], answers[8]["result"]
    assert unknown_tool["error"] and wrong_type["error"]  # the agent sees τ²'s error text; nothing crashed
    assert answers[10]["ok"] and answers[10]["result"]["fast"]["reward"] in (0.0, 1.0)


def test_listing_names_the_missing_venv(tmp_path) -> None:
    from envs.errors import ConfigError
    from envs.tau2 import Tau2Config, list_cases

    with pytest.raises(ConfigError, match="tau2.python: .* does not exist"):
        list_cases(Tau2Config(python=str(tmp_path / "nowhere" / "python")), "train")
    tau2_python()  # the rest needs the venv
    cases = list_cases(tau2_config(None), "base")
    splits = Counter((case.domain, case.split) for case in cases)
    assert splits == {("retail", "train"): 74, ("retail", "test"): 40, ("airline", "train"): 30,
                      ("airline", "test"): 20, ("telecom", "train"): 74, ("telecom", "test"): 40}


def test_too_many_tool_errors_score_zero_as_tau2_would_have_ended_there(user) -> None:
    """τ²'s orchestrator ends an episode at its 10th failed tool call; the gold actions after it do not count."""
    async def scenario(failures: int):
        suite = Tau2Suite.load(tau2_config(user.base_url), "test", ("retail",), limit=1)
        try:
            case = suite.case(suite.tasks[0].id)
            session = await suite.open(case.task)
            for _ in range(failures):
                assert (await session.call_tool("no_such_tool", {})).is_error
            for action in case.actions:
                await session.call_tool(action.name, action.arguments)
            await session.user_reply(" ".join(case.communicate_info) or "Done.")
            return await session.close(termination="user_done")
        finally:
            await suite.aclose()

    assert asyncio.run(scenario(9)).passed
    verdict = asyncio.run(scenario(10))
    assert not verdict.passed and any("too_many_errors" in r.detail for r in verdict.rubrics)
