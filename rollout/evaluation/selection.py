"""Policy-relative difficulty selection (the seed's offline filter) as pure functions of trial counts.

Why: GRPO learns only from groups whose rewards differ, so training tasks the base policy always or never
solves waste rollouts. Each candidate's success rate gets the Jeffreys posterior Beta(k + 1/2, n - k + 1/2)
from n clean trials with k successes; the task goes to the band holding the most posterior mass (bands are
ordered hardest first, ties go to the harder band), and the kept bands (hard, medium, easy by default) are
selected. System-error trials are not in n or k; a task with fewer than `min_clean_runs` clean trials is not
judged at all. The optional solvability gate asks a reference model's records for at least one success in
at least `gate_min_runs` clean runs (a task nobody solves may be broken, not hard). Benchmark tasks are
always refused (rollout.task_choice says which): their licences forbid training on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rollout.metrics import TaskCounts, band_masses, jeffreys_interval, most_probable_band
from rollout.task_choice import BenchmarkExclusion

BAND_NAMES = ("too_hard", "hard", "medium", "easy", "too_easy")
BAND_EDGES = (0.0, 0.08, 0.40, 0.60, 0.90, 1.0)
KEEP = ("hard", "medium", "easy")
NO_EXCLUSION = BenchmarkExclusion()


@dataclasses.dataclass(frozen=True)
class SelectionConfig:
    """Defaults are the seed's : five bands, keep the middle three, >= 4 clean runs."""

    band_names: tuple[str, ...] = BAND_NAMES  # hardest first
    band_edges: tuple[float, ...] = BAND_EDGES
    keep: tuple[str, ...] = KEEP
    min_clean_runs: int = 4
    gate: bool = False  # apply the solvability gate (needs reference records)
    gate_min_runs: int = 4
    gate_min_successes: int = 1
    interval_level: float = 0.95

    def __post_init__(self) -> None:
        if len(self.band_edges) != len(self.band_names) + 1:
            raise ValueError(f"{len(self.band_names)} bands need {len(self.band_names) + 1} edges, got "
                             f"{list(self.band_edges)}")
        unknown = set(self.keep) - set(self.band_names)
        if unknown:
            raise ValueError(f"--keep names unknown bands {sorted(unknown)}; the bands are {list(self.band_names)}")
        if self.min_clean_runs < 1:
            raise ValueError(f"min_clean_runs must be >= 1, got {self.min_clean_runs}")


# --- assessment --------------------------------------------------------------------------------------------

def gate_result(reference: TaskCounts | None, config: SelectionConfig) -> dict[str, Any]:
    """The solvability gate for one task from the reference model's clean runs."""
    n, k = (reference.n, reference.c) if reference else (0, 0)
    return {"reference_n": n, "reference_k": k,
            "passed": n >= config.gate_min_runs and k >= config.gate_min_successes}


def assess(counts: TaskCounts, config: SelectionConfig, *, system_errors: int = 0,
           reference: TaskCounts | None = None, benchmark: bool = False) -> dict[str, Any]:
    """One task's aggregate row: n, k, posterior band masses, band, interval, gate, decision and why."""
    row: dict[str, Any] = {"task_id": counts.task_id, "domain": counts.domain, "n": counts.n, "k": counts.c,
                           "system_errors": system_errors, "masses": None, "band": None, "interval": None,
                           "gate": gate_result(reference, config) if config.gate else None}
    if counts.n >= 1:
        masses = band_masses(counts.n, counts.c, config.band_edges)
        row["masses"] = dict(zip(config.band_names, masses, strict=True))
        row["interval"] = list(jeffreys_interval(counts.n, counts.c, config.interval_level))
        if counts.n >= config.min_clean_runs:
            row["band"] = config.band_names[most_probable_band(masses)]
    if benchmark:
        reason = "benchmark_task"
    elif counts.n < config.min_clean_runs:
        reason = "too_few_clean_runs"
    elif row["band"] not in config.keep:
        reason = f"band_{row['band']}"
    elif row["gate"] is not None and not row["gate"]["passed"]:
        reason = "failed_solvability_gate"
    else:
        reason = "selected"
    row["selected"], row["reason"] = reason == "selected", reason
    return row


def select(counts: Sequence[TaskCounts], config: SelectionConfig, *, system_errors: Mapping[str, int] | None = None,
           reference: Mapping[str, TaskCounts] | None = None,
           exclusion: BenchmarkExclusion = NO_EXCLUSION) -> list[dict[str, Any]]:
    """Aggregate rows for every candidate, sorted by task id."""
    if config.gate and reference is None:
        raise ValueError("the solvability gate needs a reference model's trial records (--reference FILE)")
    errors, refs = system_errors or {}, reference or {}
    return [assess(t, config, system_errors=errors.get(t.task_id, 0), reference=refs.get(t.task_id),
                   benchmark=t.task_id in exclusion)
            for t in sorted(counts, key=lambda t: t.task_id)]


def band_counts(rows: Sequence[dict[str, Any]], config: SelectionConfig) -> dict[str, int]:
    """Tasks per band (in band order), plus tasks not judged for too few clean runs."""
    counts = {name: 0 for name in config.band_names}
    for row in rows:
        if row["band"] is not None:
            counts[row["band"]] += 1
    counts["too_few_clean_runs"] = sum(1 for row in rows if row["band"] is None)
    return counts
