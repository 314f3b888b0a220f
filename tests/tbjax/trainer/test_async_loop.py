"""Asynchronous GRPO through the real loop (rollout.max_staleness): the tiny run's real episodes on the embedded
engine, made to answer after random delays, while the update runs in a thread beside them.

Eager mode, each publish swapping the engine's weights between turns: no consumed episode is staler than the
bound, each step's histogram sums to its episodes and agrees with the versions the engine reported, the
update never touches a buffer the engine serves (a deleted one would raise), the re-prefilled tokens are
counted, and a resumed run samples again the batch in flight at its checkpoint, counted. Exact mode: a run
under random delays and a resumed run without them agree bit for bit. Colocated placement is refused."""

import asyncio
import json
import random
import shutil
from collections import Counter

import jax
import numpy as np
import pytest

from rollout.engines.protocol import Generation
from tbjax.config import load_config
from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tests.tbjax.trainer.loop_support import brief_session, config_for, metric_lines, signal_tasks, train_for

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
    """Two batches ahead (max_staleness=2), eager; then a resume from step 2 (exact mode with one batch ahead runs
    across 3 processes: test_multiprocess.py)."""
    max_staleness, seed = 2, 1
    model_dir = tiny_dir("qwen3")
    config = config_for(tmp_path, STEPS, f"rollout.max_staleness={max_staleness}", "rollout.async_mode=eager",
                        "rollout.deterministic=false", "episode.max_turns=2")
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
    assert all(record["groups_replayed"] == 0 for record in records)
    swapped = [turns for turns in versions.values() if len(set(turns)) > 1]  # a publish between two turns
    assert (sum(record["tokens_reprefilled"] for record in records) > 0) == bool(swapped)
    # killed between the checkpoints of steps 2 and 3, with batch 2 in flight at step 2's: the resumed run
    # samples it again from the draws it started at, and its record says so
    checkpoints = tmp_path / "resume" / "checkpoints"
    saved = json.loads((checkpoints / "2" / "record" / "metadata").read_text())
    assert list(saved["in_flight"]) == ["2"] and saved["in_flight"]["2"] == saved["draws"]
    shutil.rmtree(checkpoints / "3")
    resumed = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    asyncio.run(run_steps(resumed, opener=brief_session))
    last = metric_lines(tmp_path)[-1]
    assert last["step"] == 3 and last["groups_replayed"] == len(last["groups"]) > 0


@pytest.mark.slow
def test_exact_mode_repeats_itself_and_resumes_bit_for_bit(tiny_dir, tmp_path) -> None:
    """One batch ahead, a checkpoint every 2 steps: batches 1 and 3 are sampled under the weights of steps 0
    and 2 (stale by one), batches 0 and 2 after the drain. A run under random delays and one without them,
    killed after step 2 and resumed, agree bit for bit."""
    model_dir = tiny_dir("qwen3")
    overrides = ("rollout.max_staleness=1", "train.checkpoint_every=2", "episode.max_turns=2")
    config = config_for(tmp_path / "a", 4, *overrides)
    straight = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    delayed_generations(straight.engine, seed=1)
    asyncio.run(run_steps(straight, opener=brief_session))
    train_for(model_dir, tmp_path / "c", 2, *overrides)  # undelayed, "killed" after step 2 ...
    resumed = train_for(model_dir, tmp_path / "c", 4, *overrides)  # ... and started again
    lines = metric_lines(tmp_path / "a")
    assert [line["staleness"].keys() for line in lines] == [{"0"}, {"1"}, {"0"}, {"1"}]
    assert any(not line["skipped"] for line in lines)
    assert metric_lines(tmp_path / "c") == lines
    for a, b in zip(jax.tree.leaves(straight.state.params), jax.tree.leaves(resumed.state.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_keeping_the_cache_is_refused_where_the_engine_cannot() -> None:
    with pytest.raises(ValueError, match="the embedded engine keeps no prefix cache across a swap"):
        load_config(overrides=["rollout.swap_prefix_cache=keep"])


def test_colocated_servers_cannot_overlap_the_update() -> None:
    with pytest.raises(ValueError, match="rollout.placement=disaggregated"):
        load_config(overrides=["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]",
                               "rollout.placement=colocated", "rollout.max_staleness=1"])


def test_an_async_mode_without_batches_ahead_is_refused() -> None:
    with pytest.raises(ValueError, match="rollout.max_staleness=0 produces none"):
        load_config(overrides=["rollout.async_mode=eager"])


def test_exact_mode_needs_the_servers_versions_kept_until_they_land() -> None:
    servers = ["rollout.engine=sglang", "rollout.sglang_urls=[http://127.0.0.1:1]", "rollout.max_staleness=2"]
    with pytest.raises(ValueError, match="set rollout.publish_keep >= 3"):
        load_config(overrides=servers)
    assert load_config(overrides=[*servers, "rollout.publish_keep=3"]).rollout.publish_keep == 3


def test_where_exact_mode_drains_is_part_of_what_a_run_computes() -> None:
    """A resume refuses a changed checkpoint interval in exact mode (it moves the drains), not otherwise."""
    def fingerprints(*overrides: str) -> set[str]:
        return {load_config(overrides=[*overrides, f"train.checkpoint_every={n}"]).fingerprint() for n in (2, 3)}
    assert len(fingerprints("rollout.max_staleness=1")) == 2
    assert len(fingerprints("rollout.max_staleness=1", "rollout.async_mode=eager")) == 1
    assert len(fingerprints()) == 1
