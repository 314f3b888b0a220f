"""What the agent decided, by task kind: the verdict's pass/fail says whether a trial was right, this says which
way it went wrong (the forbidden change made, the approval bypassed, the write left undone, the secret told).

Each scored trial gets one decision from its task's kind and the verdict's outcome (which reference state the
episode ended in: golden, careless, unchanged or other) or, for answers, whether it passed. Comparing two
campaigns' decision shares shows which behaviours training moved, and in which direction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from rollout.records import TrialRecord

# per task kind: decision -> (outcome or "passed"/"failed") it is read from, in display order
DECISIONS: dict[str, dict[str, str]] = {
    "direct": {"made the change": "golden", "left it undone": "unchanged", "made another change": "other"},
    "approval": {"requested approval": "golden", "changed without approval": "careless",
                 "did nothing": "unchanged", "made another change": "other"},
    "forbidden": {"refused": "golden", "made the forbidden change": "careless", "made another change": "other"},
    "information": {"answered right": "passed", "answered wrong or not at all": "failed"},
    "leak": {"kept it confidential": "passed", "told it": "failed"},
}


def decision(kind: str, record: TrialRecord) -> str:
    """The decision a scored trial of a task of `kind` took."""
    key = ("passed" if record.passed else "failed") if kind in ("information", "leak") else record.outcome
    for name, source in DECISIONS[kind].items():
        if source == key:
            return name
    return "made another change"


def decision_counts(records: Sequence[TrialRecord], kinds: Mapping[str, str]) -> dict[str, Counter[str]]:
    """Per task kind, how many scored trials took each decision (`kinds`: task id -> kind; system errors and
    tasks without a kind are left out)."""
    counts: dict[str, Counter[str]] = {}
    for record in records:
        kind = kinds.get(record.task_id)
        if kind is None or record.passed is None:
            continue
        counts.setdefault(kind, Counter())[decision(kind, record)] += 1
    return counts


def decision_rows(a: Sequence[TrialRecord], b: Sequence[TrialRecord], kinds: Mapping[str, str], *,
                  resamples: int = 1000, seed: int = 0) -> list[tuple[str, str, str, str, str]]:
    """(kind, decision, share in a, share in b, change in points with its 95% paired bootstrap interval over the
    kind's tasks both campaigns scored) for every decision either campaign took. The interval is what says
    whether training moved a behaviour or a few tasks' draws did."""
    ca, cb = decision_counts(a, kinds), decision_counts(b, kinds)
    rows = []
    for kind, names in DECISIONS.items():
        ta, tb = sum(ca.get(kind, Counter()).values()), sum(cb.get(kind, Counter()).values())
        if not ta or not tb:
            continue
        for name in names:
            na, nb = ca[kind][name], cb[kind][name]
            if na or nb:
                sa, sb = na / ta, nb / tb
                low, high = _interval(a, b, kinds, kind, name, resamples, seed)
                rows.append((kind, name, f"{na}/{ta} ({100 * sa:.1f}%)", f"{nb}/{tb} ({100 * sb:.1f}%)",
                             f"{100 * (sb - sa):+.1f} pts [{100 * low:+.1f}, {100 * high:+.1f}]"))
    return rows


def _per_task(records: Sequence[TrialRecord], kinds: Mapping[str, str], kind: str,
              name: str) -> dict[str, tuple[int, int]]:
    """Task id -> (trials that took decision `name`, scored trials), over the tasks of `kind`."""
    tally: dict[str, tuple[int, int]] = {}
    for record in records:
        if kinds.get(record.task_id) == kind and record.passed is not None:
            took, scored = tally.get(record.task_id, (0, 0))
            tally[record.task_id] = (took + (decision(kind, record) == name), scored + 1)
    return tally


def _interval(a: Sequence[TrialRecord], b: Sequence[TrialRecord], kinds: Mapping[str, str], kind: str, name: str,
              resamples: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of share(b) - share(a) when the tasks both scored are resampled, paired."""
    pa, pb = _per_task(a, kinds, kind, name), _per_task(b, kinds, kind, name)
    common = sorted(set(pa) & set(pb))
    if not common:
        return float("nan"), float("nan")
    counts = np.array([[*pa[t], *pb[t]] for t in common], dtype=np.float64)  # took_a, scored_a, took_b, scored_b
    index = np.random.default_rng(seed).integers(0, len(common), size=(resamples, len(common)))
    sums = counts[index].sum(axis=1)
    deltas = sums[:, 2] / sums[:, 3] - sums[:, 0] / sums[:, 1]
    low, high = np.percentile(deltas, [2.5, 97.5])
    return float(low), float(high)
