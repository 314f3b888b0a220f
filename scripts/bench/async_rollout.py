"""Steps per hour of asynchronous GRPO (rollout.max_staleness 1 and 2) against the synchronous loop (0), in the
same run, on a latency-bound setup: the laptop default's tiny Qwen3 (configs/tiny-cpu.yaml's settings; an
untrained policy, on tasks it passes about half the time: tbjax.assets.signal_tasks) on the embedded engine,
with every generate request and every tool call answered after a fixed delay, as a busy cluster's servers and
sandboxes answer. Each setting trains the same steps from the same start, at a learning rate too small to
change the policy much: the groups stay as mixed as the untrained policy's and every step updates, so what is
timed is the loop, not how fast a tiny policy solves its tasks (a step whose groups are all equal skips its
update and costs only its rollouts; such steps are counted and left out of the means). Dynamic sampling gets
one extra round at most (groups.max_extra_rounds=1), so a step's rollouts take about as long as the next one's.

A step's wall time is the sum of its phases (rollout wait, update, save, publish); the mean over the steps
that updated, after the first (which compiles most programs), counts. Synchronously a step costs its rollouts R plus its
update U; with batches produced ahead it costs about max(R, U), so the speedup can reach (R + U) / max(R, U),
at most 2x when R = U: the ceiling printed beside the measured ratio, from the synchronous run's own R and U.
On a cluster the engines and the trainer have devices of their own; here they share the CPU cores, so the
update slows by the episodes' own CPU work while it overlaps them (each setting's phases are printed), and
that keeps the ratio below its ceiling. Also printed: the fractions of each step the trainer waited for its
batch and no batch was being produced. `--async-mode` (rollout.async_mode) picks when publishes reach the
batches produced ahead: exact (the default; nothing drains here, as no checkpoint or validation falls inside
the timed steps) or eager.

    python scripts/bench/async_rollout.py [--steps 8] [--generate-delay 1.5] [--tool-delay 1.5] [--max-turns 2]
                                          [--async-mode exact]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from envs.session import EnvironmentSession
from rollout.episode import SessionOpener
from tbjax.assets.signal_tasks import signal_tasks
from tbjax.assets.tiny import make_flax_checkpoint
from tbjax.config import CONFIG_DIR, load_config
from tbjax.models import from_pretrained
from tbjax.trainer.loop import run_steps
from tbjax.trainer.run_setup import build_run
from tbjax.trainer.suite_setup import session_opener

STALENESS = (0, 1, 2)
PHASES = ("rollout", "update", "save", "publish")
LEARNING_RATE = 1e-7  # a step's record times each (rollout: waiting for the batch)


def slow_tools(opener: SessionOpener, delay: float) -> SessionOpener:
    """Sessions whose tool calls answer after `delay` seconds."""
    async def open_slow(task: Any) -> EnvironmentSession:
        session = await opener(task)
        call_tool = session.call_tool

        async def slow_call(name: str, arguments: dict[str, Any]) -> Any:
            await asyncio.sleep(delay)
            return await call_tool(name, arguments)
        session.call_tool = slow_call  # type: ignore[method-assign]
        return session
    return open_slow


def slow_engine(engine: Any, delay: float) -> None:
    """Makes `engine` answer each generate request after `delay` seconds."""
    generate = engine.generate

    async def slow_generate(input_ids: Any, sampling: Any, *, session_id: str | None = None) -> Any:
        await asyncio.sleep(delay)
        return await generate(input_ids, sampling, session_id=session_id)
    engine.generate = slow_generate


def train(model_dir: Path, root: Path, max_staleness: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The tiny run's `args.steps` steps at `max_staleness`; its metrics records."""
    config = load_config(CONFIG_DIR / "tiny-cpu.yaml", overrides=[
        f"model.path={model_dir}", f"run.root={root}", f"run.name=s{max_staleness}", f"train.steps={args.steps}",
        f"optim.learning_rate={LEARNING_RATE}",
        "train.checkpoint_every=1000", "validation.tasks=0", "rollout.deterministic=false", "tasks.draw=uniform",
        f"rollout.max_staleness={max_staleness}", f"episode.max_turns={args.max_turns}", "groups.max_extra_rounds=1",
        *([f"rollout.async_mode={args.async_mode}"] if max_staleness else [])])
    run = build_run(config, from_pretrained(model_dir), model_dir, tasks=signal_tasks(model_dir))
    slow_engine(run.engine, args.generate_delay)
    asyncio.run(run_steps(run, opener=slow_tools(session_opener(config), args.tool_delay)))
    return [json.loads(line) for line in (root / f"s{max_staleness}" / "metrics.jsonl").read_text().splitlines()]


def step_seconds(record: dict[str, Any]) -> float:
    return sum(v for k, v in record.items() if k.startswith("time_") and k.endswith("_s"))


def mean(records: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r.get(key, 0.0) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--generate-delay", type=float, default=1.5, help="seconds before each generate answers")
    parser.add_argument("--tool-delay", type=float, default=1.5, help="seconds before each tool call answers")
    parser.add_argument("--max-turns", type=int, default=2, help="agent turns per episode (episode.max_turns)")
    parser.add_argument("--async-mode", choices=("exact", "eager"), default="exact",
                        help="rollout.async_mode of the runs with max_staleness > 0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = make_flax_checkpoint(Path(tmp) / "policy", "qwen3-demo")
        runs = {k: train(model_dir, Path(tmp) / "runs", k, args)[1:] for k in STALENESS}
    skipped = {k: sum(r["skipped"] for r in records) for k, records in runs.items()}
    runs = {k: [r for r in records if not r["skipped"]] for k, records in runs.items()}
    synchronous = runs[0]
    rollout_s = mean(synchronous, "time_rollout_s")
    update_s = statistics.fmean(step_seconds(r) - r["time_rollout_s"] for r in synchronous)
    sync_step = statistics.fmean(step_seconds(r) for r in synchronous)
    print(f"tiny Qwen3 (configs/tiny-cpu.yaml), {args.steps} steps each (means, the first left out), generate "
          f"delay {args.generate_delay} s, tool delay {args.tool_delay} s, max_turns {args.max_turns}, async_mode "
          f"{args.async_mode}, "
          f"steps skipped (no informative group; left out) by max_staleness: {skipped}")
    print(f"synchronous: {sync_step:.2f} s a step = rollouts R {rollout_s:.2f} s + update, save, publish U "
          f"{update_s:.2f} s; the ceiling of overlapping them: (R + U) / max(R, U) = "
          f"{(rollout_s + update_s) / max(rollout_s, update_s):.2f}x")
    for k, records in runs.items():
        step = statistics.fmean(step_seconds(r) for r in records)
        staleness: dict[str, int] = {}
        for r in records:
            for age, n in r.get("staleness", {"0": r["episodes"]}).items():
                staleness[age] = staleness.get(age, 0) + n
        phases = ", ".join(f"{name} {mean(records, f'time_{name}_s'):.2f} s" for name in PHASES)
        print(f"max_staleness={k}: {3600 / step:7.0f} steps/hour, {sync_step / step:.2f}x the synchronous loop's; "
              f"trainer idle {mean(records, 'trainer_idle_fraction'):.2f}, engines idle "
              f"{mean(records, 'engine_idle_fraction'):.2f} of a step; a step's phases: {phases}; episodes by "
              f"staleness {staleness}; prompt tokens prefilled again after a publish, a step: "
              f"{mean(records, 'tokens_reprefilled'):.0f}")


if __name__ == "__main__":
    main()
