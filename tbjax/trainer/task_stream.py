"""The endless, checkpointable stream of indices into the training tasks that GRPO draws its groups from
(`tasks.draw`), each task reshuffled every pass by `tasks.seed`.

- uniform: every task as often as any other.
- by_kind: one task of each kind (direct, forbidden, leak, ...) in turn, shuffled within the kind, so a kind with
  few tasks weighs as much as one with many. A group that comes back all-equal is replaced by the next task of
  its own kind (`ByKindStream.like`, the group scheduler's `replacement`): otherwise the kind the policy has
  drifted on, the direct writes it has learned to refuse whose groups all fail, would hand its slots to the
  kinds whose groups are still mixed, and the update would teach the drift further.

Both streams save and restore their position with the run's checkpoints (`get_state` / `set_state`, JSON).
"""

from __future__ import annotations

import hashlib
from typing import Any

import grain

from envs import Task, TaskKind
from tbjax.sections.tasks import TasksSection


def _endless(indices: list[int], seed: int) -> grain.DatasetIterator:
    return iter(grain.MapDataset.source(indices).shuffle(seed=seed).repeat(None).to_iter_dataset())


class ByKindStream:
    """One task of each kind in turn; `like(task)` is the next task of that task's kind."""

    def __init__(self, tasks: list[Task], seed: int) -> None:
        self.kinds = sorted({task.kind for task in tasks})
        self._streams = {kind: _endless([i for i, task in enumerate(tasks) if task.kind == kind], seed + n)
                         for n, kind in enumerate(self.kinds)}
        self._turn = 0

    def __iter__(self) -> ByKindStream:
        return self

    def __next__(self) -> int:
        kind = self.kinds[self._turn % len(self.kinds)]
        self._turn += 1
        return self.like(kind)

    def like(self, kind: TaskKind) -> int:
        return int(next(self._streams[kind]))

    def get_state(self) -> dict[str, Any]:
        return {"turn": self._turn, "kinds": {kind: stream.get_state() for kind, stream in self._streams.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        if sorted(state.get("kinds", {})) != self.kinds:
            raise ValueError(f"the checkpoint's task stream holds the kinds {sorted(state.get('kinds', {}))}, "
                             f"the tasks have {self.kinds}: resume with the tasks and tasks.draw the run began "
                             f"with, or start a new run.name")
        self._turn = int(state["turn"])
        for kind, stream in self._streams.items():
            stream.set_state(state["kinds"][kind])


# a stream of indices into the tasks, its position saved and restored with `get_state` / `set_state`
TaskStream = grain.DatasetIterator | ByKindStream


def task_stream(tasks: list[Task], section: TasksSection) -> TaskStream:
    if section.draw == "by_kind":
        return ByKindStream(tasks, section.seed)
    return _endless(list(range(len(tasks))), section.seed)


def task_manifest_hash(tasks: list[Task]) -> str:
    """A short hash of the pool's task ids, in order: what a checkpoint records of the pool its stream's
    indices name."""
    return hashlib.sha256("\n".join(t.id for t in tasks).encode()).hexdigest()[:16]
