"""`python -m rollout.evaluate --from-trials`: summary.json's public keys, system errors beside the scores,
prices (unknown -> null), the Markdown report and the PNG plots, all from records alone."""

import json
from pathlib import Path

import pytest

from rollout import evaluate
from rollout.evaluation import prices as price_table
from rollout.evaluation.figures import domains_figure, successes_figure
from rollout.records import TrialRecord, Usage
from tests.rollout.campaign_support import records
from tests.rollout.chart_support import drawn, png_size

KEYS = {"tasks", "trials", "k", "pass@1", "pass@k", "pass^k", "observed_k_of_k", "all_clean_trials_passed",
        "system_errors", "tokens", "malformed_tool_calls", "cost_usd", "domains", "coverage"}


def campaign(tmp_path, with_errors: bool):
    per_task = [4, 4, 2, 0, 1, 3, 4, 0, 2, 1]
    recs = records(per_task, 4, usage_totals={"prompt_tokens": 4_000_000, "cached_tokens": 1_000_000,
                                              "completion_tokens": 400_000})
    if with_errors:  # task t0010 (retail) loses two of its four trials to the engine, t0011 all four
        recs += [TrialRecord(task_id="t0010", domain="retail", trial=t, passed=t == 0, system_error=None,
                             termination="user_done", model="policy", usage=Usage(prompt_tokens=10)) for t in (0, 1)]
        recs += [TrialRecord(task_id=tid, domain="retail", trial=t, passed=None, system_error="engine",
                             termination="system_error", model="policy", usage=Usage(prompt_tokens=10))
                 for tid, trials in (("t0010", (2, 3)), ("t0011", range(4))) for t in trials]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return path, per_task


def test_summary_keys_and_numbers_from_records(tmp_path):
    path, per_task = campaign(tmp_path, with_errors=False)
    assert evaluate.main(["--from-trials", str(path), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary) == KEYS
    assert set(summary["pass^k"]) == {"combinatorial", "plugin"} and set(summary["pass@k"]) == {"1", "4"}
    assert set(summary["observed_k_of_k"]) == {"count", "share"}
    assert set(summary["cost_usd"]) == {"campaign", "per_trial", "per_success", "per_observed_k_of_k"}
    assert summary["k"] == 4 and summary["tasks"] == 10 and summary["trials"] == 40
    assert summary["pass@1"] == sum(per_task) / 40
    assert summary["observed_k_of_k"] == {"count": 3, "share": 0.3}
    assert summary["coverage"] == {"exact": True, "expected": 40, "missing": 0, "system_errors": 0,
                                   "system_errors_retried": 0}
    assert summary["pass@k"]["4"] == sum(c > 0 for c in per_task) / 10
    assert summary["cost_usd"]["campaign"] is None  # the default table prices no model: unknown, not 0
    for name, block in summary["domains"].items():
        assert set(block) == KEYS - {"domains", "coverage"}, name
    assert sum(b["trials"] for b in summary["domains"].values()) == 40
    assert summary["tokens"]["prompt_tokens"] == 4_000_000


def test_system_errors_are_beside_the_scores_and_prices_give_cost(tmp_path):
    path, per_task = campaign(tmp_path, with_errors=True)
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: t1\nmodels:\n  policy: {input: 2.0, cached_input: 0.5, output: 10.0}\n")
    out = tmp_path / "out"
    assert evaluate.main(["--from-trials", str(path), "--out", str(out), "--prices", str(prices)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["system_errors"] == {"total": 6, "by_kind": {"engine": 6}}
    assert summary["tasks"] == 11 and summary["trials"] == 42  # t0011 has no clean trial; errors not scored
    assert summary["pass@1"] == (sum(per_task) + 1) / 42
    assert summary["pass@k"]["4"] == sum(c > 0 for c in per_task) / 10  # t0010 has only 2 clean trials
    tokens = summary["tokens"]
    expected = ((tokens["prompt_tokens"] - tokens["cached_tokens"]) * 2.0 + tokens["cached_tokens"] * 0.5
                + tokens["completion_tokens"] * 10.0) / 1e6
    assert abs(summary["cost_usd"]["campaign"] - expected) < 1e-9
    assert abs(summary["cost_usd"]["per_trial"] - expected / 48) < 1e-12  # system-error trials cost too
    report = (out / "report.md").read_text()
    assert "- engine: 6" in report and "t0011" in report and "pass^k plug-in" in report
    assert summary["coverage"]["exact"] is False and summary["coverage"]["system_errors"] == 6
    assert "Coverage is not exact**: 0 of 48 trials missing and 6 lost to system errors" in report
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert {r["task_id"]: r["system_errors"] for r in rows}["t0010"] == 2
    posterior_means = {r["task_id"]: (r["c"] + 0.5) / (r["n"] + 1) for r in rows if r["n"]}
    assert all(r["jeffreys_95"][0] < posterior_means[r["task_id"]] < r["jeffreys_95"][1] for r in rows if r["n"])
    assert {r["task_id"]: r["jeffreys_95"] for r in rows}["t0011"] is None
    histogram = [sum(1 for r in rows if r["n"] and r["c"] == c) for c in range(5)]
    heights, annotations, ticks, legend = drawn(successes_figure(rows, 4).axes[0])
    assert heights == histogram and annotations == [str(v) for v in histogram]  # kinds in c order here
    assert ticks == ["0", "1", "2", "3", "4"]
    assert legend == ["never passed", "sometimes passed", "all 4 passed (observed 4/4)"]
    figure = domains_figure(summary)
    heights, annotations, ticks, legend = drawn(figure.axes[0])
    assert ticks == list(summary["domains"]) and legend == ["pass@1", "pass@4", "observed 4/4"]
    pass1 = [block["pass@1"] for block in summary["domains"].values()]
    assert heights[:len(pass1)] == pass1 and annotations[:len(pass1)] == [f"{v:.0%}" for v in pass1]
    assert "Scores per domain" in figure.axes[0].get_title() and figure.axes[0].get_ylabel()
    for plot in ("domains.png", "successes.png"):
        assert min(png_size(out / plot)) >= 400


def test_bad_price_table_is_a_clear_error(tmp_path):
    path, _ = campaign(tmp_path, with_errors=False)
    prices = tmp_path / "prices.yaml"
    prices.write_text("models: {}\n")
    assert evaluate.main(["--from-trials", str(path), "--out", str(tmp_path / "o"), "--prices", str(prices)]) == 2


def test_default_price_table_is_the_checkouts_configs_prices_yaml(tmp_path, monkeypatch):
    # shipped inside the package, as a link to the one copy in configs/ (the wheel carries the file itself)
    assert price_table.DEFAULT_PRICES.resolve() == Path(__file__).resolve().parents[3] / "configs" / "prices.yaml"
    table = price_table.load_prices()
    assert table.version and table.price("policy") is None  # no documented per-token price: cost unknown
    monkeypatch.setattr(price_table, "DEFAULT_PRICES", tmp_path / "absent.yaml")  # no table at all
    assert price_table.load_prices().models == {}
    with pytest.raises(FileNotFoundError, match="--prices FILE"):
        price_table.load_prices(tmp_path / "absent.yaml")  # a table asked for by name must exist
