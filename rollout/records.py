"""Trial records: one JSON line per trial, appended as trials finish, so an interrupted campaign resumes
where it stopped and any report can be recomputed later from the file alone.

A record's keys are the public format of issue 6: task_id, domain, trial, passed (null for a system error),
system_error (its kind or null), termination, turns, usage {prompt_tokens, completion_tokens,
reasoning_tokens, cached_tokens}, model, weight_version, seconds, diff (the verdict's differences, one line
each), outcome (which reference state the episode ended in: golden, careless, unchanged or other),
malformed_tool_calls (calls answered with a format error instead of run), reward_breakdown (the parts of
a suite evaluator's reward, e.g. τ²-bench's DB and COMMUNICATE; null for built-in domains). A
system-error trial is recorded too: it cost time and tokens, and it is reported beside the scores, never as a
failure.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from rollout.metrics import USAGE_FIELDS, TaskCounts


class Usage(BaseModel):
    """Tokens of one trial summed over its model calls; prompt_tokens counts every call's prompt (what an
    API bills), cached_tokens the part of those served from a prefix cache, reasoning_tokens the part of the
    completion spent thinking."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0


class TrialRecord(BaseModel):
    task_id: str
    domain: str
    trial: int = Field(ge=0)
    passed: bool | None
    system_error: str | None
    termination: str
    turns: int = 0
    usage: Usage = Usage()
    model: str
    weight_version: str | None = None
    seconds: float = 0.0
    diff: list[str] = []
    outcome: str | None = None  # the verdict's outcome: which reference state the episode ended in
    reward_breakdown: dict[str, float] | None = None  # the verdict's breakdown (a suite graded by its own evaluator)
    malformed_tool_calls: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _scored_or_error(self) -> TrialRecord:
        if (self.passed is None) == (self.system_error is None):
            raise ValueError(f"trial {self.key}: exactly one of passed and system_error must be set (a system "
                             f"error is not scored), got passed={self.passed} system_error={self.system_error}")
        return self

    @property
    def key(self) -> tuple[str, int]:
        return self.task_id, self.trial


class RecordsError(ValueError):
    """A records file that cannot be read as trial records."""


def read_records(path: str | Path, *, repair: bool = False) -> list[TrialRecord]:
    """Every record of a JSON-lines file. A last line cut short by an interrupted write is dropped (and cut
    from the file when `repair`); any other bad line, or a (task_id, trial) recorded twice, raises."""
    path = Path(path)
    if not path.exists():
        raise RecordsError(f"no trial records at {path}; run `python -m rollout.evaluate` first or fix the path")
    data = path.read_bytes()
    lines = data.split(b"\n")
    records: list[TrialRecord] = []
    seen: set[tuple[str, int]] = set()
    offset = 0
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if line.strip():
            try:
                record = TrialRecord.model_validate_json(line)
            except ValueError as error:
                if last:  # no newline yet: the write was interrupted
                    if repair:
                        with path.open("r+b") as handle:
                            handle.truncate(offset)
                    break
                raise RecordsError(f"{path}:{number} is not a trial record ({error}); fix or remove the line") \
                    from error
            if record.key in seen:
                raise RecordsError(f"{path}:{number} records task {record.task_id} trial {record.trial} a second "
                                   "time; a campaign records each trial once (remove the duplicate)")
            seen.add(record.key)
            records.append(record)
        offset += len(line) + 1
    return records


class TrialLog:
    """Appends records to a JSON-lines file, one flushed and fsynced line per trial (thread-safe), and knows
    which (task_id, trial) pairs are already done."""

    def __init__(self, path: str | Path, *, resume: bool) -> None:
        self.path = Path(path)
        if self.path.exists() and self.path.stat().st_size and not resume:
            raise FileExistsError(f"{self.path} already holds trial records; pass --resume to continue that "
                                  "campaign, or choose another --out")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_records(self.path, repair=True) if self.path.exists() else []
        self.done: set[tuple[str, int]] = {r.key for r in existing}
        self.resumed = len(existing)
        self._lock = threading.Lock()
        self._handle = self.path.open("ab")

    def append(self, record: TrialRecord) -> None:
        line = record.model_dump_json().encode() + b"\n"
        with self._lock:
            if record.key in self.done:
                raise RecordsError(f"task {record.task_id} trial {record.trial} is already recorded in {self.path}")
            self._handle.write(line)
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self.done.add(record.key)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> TrialLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def task_counts(records: Iterable[TrialRecord]) -> list[TaskCounts]:
    """Clean trials and successes per task, sorted by task id; system-error trials are left out of both
    (a task whose trials all failed with system errors appears with n = 0)."""
    by_task: dict[str, list[int]] = {}
    domains: dict[str, str] = {}
    for record in records:
        counts = by_task.setdefault(record.task_id, [0, 0])
        domains[record.task_id] = record.domain
        if record.system_error is None:
            counts[0] += 1
            counts[1] += int(bool(record.passed))
    return [TaskCounts(task_id, domains[task_id], n, c) for task_id, (n, c) in sorted(by_task.items())]


def usage_dict(record: TrialRecord) -> dict[str, int]:
    return {name: getattr(record.usage, name) for name in USAGE_FIELDS}


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part. The file
    gets the permissions of any file made with open() (0666 less the umask: 0644 under umask 022), not
    mkstemp's private 0600: reports, plots and records are read by people and tools other than the writer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def canonical_json(value: Any) -> str:
    """Sorted keys, fixed indentation, trailing newline: the same value always gives the same bytes."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
