"""The metrics reproduce the seed paper's arithmetic from synthetic counts, and each
estimator agrees with brute-force enumeration or a closed form."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from rollout import metrics
from rollout.evaluation.prices import ModelPrice, PriceTable
from rollout.evaluation.summary import summarize
from tests.rollout.campaign_support import records, success_counts, task_counts

# (successes, tasks at 20/20, tasks with a success) of 507 tasks x 20 trials, and the seed's printed figures.
SEED = {
    "base": dict(successes=5242, all_pass=38, any_pass=453, pass1="51.70", observed="7.50", pass20="89.35"),
    "grpo": dict(successes=6163, all_pass=107, any_pass=446, pass1="60.78", observed="21.10", pass20="87.97"),
}
PRICES = PriceTable(version="test", models={"policy": ModelPrice(input=1.0, cached_input=0.1, output=4.0)})


def pct(x: float) -> str:
    return f"{100 * x:.2f}"


@pytest.mark.parametrize("name", SEED)
def test_seed_table_from_counts(name):
    row = SEED[name]
    counts = task_counts(success_counts(507, 20, row["successes"], row["all_pass"], row["any_pass"]), 20)
    assert sum(t.n for t in counts) == 10_140
    assert pct(metrics.pass_at_1(counts)) == row["pass1"]
    observed = metrics.observed_k_of_k(counts, 20)
    assert observed["count"] == row["all_pass"] and pct(observed["share"]) == row["observed"]
    # With n = k = 20, unbiased pass@20 is the share of tasks with any success.
    assert pct(metrics.mean_over_tasks(counts, 20, metrics.pass_at_k_task)) == row["pass20"]
    # Combinatorial pass^20 is observed 20/20 when every task has exactly 20 trials; the plug-in convention
    # also credits tasks short of 20/20 with (c/20)^20.
    tables = metrics.pass_hat_k_tables(counts, [20])
    assert tables["combinatorial"]["20"] == pytest.approx(observed["share"])
    plugin = sum(Fraction(t.c, 20) ** 20 for t in counts) / 507
    assert tables["plugin"]["20"] == pytest.approx(float(plugin)) and plugin > observed["share"]


def usage_for(campaign_usd: float) -> dict[str, int]:
    """Token totals costing `campaign_usd` at PRICES: 1e9 cached prompt tokens ($100), 5e7 output ($200)
    and the rest as uncached prompt tokens at $1 per 1M."""
    uncached = round((campaign_usd - 300.0) * 1e6)
    return {"prompt_tokens": uncached + 1_000_000_000, "cached_tokens": 1_000_000_000, "completion_tokens": 50_000_000}


def test_seed_cost_arithmetic_from_records():
    base_counts = success_counts(507, 20, 5242, 38, 453)
    grpo_counts = success_counts(507, 20, 6163, 107, 446)
    base = summarize(records(base_counts, 20, usage_totals=usage_for(925.80)), PRICES)["cost_usd"]
    grpo = summarize(records(grpo_counts, 20, usage_totals=usage_for(855.58)), PRICES)["cost_usd"]
    assert base["campaign"] == pytest.approx(925.80) and grpo["campaign"] == pytest.approx(855.58)
    assert f"{base['per_success']:.3f}" == "0.177" and f"{grpo['per_success']:.3f}" == "0.139"
    assert f"{base['per_observed_k_of_k']:.2f}" == "24.36" and f"{grpo['per_observed_k_of_k']:.2f}" == "8.00"
    assert base["per_trial"] == pytest.approx(925.80 / 10_140)
    change = {key: 100 * (grpo[key] / base[key] - 1) for key in ("campaign", "per_success", "per_observed_k_of_k")}
    assert {key: f"{value:.1f}" for key, value in change.items()} == {
        "campaign": "-7.6", "per_success": "-21.4", "per_observed_k_of_k": "-67.2"}


def test_other_seed_rows_observed_shares():
    for all_pass, share in ((68, "13.41"), (241, "47.53")):  # Kimi-K3, Claude Opus 5
        counts = task_counts([20] * all_pass + [3] * (507 - all_pass), 20)
        assert pct(metrics.observed_k_of_k(counts, 20)["share"]) == share


def enumerate_subsets(n: int, c: int, k: int, rule) -> float:
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(rule(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 2, 2), (6, 3, 4), (7, 7, 3), (8, 1, 8), (8, 5, 5)])
def test_estimators_match_enumeration_of_k_subsets(n, c, k):
    assert metrics.pass_at_k_task(n, c, k) == pytest.approx(enumerate_subsets(n, c, k, any))
    assert metrics.pass_hat_k_combinatorial(n, c, k) == pytest.approx(enumerate_subsets(n, c, k, all))
    assert metrics.pass_hat_k_plugin(n, c, k) == pytest.approx((c / n) ** k)


def test_k_above_clean_trials_is_left_out_not_guessed():
    with pytest.raises(ValueError, match="k=5 needs"):
        metrics.pass_at_k_task(4, 2, 5)
    counts = task_counts([20, 0], 20)
    short = metrics.TaskCounts("short", "retail", 3, 3)  # lost trials to system errors
    assert metrics.mean_over_tasks([*counts, short], 5, metrics.pass_at_k_task) == pytest.approx(0.5)
    assert metrics.reported_ks(8) == [1, 5, 8] and metrics.reported_ks(20) == [1, 5, 10, 20]


def test_jeffreys_interval_matches_the_arcsine_closed_form():
    # Beta(1/2, 1/2) is the arcsine law: CDF 2/pi asin(sqrt(x)), quantile sin^2(p pi / 2).
    low, high = metrics.jeffreys_interval(0, 0)
    assert low == pytest.approx(math.sin(0.025 * math.pi / 2) ** 2)
    assert high == pytest.approx(math.sin(0.975 * math.pi / 2) ** 2)
    low, high = metrics.jeffreys_interval(20, 20)
    assert 0.88 < low < high <= 1.0


def test_trial_cost_unknown_price_is_none_not_zero():
    usage = {"prompt_tokens": 2_000_000, "cached_tokens": 1_000_000, "completion_tokens": 500_000}
    assert metrics.trial_cost(usage, None) is None
    assert metrics.trial_cost(usage, metrics.Price(2.0, 0.5, 8.0)) == pytest.approx(2.0 + 0.5 + 4.0)
    assert metrics.cost_breakdown(None, 10, 5, 1) == {
        "campaign": None, "per_trial": None, "per_success": None, "per_observed_k_of_k": None}
    assert metrics.cost_breakdown(10.0, 10, 5, 0)["per_observed_k_of_k"] is None


def test_paired_bootstrap_interval_brackets_a_known_shift_and_is_seeded():
    a = task_counts([0] * 50 + [10] * 50, 10)
    b = task_counts([10] * 50 + [10] * 50, 10)
    ta, tb = metrics.per_task_scores(a, [1, 10], 10), metrics.per_task_scores(b, [1, 10], 10)
    low, high = metrics.paired_bootstrap_ci(ta, tb, "pass@1", seed=3)
    assert low < 0.5 < high and low > 0.3
    assert metrics.paired_bootstrap_ci(ta, tb, "pass@1", seed=3) == (low, high)
    same = metrics.paired_bootstrap_ci(ta, ta, "pass@k/10")
    assert same == (0.0, 0.0)
    count = metrics.paired_bootstrap_ci(ta, tb, "observed_k_of_k/count", resamples=200)
    assert np.all(np.asarray(count) > 0)
