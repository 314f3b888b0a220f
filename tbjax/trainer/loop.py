"""The GRPO loop, one step after another: draw tasks -> run groups of episodes on the engine -> pack the scored
groups (trainer.packing, with the objective's advantages) -> the update on the mesh -> checkpoint -> publish
the new weights to the engine -> log. A run is set up, or resumed from its directory, by trainer.run_setup;
this module reads top-down: the run, its steps, each step's phases, the publishing.

With rollout.max_staleness = 0 (the default) the steps are synchronous: the engines wait for the update and
the update for the step's slowest episode. With k > 0 a producer on the driver (rollout.batch_producer) runs
the next batches' episodes while the update runs, in a thread so that the event loop keeps serving them, and
no episode trained on is more than k versions stale. Each publish is served between batches, every batch
sampled under one version (rollout.async_mode=exact: repeatable bit for bit, resumes included), or at once,
between the running episodes' turns (eager). The embedded engine then serves a copy of the parameters, which
the update's donated buffers never are.

Only process 0 drives rollouts and writes the logs; the other processes receive each step's packed batch
from it (trainer.batch_broadcast) and train, checkpoint and publish in lockstep. Whatever serves the episodes
is the run's backend (trainer.backends), which publishing and verifying weights go through
(trainer.publishing); nothing here knows which one it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from envs import Task
from rollout.batch_producer import BatchProducer, ConsumedBatch, Publication
from rollout.engines.protocol import Engine
from rollout.episode import SessionOpener, derive_seed, run_episode
from rollout.groups import Batch, GroupScheduler
from rollout.score_rule import cut_short
from rollout.trajectory import Trajectory
from tbjax.config import Config
from tbjax.models import Qwen
from tbjax.models.hf.versions import publish_weights, version_dir
from tbjax.models.lora import merge_adapters
from tbjax.parallel.distributed import is_driver
from tbjax.trainer.batch_broadcast import share_batch
from tbjax.trainer.checkpoint import Checkpointer, CheckpointWriteError
from tbjax.trainer.metrics_log import console
from tbjax.trainer.packing import PackedBatch, batch_from_groups
from tbjax.trainer.produced_ahead import drains, overlap_record, pinned_step
from tbjax.trainer.publishing import publish, publish_later, verify
from tbjax.trainer.run_setup import VALIDATED, Run, build_run
from tbjax.trainer.suite_setup import configured_opener
from tbjax.trainer.task_stream import ByKindStream, task_manifest_hash

T = TypeVar("T")
SAVE_WATCH_S = 1.0  # how often a step looks at the save it overlaps
VALIDATION_BEST = "validation_best_step"  # the metric naming the best-validated step so far

log = logging.getLogger(__name__)


def run_training(config: Config, model: Qwen, model_dir: Path, tasks: list[Task] | None = None,
                 validation_tasks: list[Task] | None = None, heldout_tasks: list[Task] | None = None) -> Path:
    """A run set up (or resumed) by tbjax.trainer.run_setup, trained to its last step; its final HF export."""
    return asyncio.run(run_steps(build_run(config, model, model_dir, tasks, validation_tasks, heldout_tasks)))


async def run_steps(run: Run, opener: SessionOpener | None = None) -> Path:
    """Runs the remaining steps; returns the final HF export. `opener` opens each episode's environment
    session (default: the configured suite's, tbjax.trainer.suite_setup, on the driver, which alone runs
    episodes; a τ² suite's workers end with the run)."""
    async with contextlib.AsyncExitStack() as stack:
        if opener is None and is_driver():
            opener = await stack.enter_async_context(configured_opener(run.config))
        return await _steps_then_export(run, opener)


async def _steps_then_export(run: Run, opener: SessionOpener | None) -> Path:
    """The steps, validations and final export; `opener` is None on the processes other than the driver."""
    config = run.config
    scheduler = producer = None
    if is_driver():
        if run.engine is None:
            raise RuntimeError("the driver process has no rollout engine: build the run with "
                               "tbjax.trainer.run_setup.build_run")
        assert opener is not None, "run_steps gives the driver its opener"
        batch_step = BatchStep(run)
        scheduler = GroupScheduler(_task_stream(run), _episode_runner(run, run.engine, opener, batch_step),
                                   config.groups, first_draw=run.draws, replacement=_replacement(run),
                                   score_rule=config.grpo.score_rule(config.episode.token_budget))
        if config.rollout.max_staleness:
            producer = _producer(run, scheduler, batch_step)
    if run.step and run.backend.starts_from_base:  # a resumed run's engine serves the base checkpoint
        await publish(run, str(run.step))
        await verify(run)
    run.handover.start(run)
    best = await _scorings(run, opener)  # the start (step 0), or a resumed step's scoring cut short
    try:
        while run.step < config.train.steps:
            try:
                metrics = await _unless_a_save_fails(run.checkpointer, run_step(run, scheduler, producer))
            except CheckpointWriteError:  # an engine worker would hand the cancelled step tokens to a closed loop
                await run.backend.close()
                raise
            scored = await _scorings(run, opener)
            best = scored if VALIDATION_BEST in scored else best
            if run.metrics is not None and metrics is not None and "log" in run.periodic.due(run.step):
                run.metrics.write({**metrics, **scored})
    finally:
        if producer is not None:  # a failed step leaves batches produced ahead running
            await producer.close()
    run.checkpointer.wait()
    await run.handover.to_trainer(run)  # the export reads the state on the devices
    last = publish_weights(_policy(run), run.directory / "export", run.step, tokenizer_dir=run.model_dir)
    export = last
    if best and config.validation.export == "best":
        export = version_dir(run.directory / VALIDATED, best[VALIDATION_BEST])
    run.checkpointer.close()
    await run.backend.close()
    if run.metrics is not None:  # the driver's
        run.metrics.close()
        (run.directory / "config.yaml").write_text(config.to_yaml())
        chosen = {"last_export": str(last), "best_step": best[VALIDATION_BEST],
                  "validation": run.validation.scores()} if best and run.validation is not None else {}
        (run.directory / "summary.json").write_text(json.dumps({"steps": run.step, "export": str(export), **chosen},
                                                               indent=2))
    return export


class BatchStep:
    """The step whose batch the scheduler is filling: the run's own step, synchronously; with a producer, the
    batch it is producing (one at a time): what names and seeds its episodes, as the synchronous loop would."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.producing: int | None = None

    @property
    def step(self) -> int:
        return self.run.step if self.producing is None else self.producing


def _episode_runner(run: Run, engine: Engine, opener: SessionOpener,
                    batch_step: BatchStep) -> Callable[[Task, str, int], Awaitable[Trajectory]]:
    """The scheduler's episodes: on the driver's engine, each seeded by the run's seed, the batch's step, the
    group and the member."""
    config = run.config

    async def episode(task: Task, group_id: str, member: int) -> Trajectory:
        step = batch_step.step
        result = await run_episode(task, engine, run.interpreter, group_id=group_id, config=config.episode,
                                   opener=opener, session_id=f"{step}/{group_id}/{member}",
                                   seed=derive_seed(config.rollout.seed, step, group_id, member))
        return result.trajectory

    return episode


def _producer(run: Run, scheduler: GroupScheduler[Task], batch_step: BatchStep) -> BatchProducer[Task]:
    """Batches from the run's step to its last, produced ahead within rollout.max_staleness; in exact mode each
    pinned to the weights `pinned_step` names."""
    async def produce(index: int) -> Batch[Task]:
        batch_step.producing = index
        return await scheduler.next_batch()
    exact = run.config.rollout.async_mode == "exact"
    return BatchProducer(produce, lambda: scheduler.draws, max_staleness=run.config.rollout.max_staleness,
                         first=run.step, last=run.config.train.steps - 1, served=run.step,
                         pinned=functools.partial(pinned_step, run, run.step) if exact else None,
                         replaying=run.in_flight_at_resume)


def _task_stream(run: Run) -> Iterator[Task]:
    for index in run.iterator:
        yield run.tasks[int(index)]


def _replacement(run: Run) -> Callable[[Task], Task] | None:
    """By kind, a dropped group's task is replaced by the next of its kind (tbjax.trainer.task_stream)."""
    stream = run.iterator
    if not isinstance(stream, ByKindStream):
        return None
    return lambda task: run.tasks[stream.like(task.kind)]


async def run_step(run: Run, scheduler: GroupScheduler | None,
                   producer: BatchProducer[Task] | None = None) -> dict[str, Any] | None:
    """One step: rollout -> update -> save -> publish. The driver (which holds the scheduler, and the producer
    when batches are produced ahead) returns the step's record, the other processes None."""
    clock = StepClock()
    engines_busy = producer.busy_seconds() if producer is not None else 0.0
    consumed = None
    with clock.phase("rollout"):
        if producer is not None:
            consumed = await producer.take(run.step)
            batch = consumed.batch
        else:
            batch = await scheduler.next_batch() if scheduler is not None else None
    packed = _packed(run, batch, scheduler, consumed)
    with clock.phase("update"):
        update = await _update(run, packed, beside_rollouts=run.config.rollout.max_staleness > 0)
    run.step += 1
    with clock.phase("save"):
        _save(run, producer)
    with clock.phase("publish"):
        verified = await _publish_step(run, producer, new_weights=packed is not None)
    if batch is None:
        return None
    record = step_record(run.step, batch, {**update, **verified}, clock.seconds)
    if run.config.grpo.overlong != "none":  # shaped or masked by grpo.overlong
        record["episodes_cut"] = sum(cut_short(t) for g in batch.groups for t in g.trajectories)
    if consumed is not None and producer is not None:
        record |= overlap_record(consumed, producer.busy_seconds() - engines_busy, sum(clock.seconds.values()))
    return record


class StepClock:
    """Wall seconds of a step's phases, as the step's record names them (`time_<phase>_s`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[f"time_{name}_s"] = time.perf_counter() - start


def _packed(run: Run, batch: Batch | None, scheduler: GroupScheduler | None,
            consumed: ConsumedBatch[Task] | None) -> PackedBatch | None:
    """The driver packs its scored groups into rows (with their advantages) and every process receives the
    packed batch; None where no group was informative. The draws a checkpoint records: those the consumed
    batch left (batches produced ahead are drawn again by a resumed run)."""
    config = run.config
    packed = None if batch is None or scheduler is None else batch_from_groups(
        [g.trajectories for g in batch.groups], config.grpo, config.train.row_len, config.train.micro_batch_rows,
        run.trainer.rows_multiple, consumed.is_stale if consumed is not None else None,
        scheduler.score_rule)  # the rule the scheduler kept these groups by
    draws = consumed.draws if consumed is not None else scheduler.draws if scheduler is not None else run.draws
    packed, run.draws = share_batch(packed, draws)
    return packed


async def _update(run: Run, packed: PackedBatch | None, beside_rollouts: bool = False) -> dict[str, Any]:
    """The optimizer steps over the packed batch (the mismatch measured before them); a step without an
    informative group skips them. `beside_rollouts`: in a thread, so that the event loop serves the episodes
    produced meanwhile."""
    if packed is None:
        log.warning("step %d: no informative group (all rewards equal everywhere): optimizer step skipped",
                    run.step + 1)
        return {"skipped": True}
    await run.handover.to_trainer(run)
    if beside_rollouts:
        return await asyncio.to_thread(_optimizer_steps, run, packed)
    return _optimizer_steps(run, packed)


def _optimizer_steps(run: Run, packed: PackedBatch) -> dict[str, Any]:
    """The update proper: run.state takes the updated state; its metrics."""
    prepared = run.trainer.prepare(run.state.params, packed)
    mismatch = run.mismatch(run.state.params, prepared) if run.mismatch is not None else {}  # before the update
    run.state, metrics = run.trainer.update(run.state, prepared)
    update = {**metrics, **mismatch, "skipped": False}
    if run.alarm is not None:
        update["mismatch_alarm"] = run.alarm.check(update, run.step + 1)
    return update


def _save(run: Run, producer: BatchProducer[Task] | None) -> None:
    """A checkpoint where one is due, with what a resume checks and restores beside the state (and the
    batches produced ahead that are in flight, with the draws each started from: a resumed run samples them
    again)."""
    config = run.config
    if "checkpoint" in run.periodic.due(run.step):
        in_flight = {"in_flight": {str(i): d for i, d in producer.in_flight().items()}} if producer else {}
        run.checkpointer.save(run.step, run.state, run.iterator.get_state(), {
            "fingerprint": config.fingerprint(), "tasks": task_manifest_hash(run.tasks), "seed": config.rollout.seed,
            "draws": run.draws, **in_flight,
            **({"lora": config.lora.spec().to_record()} if config.lora.enabled else {})})


async def _publish_step(run: Run, producer: BatchProducer[Task] | None, new_weights: bool) -> dict[str, float]:
    """The engines get the updated weights, if the step made any (the GPUs handed back to them first where
    colocated), published and verified: the weight probe's metrics once colocated servers have their KV cache
    back. In exact mode the driver's producer serves them when a batch needs them (at once where the run
    drains: its validation scores them); the metrics are then those of the versions verified during this step."""
    exact = producer is not None and run.config.rollout.async_mode == "exact"
    verified: dict[str, float] = {}
    later: list[Publication] = []
    if new_weights and exact:
        async def publish_now_serve_later() -> None:
            later.append(publish_later(run, str(run.step)))
        await run.handover.to_engines(run, publish_now_serve_later)
    elif new_weights:
        await run.handover.to_engines(run, functools.partial(publish, run, str(run.step)))
        verified = await verify(run)
    if producer is None:
        return verified
    producer.updated(run.step, new_weights=new_weights, publication=later[0] if later else None)
    if not exact:
        return verified
    if drains(run, run.step):
        await producer.serve(run.step)
    return producer.verified()


def step_record(step: int, batch: Batch, update: dict[str, Any], seconds: dict[str, float]) -> dict[str, Any]:
    """What the metrics log keeps of a step: the update's metrics, the rollouts' rewards, tokens and system
    errors, how each drawn group did, and the phases' wall seconds."""
    trajectories = [t for g in batch.groups for t in g.trajectories]
    counts = batch.counts
    rewards = [t.reward for t in trajectories if t.reward is not None]
    tokens = sum(t.completion_tokens for t in trajectories)
    rollout_s = seconds["time_rollout_s"]
    return {
        "step": step, **update,
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,  # informative groups only
        "pass_rate": counts.reward_sum / counts.scored_episodes if counts.scored_episodes else None,
        "groups_informative": counts.informative, "groups_dropped": counts.dropped_all_equal,
        "groups_refilled": counts.refilled, "tasks_replaced": counts.replaced,
        "system_errors": dict(counts.system_errors), "episodes": counts.episodes,
        "completion_tokens": tokens, "rollout_tokens_per_s": tokens / rollout_s if rollout_s else 0.0,
        "malformed_tool_calls": sum(t.malformed_tool_calls for t in trajectories),
        "malformed_by_kind": dict(sum((Counter(t.malformed) for t in trajectories), Counter())),
        # what the step drew and how each group did (kept: informative), for per-task learning curves
        "groups": [{"task": g.task.id, "kind": g.task.kind.value, "pass": sum(g.rewards) / len(g.rewards),
                    "kept": g.informative} for g in batch.scored],
        **seconds,
    }


async def _unless_a_save_fails(checkpointer: Checkpointer, work: Awaitable[T]) -> T:
    """`work` (a step, whose rollouts overlap the previous step's save), stopped as soon as that save fails:
    the run ends with the save's one-line error instead of finding it a step later."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait({task}, timeout=SAVE_WATCH_S)
        if not task.done() and (failure := checkpointer.failure) is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(CheckpointWriteError):  # Orbax's threads end before the run does
                checkpointer.close()
            raise failure
    return task.result()


async def _scorings(run: Run, opener: SessionOpener | None) -> dict[str, Any]:
    """The scorings of the served policy due at this step (tbjax.trainer.periodic): the validation, then the
    held-out tasks; their metrics, {} where none is due."""
    due = run.periodic.due(run.step)
    scored = await _validate(run, opener) if "validation" in due else {}
    if "heldout" in due:
        scored |= await _score_heldout(run, opener)
    return scored


async def _validate(run: Run, opener: SessionOpener | None) -> dict[str, Any]:
    """Scores the served policy on the validation split; a new best step's weights go to <run>/validated/v<step>
    (validation.export=best). The step's validation metrics."""
    validation = run.validation
    assert validation is not None, "a validation is declared due only where the run has one (Periodic.of)"
    verdict = await validation.score(run.step, run.engine, run.interpreter, opener)
    if verdict.new_best and run.config.validation.export == "best":
        publish_weights(_policy(run), run.directory / VALIDATED, run.step, tokenizer_dir=run.model_dir)
    if run.step == 0 and run.metrics is not None:
        console.print(f"validation at the start: pass@1 {verdict.score:.3f}")
    return {"validation_pass_at_1": verdict.score, VALIDATION_BEST: verdict.best_step}


async def _score_heldout(run: Run, opener: SessionOpener | None) -> dict[str, Any]:
    """Scores the served policy on the held-out subset (evaluate.every): the step's `heldout_pass_at_1`. It
    chooses nothing."""
    heldout = run.heldout
    assert heldout is not None, "a held-out scoring is declared due only where the run has one (Periodic.of)"
    return {"heldout_pass_at_1": (await heldout.score(run.step, run.engine, run.interpreter, opener)).score}


def _policy(run: Run) -> Qwen:
    """The current policy as an HF export holds it: under LoRA, its adapters merged into a view's weights (the
    trainer's base stays as it is)."""
    model = run.trainer.model_for(run.state.params)
    if run.trainer.lora:
        merge_adapters(model)
    return model
