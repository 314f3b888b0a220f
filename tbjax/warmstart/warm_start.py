"""Warm start: supervised fine-tuning on the oracle's demonstrations, with the GRPO update itself.

Why one step function: in the clipped objective, with the "old" log-probs equal to the current ones (ratio 1)
and advantage 1, the gradient of -A * exp(logp - stop_grad(logp)) is exactly -d logp. So a GRPO update with
unit advantages, token-mean aggregation and importance sampling off is a maximum-likelihood step on the
trained tokens (the loss mask: what the assistant said and called, never the prompt, tool results or user).
Sharding, micro-batching, packing, remat and the optimizer are then the trainer's, tested once.

Stages, each cached in `out` so a second call resumes: demonstrations (`demos.jsonl`, the oracle's passing
episodes of the training tasks; `slips.jsonl`, its slipped episodes when `slips` sets rates), Orbax checkpoints
of the update (`checkpoints/`, exact resume: batches are a pure function of the seed and the step), and the final
policy as an HF directory (`export/`).

With `slips`, the warm start imitates a demonstrator that is sometimes wrong: each drawn demonstration of a task
shows, with the configured chance per slip kind, one of the mistakes that task admits (envs.oracle.Slip), drawn
anew every time the task is drawn, so the policy learns how often to slip rather than which task to slip on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import numpy as np
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from transformers import AutoTokenizer

from envs import Task
from envs.oracle import Slip
from rollout.episode import EpisodeConfig, SessionOpener
from rollout.interpret import Interpreter
from rollout.interpret.render import ChatRenderer
from rollout.oracle import demonstrations, slipped_demonstrations
from rollout.records import atomic_write
from rollout.trajectory import Trajectory
from tbjax.models import Qwen
from tbjax.models.hf.versions import publish_weights
from tbjax.sections.training import GRPOSection, OptimSection, WarmStartSection
from tbjax.trainer.checkpoint import Checkpointer
from tbjax.trainer.packing import pack
from tbjax.trainer.periodic import Every
from tbjax.trainer.update import GRPOTrainer
from tbjax.warmstart.copy_drills import ROWS as DRILL_ROWS
from tbjax.warmstart.copy_drills import drill_batch, drill_row_len
from tbjax.warmstart.fresh_values import digit_token_ids, refresh_values

log = logging.getLogger(__name__)
MLE = GRPOSection(aggregation="token_mean", tis_cap=None, kl_coef=0.0)  # unit advantages: maximum likelihood


# task id -> slip -> the oracle's slipped episode, in the order envs.oracle.slips_of gives the task's slips
Slipped = Mapping[str, Mapping[Slip, Trajectory | None]]


def load_or_record_slips(path: Path, tasks: list[Task], interpreter: Interpreter, opener: SessionOpener,
                         episode: EpisodeConfig) -> dict[str, dict[Slip, Trajectory]]:
    """The oracle's episode of every slip each of `tasks` admits, whatever its verdict (recorded once into
    `path`, read back after: only those of `tasks`)."""
    if not path.is_file():
        played = asyncio.run(slipped_demonstrations(tasks, interpreter, opener, episode))
        lines = [json.dumps({"slip": slip.value, "trajectory": dataclasses.asdict(r.trajectory)}) + "\n"
                 for slip, r in played]
        atomic_write(path, "".join(lines))
    wanted = {t.id for t in tasks}
    slipped: dict[str, dict[Slip, Trajectory]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        trajectory = Trajectory(**record["trajectory"])
        if trajectory.task_id in wanted:
            slipped.setdefault(trajectory.task_id, {})[Slip(record["slip"])] = trajectory
    return slipped


def slip_summary(slipped: Mapping[str, Mapping[Slip, Trajectory]]) -> dict[str, dict[str, int]]:
    """Per slip kind: how many tasks have a slipped demonstration, and how many of those the verifier failed
    (of the slipped episodes as recorded, `load_or_record_slips`)."""
    summary: dict[str, dict[str, int]] = {}
    for by_slip in slipped.values():
        for slip, trajectory in by_slip.items():
            counts = summary.setdefault(slip.value, {"tasks": 0, "failed": 0})
            counts["tasks"] += 1
            counts["failed"] += trajectory.reward != 1.0
    return summary


def load_or_record_demos(path: Path, tasks: list[Task], interpreter: Interpreter, opener: SessionOpener,
                         episode: EpisodeConfig) -> list[Trajectory]:
    """The oracle's passing episodes of `tasks` (recorded once into `path`, read back after: only those of
    `tasks`, so a held-out task recorded by another configuration never becomes a demonstration)."""
    if path.is_file():
        wanted = {t.id for t in tasks}
        recorded = [Trajectory(**json.loads(line)) for line in path.read_text().splitlines() if line]
        return [t for t in recorded if t.task_id in wanted]
    passed, failed = asyncio.run(demonstrations(tasks, interpreter, opener, episode))
    if failed:
        log.info("oracle failed %d of %d tasks under the episode limits (e.g. %s): not demonstrated",
                 len(failed), len(tasks), failed[0])
    trajectories = [result.trajectory for result in passed]
    atomic_write(path, "".join(json.dumps(dataclasses.asdict(t)) + "\n" for t in trajectories))
    return trajectories


def _maybe_slipped(demo: Trajectory, config: WarmStartSection, slipped: Slipped, rng: np.random.Generator
                   ) -> Trajectory:
    """`demo`, or with the configured chance per slip kind one of its task's slipped episodes (in the order
    the task admits them; a slip recorded as None, too long to train on, draws `demo`)."""
    draw, threshold = rng.random(), 0.0
    for slip, trajectory in slipped.get(demo.task_id, {}).items():
        threshold += config.slip_rate(slip)
        if draw < threshold:
            return trajectory or demo
    return demo


def step_batch(demos: list[Trajectory], step: int, config: WarmStartSection, digit_ids: list[int] | None = None,
               slipped: Slipped | None = None) -> list[Trajectory]:
    """The demonstrations of update `step` (0-based): epochs of a seeded permutation, each drawn demonstration
    replaced by one of its task's `slipped` episodes with the chances of `config.slips` and given fresh values
    with chance `config.fresh_values` (needs `digit_ids`); a pure function of (seed, step) so a resumed warm
    start draws exactly what an uninterrupted one would."""
    size = config.episodes_per_step
    per_epoch = max(1, len(demos) // size)
    epoch, index = divmod(step, per_epoch)
    order = np.random.default_rng([config.seed, epoch]).permutation(len(demos))
    batch = [demos[i] for i in order[index * size:(index + 1) * size]]
    if config.slips:
        if slipped is None:
            raise ValueError("warm_start.slips needs the slipped demonstrations")
        slip_rng = np.random.default_rng([config.seed, step, 2])
        batch = [_maybe_slipped(d, config, slipped, slip_rng) for d in batch]
    if not config.fresh_values:
        return batch
    if digit_ids is None:
        raise ValueError("warm_start.fresh_values needs the tokenizer's digit ids")
    rng = np.random.default_rng([config.seed, step, 1])
    return [refresh_values(d, digit_ids, rng) if rng.random() < config.fresh_values else d for d in batch]


def warm_start(model: Qwen, model_dir: Path, demos: list[Trajectory], config: WarmStartSection, out: Path, *,
               row_len: int, micro_batch_rows: int = 1, logprob_chunk: int = 8192,
               on_step: Callable[[dict], None] | None = None, slipped: Slipped | None = None) -> Path:
    """Trains `model` on `config.copy_drills` updates of copy drills, then `config.steps` on `demos`, slipping
    as `config.slips` says into `slipped`, resuming from `out/checkpoints`; returns the
    HF export directory of the result (`out/export/v{all updates}`), written once."""
    total = config.copy_drills + config.steps
    final = out / "export" / f"v{total}"
    if (final / "config.json").is_file():
        return final
    fitting = [d for d in demos if len(d.token_ids) <= row_len]
    if len(fitting) < len(demos):
        log.info("%d demonstrations are longer than a packed row (%d tokens): left out",
                 len(demos) - len(fitting), row_len)
    demos = fitting
    if slipped is not None:
        admitted = {slip.value for by_slip in slipped.values() for slip in by_slip}
        idle = sorted(kind for kind, rate in config.slips.items() if rate > 0 and kind not in admitted)
        if idle:
            raise ValueError(f"warm_start.slips sets {idle}, which no warm-start task admits (no task of "
                             f"tasks.domains and tasks.templates can show that mistake): drop them from "
                             "warm_start.slips or add tasks that admit them")
        # a slip too long to train on stays in the draw, and draws the correct episode
        slipped = {task: {slip: t if t is not None and len(t.token_ids) <= row_len else None
                          for slip, t in by_slip.items()} for task, by_slip in slipped.items()}
    if not demos:
        raise ValueError("no demonstrations to warm start from: the oracle passed no training task")
    optim = OptimSection(learning_rate=config.learning_rate, warmup_steps=config.warmup_steps,
                        grad_clip=config.grad_clip)
    trainer = GRPOTrainer(model, MLE, optim, logprob_chunk=logprob_chunk)
    state = trainer.init_state(model)
    checkpointer, every = Checkpointer(out / "checkpoints", keep=1), Every(config.checkpoint_every)
    restored = checkpointer.restore_latest(state, fingerprint=_fingerprint(config), allow_change=False)
    start = restored.step if restored is not None else 0
    if start > total:
        raise ValueError(f"{out / 'checkpoints'} holds step {start}, past warm_start.copy_drills + steps = {total}: "
                         "use a new run directory (run.name) or the same or more steps")
    if restored is not None:
        state = trainer.shard_state(restored.state)
    with _progress() as progress, (out / "metrics.jsonl").open("a") as metrics:
        bar = progress.add_task("warm start", total=total, completed=start)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        digit_ids = digit_token_ids(tokenizer) if config.fresh_values else None
        renderer = ChatRenderer(tokenizer)
        for step in range(start, total):
            if step < config.copy_drills:
                batch, phase = drill_batch(renderer, config.seed, step, config.copy_drills), "copy drills"
                shape = (drill_row_len(step, config.copy_drills), DRILL_ROWS)
            else:
                batch = step_batch(demos, step - config.copy_drills, config, digit_ids, slipped)
                phase = "warm start"
                shape = (row_len, micro_batch_rows)
            trained = sum(sum(t.loss_mask[1:]) for t in batch)
            packed = pack(batch, [1.0] * len(batch), [1.0] * len(batch), trained, *shape, trainer.rows_multiple)
            state, update = trainer.update(state, trainer.prepare(state.params, packed))
            record = {"step": step + 1, "nll": update["nll"], "grad_norm": update["grad_norm"],
                      "trained_tokens": update["trained_tokens"]}
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            if on_step:
                on_step(record)
            progress.update(bar, advance=1, description=f"{phase}  nll {update['nll']:.3f}")
            if every.due(step + 1, step + 1 == total):
                checkpointer.save(step + 1, state, {}, {"fingerprint": _fingerprint(config)})
    checkpointer.wait()
    checkpointer.close()
    return publish_weights(trainer.model_for(state.params), out / "export", total, tokenizer_dir=model_dir)


def _fingerprint(config: WarmStartSection) -> str:
    """What a resumed warm start must share with the checkpoint's run: everything but the step count (the
    schedule is constant after warm-up, so running longer continues the same run) and the save interval."""
    return repr(tuple(config.model_copy(update={"steps": 0, "checkpoint_every": 0}).model_dump().values()))


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    disable=jax.process_index() != 0)
