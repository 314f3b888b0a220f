"""The decision table of a base-vs-trained comparison: each decision's change comes with a paired bootstrap
interval over the kind's tasks, which tells a behaviour training moved from a few tasks' draws."""

import re

from rollout.decisions import decision_rows
from rollout.records import TrialRecord


def trials(task_id: str, outcomes: list[str], model: str) -> list[TrialRecord]:
    return [TrialRecord(task_id=task_id, domain="library", trial=n, passed=outcome == "golden", system_error=None,
                        termination="agent_done", model=model, outcome=outcome) for n, outcome in enumerate(outcomes)]


def change(rows, kind: str, name: str) -> tuple[float, float, float]:
    text = next(row[4] for row in rows if row[:2] == (kind, name))
    point, low, high = re.fullmatch(r"([+-]\d+\.\d) pts \[([+-]\d+\.\d), ([+-]\d+\.\d)\]", text).groups()
    return float(point), float(low), float(high)


def test_a_change_on_every_task_has_an_interval_away_from_zero_and_one_task_does_not():
    kinds = {f"direct/{n}": "direct" for n in range(10)}
    base = [r for t in kinds for r in trials(t, ["unchanged"] * 4, "base")]
    everywhere = [r for t in kinds for r in trials(t, ["golden"] * 3 + ["unchanged"], "trained")]
    rows = decision_rows(base, everywhere, kinds, resamples=200)
    assert change(rows, "direct", "made the change") == (75.0, 75.0, 75.0)
    assert change(rows, "direct", "left it undone") == (-75.0, -75.0, -75.0)
    one_task = [r for t in kinds for r in trials(t, ["golden"] * 4 if t == "direct/0" else ["unchanged"] * 4,
                                                  "trained")]
    point, low, high = change(decision_rows(base, one_task, kinds, resamples=200), "direct", "made the change")
    assert point == 10.0 and low == 0.0 and high >= 20.0
    again = decision_rows(base, one_task, kinds, resamples=200)
    assert again == decision_rows(base, one_task, kinds, resamples=200)  # seeded
    assert change(decision_rows(base, one_task, kinds, resamples=200, seed=1), "direct", "made the change")[0] == 10.0

