"""What a policy does where the record decides: does it read the record, and does its note state it?

For every held-out task of the laptop experiment whose oracle states a decision note (envs.tasks.DecisionNote),
k trials with the evaluation's seeds on the embedded engine; each trial is sorted by the turn after the tool
result the note reads: the record never read (the policy decided before calling that tool), the note's facts
stated as the record has them, other facts stated (a note whose values the record does not show), or no note;
and by whether the trial passed. Overrides are tbjax.train's (e.g. the second seed's).

    python scripts/decision_notes.py runs/default/grpo/export/latest [--trials 8] [key=value ...]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from envs import Task
from rollout.episode import derive_seed, run_episode
from rollout.interpret import Interpreter
from tbjax.config import Config, load_config
from tbjax.engine.configured import embedded_engine
from tbjax.models.placement import load_policy
from tbjax.pipeline.stages import heldout_split
from tbjax.trainer.suite_setup import session_opener

KINDS = ("never read the record", "states the record", "states other facts", "no note")


def note_kind(task: Task, transcript: str) -> str:
    """The trial's behaviour at the decision (KINDS), from its decoded transcript."""
    assert task.note is not None
    _, called, rest = transcript.partition(f'"name": "{task.note.after}"')
    _, answered, after = rest.partition("</tool_response>")
    if not called or not answered:
        return KINDS[0]
    turn = after.partition("<|im_start|>assistant\n")[2].split("<|im_end|>", 1)[0]
    if task.note.stated_facts in turn:
        return KINDS[1]
    return KINDS[2] if any(field in turn for field in task.note.facts) else KINDS[3]


async def trials(policy: Path, config: Config, k: int) -> Counter[tuple[str, str, bool]]:
    """(template, note kind, passed) -> trials, over the noted held-out tasks."""
    _, heldout = heldout_split(config)
    tasks = [t for t in heldout if t.note is not None]
    interpreter = Interpreter.from_pretrained(policy)
    engine = embedded_engine(load_policy(policy, config), config.rollout, "policy")  # the evaluation's engine

    async def one(task: Task, trial: int) -> tuple[str, str, bool]:
        seed = derive_seed(config.evaluate.seed, task.id, trial)
        result = await run_episode(task, engine, interpreter, group_id=task.id, config=config.episode,
                                   session_id=f"{task.id}#{trial}", seed=seed, opener=session_opener(config))
        passed = result.verdict is not None and result.verdict.passed
        return task.template, note_kind(task, interpreter.decode(result.trajectory.token_ids)), passed

    try:
        return Counter(await asyncio.gather(*(one(t, i) for t in tasks for i in range(k))))
    finally:
        await engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policy", type=Path, help="an exported policy (e.g. runs/default/grpo/export/latest)")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("overrides", nargs="*", help="tbjax.train key=value overrides")
    args = parser.parse_intermixed_args()
    counts = asyncio.run(trials(args.policy, load_config(None, args.overrides), args.trials))
    table = Table(title=f"decision notes of {args.policy} (trials passed / trials)")
    table.add_column("template")
    for kind in KINDS:
        table.add_column(kind, justify="right")
    for template in sorted({t for t, _, _ in counts}):
        cells = []
        for kind in KINDS:
            total = counts[template, kind, True] + counts[template, kind, False]
            cells.append(f"{counts[template, kind, True]} / {total}" if total else "")
        table.add_row(template, *cells)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
