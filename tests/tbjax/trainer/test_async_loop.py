"""Asynchronous GRPO through the real loop (rollout.max_staleness): the tiny run's real episodes on the embedded
engine, made to answer after random delays, while the update runs in a thread beside them and each refresh
swaps the engine's weights between turns. No consumed episode is staler than the bound, each step's histogram
sums to its episodes and agrees with the versions the engine reported, the update never touches a buffer the
engine serves (a deleted one would raise), and colocated placement is refused."""

import asyncio
import json
import random
from collections import Counter

import pytest

from rollout.engines.protocol import Generation
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, signal_tasks

STEPS = 3


def delayed_generations(engine, seed: int) -> dict[str, list[str]]:
    """Makes `engine` answer each request after a random delay (a busy server's), before and after sampling;
    returns the weight versions it answered each session with, as they come."""
    jitter = random.Random(seed)
    versions: dict[str, list[str]] = {}
    generate = engine.generate

    async def slow_generate(input_ids, sampling, *, session_id=None) -> Generation:
        await asyncio.sleep(jitter.uniform(0, 0.3))
        generation = await generate(input_ids, sampling, session_id=session_id)
        versions.setdefault(str(session_id), []).append(generation.weight_version)
        await asyncio.sleep(jitter.uniform(0, 0.3))
        return generation
    engine.generate = slow_generate
    return versions


@pytest.mark.slow
def test_batches_ahead_stay_within_the_bound_while_the_update_runs_beside_them(tiny_dir, tmp_path) -> None:
    """Two batches ahead (max_staleness=2); one ahead runs across 3 processes (test_multiprocess.py)."""
    max_staleness, seed = 2, 1
    model_dir = tiny_dir("qwen3")
    config = config_for(tmp_path, STEPS, f"rollout.max_staleness={max_staleness}", "rollout.deterministic=false")
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    versions = delayed_generations(run.engine, seed)
    asyncio.run(run_steps(run, opener=brief_session))
    records = [json.loads(line) for line in (tmp_path / "resume" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    published = [0] + [r["step"] for r in records if not r["skipped"]]  # a skipped step publishes nothing
    for record in records:
        batch = record["step"] - 1  # consumed by the update from step `batch`'s weights, seeded as that step's
        served = [version for version in published if version <= batch]
        reported = Counter(sum(1 for version in served if version > min(int(v) for v in turns))
                           for session, turns in versions.items() if session.startswith(f"{batch}/"))
        assert record["staleness"] == {str(age): n for age, n in sorted(reported.items())}
        assert sum(record["staleness"].values()) == record["episodes"]
        assert max(int(age) for age in record["staleness"]) <= max_staleness
        assert record["groups_too_stale"] == 0
        if not record["skipped"] and any(int(age) > 0 for age in record["staleness"]):
            assert "mismatch_kl_stale" in record  # the watch measures fresh tokens, the stale ones apart
        assert 0.0 <= record["trainer_idle_fraction"] <= 1.0 and 0.0 <= record["engine_idle_fraction"] <= 1.0
    # the batches did run beside the updates: some episodes were sampled before the version they trained from
    assert any(int(age) > 0 for record in records for age in record["staleness"])


def test_keeping_the_cache_is_refused_where_the_engine_cannot() -> None:
    with pytest.raises(ValueError, match="the embedded engine always forgets its cache at a swap"):
        load_config(overrides=["rollout.swap_prefix_cache=keep"])


def test_colocated_servers_cannot_overlap_the_update() -> None:
    with pytest.raises(ValueError, match="rollout.placement=disaggregated"):
        load_config(overrides=["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]",
                               "rollout.placement=colocated", "rollout.max_staleness=1"])
