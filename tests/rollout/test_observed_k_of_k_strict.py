"""Observed k/k is strict: a task counts only with k scored trials that all passed. A task that lost one of its
k trials to a system error and passed the others is counted apart, in `all_clean_trials_passed`; summary.json,
report.md and the campaign comparison (compare.json, compare.md) use the strict count."""

import json

from rollout import compare, evaluate
from rollout.records import TrialRecord
from tests.rollout.campaign_support import records, write_records

K = 4


def lose_trial(recs: list[TrialRecord], task_id: str, trial: int) -> list[TrialRecord]:
    """`recs` with that trial lost to an engine failure (not scored)."""
    lost = {"passed": None, "system_error": "engine", "termination": "system_error"}
    return [r.model_copy(update=lost) if r.key == (task_id, trial) else r for r in recs]


def test_a_task_that_lost_a_trial_is_not_observed_k_of_k(tmp_path):
    # t0000 passes 4/4, t0001 passes its 3 scored trials and lost one, t0002 passes 3/4.
    recs = lose_trial(records([K, K, 3], K), "t0001", 0)
    out = tmp_path / "out"
    assert evaluate.main(["--from-trials", str(write_records(tmp_path / "trials.jsonl", recs)), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["k"] == K and summary["tasks"] == 3
    assert summary["observed_k_of_k"] == {"count": 1, "share": 1 / 3}
    assert summary["all_clean_trials_passed"] == {"count": 2, "share": 2 / 3}
    lost_domain = summary["domains"]["travel"]  # t0001's
    assert lost_domain["observed_k_of_k"]["count"] == 0 and lost_domain["all_clean_trials_passed"]["count"] == 1
    report = (out / "report.md").read_text()
    assert f"observed {K}/{K}: 1 tasks" in report
    assert "1 more passed every scored trial but lost a trial to a system error" in report


def test_comparison_gains_a_task_only_when_it_is_observed_k_of_k_strictly(tmp_path):
    a = lose_trial(records([K, K, 3], K), "t0001", 2)  # t0001: 3 of 3 scored trials passed, one lost
    b = records([K, K, 3], K)  # t0001: 4/4
    out = tmp_path / "cmp"
    compare.write_comparison(write_records(tmp_path / "a.jsonl", a), write_records(tmp_path / "b.jsonl", b), out,
                             names=("a", "b"), resamples=50, allow_inexact=True)  # a lost a trial
    result = json.loads((out / "compare.json").read_text())
    assert result["gained"]["k_of_k"] == ["t0001"] and result["lost"]["k_of_k"] == []
    assert result["a"]["observed_k_of_k"]["count"] == 1 and result["b"]["observed_k_of_k"]["count"] == 2
    assert result["delta"]["observed_k_of_k"]["share"] == 1 / 3
    assert result["a"]["all_clean_trials_passed"]["count"] == result["b"]["all_clean_trials_passed"]["count"] == 2
    assert "| observed 4/4 | 1 (33.3%) | 2 (66.7%) | +33.3 pts |" in (out / "compare.md").read_text()
