"""`python -m rollout.compare`: the seed's base-vs-trained deltas, bootstrap intervals, tasks gained and lost."""

import json
from pathlib import Path

import pytest

from rollout import compare
from tests.rollout.campaign_support import records, success_counts, write_records


def campaign(directory, per_task):
    """A campaign's trials.jsonl in its own directory, as rollout.evaluate writes it (4 trials per task)."""
    directory.mkdir(parents=True)
    return write_records(directory / "trials.jsonl", records(per_task, 4))


def test_seed_base_vs_trained(tmp_path):
    base = write_records(tmp_path / "base.jsonl", records(success_counts(507, 20, 5242, 38, 453), 20))
    grpo = write_records(tmp_path / "grpo.jsonl", records(success_counts(507, 20, 6163, 107, 446), 20))
    out = tmp_path / "cmp"
    assert compare.main([str(base), str(grpo), "--out", str(out), "--resamples", "300"]) == 0
    result = json.loads((out / "compare.json").read_text())
    assert set(result) == {"a", "b", "delta", "ci", "gained", "lost", "coverage"}
    assert f"{100 * result['delta']['pass@1']:.2f}" == f"{60.78 - 51.70:.2f}"
    assert result["delta"]["observed_k_of_k"]["count"] == 107 - 38
    assert f"{100 * result['delta']['pass@k']['20']:.2f}" == f"{87.97 - 89.35:.2f}"
    low, high = result["ci"]["pass@1"]
    assert low < result["delta"]["pass@1"] < high and low > 0  # a 9-point gain over 507 tasks is not noise
    # Synthetic campaigns list tasks in the same order, so k/k tasks of base are a subset of trained's.
    assert len(result["gained"]["k_of_k"]) == 107 - 38 and result["lost"]["k_of_k"] == []
    assert len(result["lost"]["pass_at_k"]) == 453 - 446 and result["gained"]["pass_at_k"] == []
    domains = result["ci"]["domains"]
    assert set(domains) == set(result["a"]["domains"]) and all(d["tasks"] > 100 for d in domains.values())
    assert sum(len(d["k_of_k"]) for d in result["gained"]["domains"].values()) == 107 - 38
    assert "pass@1" in (out / "compare.md").read_text()


def test_delta_is_null_where_a_side_is_unknown_and_ci_is_reproducible():
    assert compare.delta({"x": 1, "y": None, "z": {"w": 0.5}}, {"x": 3, "y": 2.0, "z": {"w": 0.25}, "v": 1}) == {
        "v": None, "x": 2, "y": None, "z": {"w": -0.25}}
    a = records([3, 0, 2, 1], 4)
    b = records([4, 1, 2, 0], 4)
    first = compare.compare(a, b, resamples=200, seed=7)
    assert first == compare.compare(a, b, resamples=200, seed=7)
    assert first["gained"]["k_of_k"] == ["t0000"] and first["lost"]["pass_at_k"] == ["t0003"]
    assert first["delta"]["pass@1"] == pytest.approx((7 - 6) / 16)


def test_only_tasks_scored_in_both_are_paired():
    a = records([4, 0, 2], 4)
    b = records([4, 4], 4)  # t0002 not run in b
    result = compare.compare(a, b, resamples=100)
    assert result["ci"]["tasks"] == 2
    assert result["gained"]["k_of_k"] == ["t0001"]


def test_compare_md_reads_in_percent_under_the_campaigns_names(tmp_path):
    # compare.md said "# trials.jsonl vs trials.jsonl", gave shares as "0.5570" and listed pass@1 twice
    base = campaign(tmp_path / "eval" / "base", [4, 0, 2, 1, 3, 0, 4, 2, 1, 0])
    trained = campaign(tmp_path / "eval" / "trained", [4, 2, 4, 1, 3, 1, 4, 4, 2, 0])
    assert compare.main([str(base), str(trained), "--out", str(tmp_path / "cmp"), "--resamples", "50"]) == 0
    report = (tmp_path / "cmp" / "compare.md").read_text()
    assert report.startswith("# trained vs base\n") and "trials.jsonl" not in report
    assert "| score | base | trained | delta | 95% bootstrap |" in report
    assert report.count("| pass@1 |") == 1 and "| pass@4 |" in report
    assert "| pass@1 | 42.5% | 62.5% | +20.0 pts | [" in report
    assert "| observed 4/4 | 2 (20.0%) | 4 (40.0%) | +20.0 pts |" in report
    assert "| retail | " in report and "0.4250" not in report
    assert compare.main([str(base), str(trained), "--out", str(tmp_path / "named"), "--resamples", "50",
                         "--names", "sft", "grpo"]) == 0
    assert (tmp_path / "named" / "compare.md").read_text().startswith("# grpo vs sft\n")


def test_campaigns_in_one_directory_are_named_by_their_files():
    assert compare.campaign_names(Path("runs/x/base.jsonl"), Path("runs/x/trained.jsonl")) == ("base", "trained")
    assert compare.campaign_names(Path("eval/base/trials.jsonl"), Path("eval/trained/trials.jsonl")) == (
        "base", "trained")
