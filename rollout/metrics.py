"""Reliability and cost metrics as pure functions of per-task counts (the seed paper's definitions).

Everything here takes plain numbers (n clean trials and c successes per task, token counts, prices) and
returns plain numbers, so the seed paper's arithmetic can be checked from synthetic counts and the same code
serves evaluation, selection and comparison. System-error trials never reach these functions as failures:
callers count them separately (`rollout.records`) and pass only clean trials here.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from math import comb

import numpy as np

PASS_AT_K = (1, 5, 10, 20)  # the k values reported, those not above the campaign's trials per task


@dataclasses.dataclass(frozen=True)
class TaskCounts:
    """One task's outcome: `n` clean trials (system errors excluded), `c` of them passed."""

    task_id: str
    domain: str
    n: int
    c: int

    def __post_init__(self) -> None:
        if not 0 <= self.c <= self.n:
            raise ValueError(f"task {self.task_id}: successes {self.c} must lie in [0, trials {self.n}]")

    def observed_all_of(self, k: int) -> bool:
        """Observed k/k, strictly: at least k clean trials and every one passed. A task that lost a trial to a
        system error was not observed k times, so it does not count however its clean trials went."""
        return 0 < k <= self.n and self.c == self.n

    @property
    def all_clean_passed(self) -> bool:
        """Every clean trial passed (at least one): k/k with the system-error trials ignored."""
        return self.n > 0 and self.c == self.n


def pass_at_1(counts: Sequence[TaskCounts]) -> float | None:
    """Total successes / total clean trials (pooled over tasks); None without clean trials."""
    trials = sum(t.n for t in counts)
    return sum(t.c for t in counts) / trials if trials else None


def pass_at_k_task(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k trials drawn without replacement from n passes:
    1 - C(n-c, k) / C(n, k). Needs k <= n."""
    _check_k(n, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k_combinatorial(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k: chance that all of k trials drawn without replacement pass, C(c, k) / C(n, k)."""
    _check_k(n, k)
    return comb(c, k) / comb(n, k)


def pass_hat_k_plugin(n: int, c: int, k: int) -> float:
    """ThinkingBox's pass^k: the per-task success rate raised to the k-th power, (c / n) ** k."""
    _check_k(n, k)
    return (c / n) ** k


def _check_k(n: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"k={k} needs 1 <= k <= n={n} clean trials")


def mean_over_tasks(counts: Sequence[TaskCounts], k: int, per_task) -> float | None:
    """Mean of `per_task(n, c, k)` over the tasks with at least k clean trials (None if there are none).
    A task short of k clean trials (system errors) has no unbiased estimate and is left out of this k."""
    values = [per_task(t.n, t.c, k) for t in counts if t.n >= k]
    return sum(values) / len(values) if values else None


def reported_ks(k: int, ks: Sequence[int] = PASS_AT_K) -> list[int]:
    """The k values to report for a campaign of k trials per task: those of `ks` up to k, and k itself."""
    return sorted({x for x in ks if x <= k} | {k}) if k >= 1 else []


def pass_at_k_table(counts: Sequence[TaskCounts], ks: Sequence[int]) -> dict[str, float | None]:
    return {str(k): mean_over_tasks(counts, k, pass_at_k_task) for k in ks}


def pass_hat_k_tables(counts: Sequence[TaskCounts], ks: Sequence[int]) -> dict[str, dict[str, float | None]]:
    """Both named conventions of pass^k, keyed by k."""
    return {"combinatorial": {str(k): mean_over_tasks(counts, k, pass_hat_k_combinatorial) for k in ks},
            "plugin": {str(k): mean_over_tasks(counts, k, pass_hat_k_plugin) for k in ks}}


def observed_k_of_k(counts: Sequence[TaskCounts], k: int) -> dict[str, float | int | None]:
    """Tasks solved in all k trials, strictly (`TaskCounts.observed_all_of`): {count, share of tasks with a
    clean trial}."""
    return _task_share(counts, [t.observed_all_of(k) for t in counts])


def all_clean_trials_passed(counts: Sequence[TaskCounts]) -> dict[str, float | int | None]:
    """Tasks whose every clean trial passed, system-error trials ignored (`TaskCounts.all_clean_passed`):
    {count, share of tasks with a clean trial}. Reported beside the strict observed k/k, never instead of it:
    the gap between the two is the tasks that looked perfect only because trials were lost."""
    return _task_share(counts, [t.all_clean_passed for t in counts])


def _task_share(counts: Sequence[TaskCounts], hits: Sequence[bool]) -> dict[str, float | int | None]:
    scored = sum(1 for t in counts if t.n > 0)
    count = sum(hits)
    return {"count": count, "share": count / scored if scored else None}


def _jeffreys_posterior(n: int, c: int):
    """Beta(c + 1/2, n - c + 1/2), frozen. scipy.stats is imported here, not at the top: it takes longer to
    import than the evaluation commands take to answer --help."""
    from scipy.stats import beta

    return beta(c + 0.5, n - c + 0.5)


def jeffreys_interval(n: int, c: int, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed quantiles of the Jeffreys posterior Beta(c + 1/2, n - c + 1/2) of a success rate."""
    if not 0 <= c <= n:
        raise ValueError(f"successes {c} must lie in [0, trials {n}]")
    tail = (1.0 - level) / 2
    low, high = _jeffreys_posterior(n, c).ppf([tail, 1.0 - tail])
    return float(low), float(high)


def band_masses(n: int, c: int, edges: Sequence[float]) -> list[float]:
    """Posterior mass of Beta(c + 1/2, n - c + 1/2) in each band [edges[i], edges[i+1])."""
    if list(edges) != sorted(edges) or edges[0] != 0.0 or edges[-1] != 1.0 or len(edges) < 3:
        raise ValueError(f"band edges must rise from 0 to 1 with at least two bands, got {list(edges)}")
    cdf = _jeffreys_posterior(n, c).cdf(list(edges))
    return [float(cdf[i + 1] - cdf[i]) for i in range(len(edges) - 1)]


def most_probable_band(masses: Sequence[float], rel_tol: float = 1e-9) -> int:
    """Index of the band with the most mass; bands are ordered hardest first, so a tie (equal within
    `rel_tol`) goes to the lowest index, the harder band."""
    top = max(masses)
    return next(i for i, m in enumerate(masses) if m >= top * (1.0 - rel_tol))


# --- tokens and cost -------------------------------------------------------------------------------------

USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


@dataclasses.dataclass(frozen=True)
class Price:
    """US dollars per 1M tokens. Cached input tokens are billed at `cached_input` instead of `input`;
    reasoning tokens are part of the completion and billed as output."""

    input: float
    cached_input: float
    output: float


def trial_cost(usage: Mapping[str, int], price: Price | None) -> float | None:
    """Estimated dollars of one trial, None when the price is unknown (never 0 for "unknown")."""
    if price is None:
        return None
    prompt, cached = usage.get("prompt_tokens", 0), usage.get("cached_tokens", 0)
    if cached > prompt:
        raise ValueError(f"cached_tokens {cached} exceed prompt_tokens {prompt}")
    dollars = (prompt - cached) * price.input + cached * price.cached_input + usage.get("completion_tokens", 0) \
        * price.output
    return dollars / 1e6


def cost_breakdown(campaign: float | None, trials: int, successes: int, observed_all: int) -> dict[str, float | None]:
    """Campaign dollars, and per trial run, per successful trial and per observed-k/k task (the seed's
    `campaign / tasks at 20/20`). A ratio with nothing to divide by, or an unknown campaign, is None."""

    def per(count: int) -> float | None:
        return campaign / count if campaign is not None and count else None

    return {"campaign": campaign, "per_trial": per(trials), "per_success": per(successes),
            "per_observed_k_of_k": per(observed_all)}


def sum_usage(usages: Sequence[Mapping[str, int]]) -> dict[str, int]:
    return {name: sum(u.get(name, 0) for u in usages) for name in USAGE_FIELDS}


# --- paired bootstrap over tasks (for comparing two campaigns) -----------------------------------------------

def per_task_scores(counts: Sequence[TaskCounts], ks: Sequence[int], observed_k: int) -> dict[str, np.ndarray]:
    """Per-task values whose task mean is each score ("pass@k/5", "pass^k/plugin/5", ...; NaN where a task
    has fewer than k clean trials), plus "c" and "n" for the pooled pass@1 and "observed" for the strict
    observed k/k of a campaign of `observed_k` trials per task. Arrays: [tasks] float64."""
    table: dict[str, np.ndarray] = {"c": np.array([t.c for t in counts], float),
                                    "n": np.array([t.n for t in counts], float),
                                    "observed": np.array([float(t.observed_all_of(observed_k)) if t.n else np.nan
                                                          for t in counts])}
    named = {"pass@k": pass_at_k_task, "pass^k/combinatorial": pass_hat_k_combinatorial,
             "pass^k/plugin": pass_hat_k_plugin}
    for name, per_task in named.items():
        for k in ks:
            table[f"{name}/{k}"] = np.array([per_task(t.n, t.c, k) if t.n >= k else np.nan for t in counts])
    return table


def statistic_of(name: str, table: Mapping[str, np.ndarray], index: np.ndarray) -> np.ndarray:
    """The score `name` over resampled tasks `index` [resamples, tasks] -> [resamples]."""
    if name == "pass@1":
        return table["c"][index].sum(axis=1) / np.maximum(table["n"][index].sum(axis=1), 1)
    values = table["observed" if name.startswith("observed_k_of_k") else name][index]
    if name == "observed_k_of_k/count":
        return np.nansum(values, axis=1)
    with warnings.catch_warnings():  # a resample whose tasks all lack k clean trials has no mean: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=1)


def paired_bootstrap_ci(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], name: str, *,
                        resamples: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile interval of score(b) - score(a) when the tasks (rows, paired: the same task order in a and
    b) are resampled with replacement. Deterministic for a seed; None with no tasks."""
    tasks = len(a["n"])
    if tasks == 0:
        return None
    index = np.random.default_rng(seed).integers(0, tasks, size=(resamples, tasks))
    deltas = statistic_of(name, b, index) - statistic_of(name, a, index)
    deltas = deltas[~np.isnan(deltas)]
    if deltas.size == 0:
        return None
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(deltas, [tail, 100 - tail])
    return float(low), float(high)
