"""`python -m rollout.compare A.jsonl B.jsonl --out DIR`: two campaigns side by side (e.g. base vs trained).

Why: a gain in pass@1 can hide lost tasks, and over a few hundred tasks a few points may be noise. So every
score's delta (b - a) comes with a paired bootstrap interval over the tasks both campaigns ran, and the tasks
gained and lost are listed: at k/k (observed k/k strictly, as in summary.json: all k trials of the campaign
scored and passed in one campaign, not in the other) and at pass@k (some trial passed in one, none in the
other), overall and per domain.

DIR/compare.json: `a`, `b` (summaries as in summary.json), `delta` (b - a, same keys; null where either side
is null), `ci` (95% bootstrap intervals of the score deltas, same keys as the scores; tokens and cost have
deltas but no interval), `gained`, `lost`. DIR/compare.md: the headline scores and pass@1 per domain in
percent, deltas in percentage points (rollout.compare_table), titled by the campaigns' names (--names, by
default the directories holding the two files). DIR/domains.png: pass@1 per domain, a beside b
(rollout.plots.compare_domains_png).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollout.compare_table import comparison_markdown
from rollout.evaluation.coverage import campaign_coverage, refuse_inexact
from rollout.evaluation.prices import PriceTable, load_prices
from rollout.evaluation.summary import summarize
from rollout.log_routing import LOG_FILE, OWN_PACKAGES, add_verbose_flag, route_logs
from rollout.metrics import TaskCounts, paired_bootstrap_ci, per_task_scores, reported_ks
from rollout.plots import compare_domains_png
from rollout.records import TrialRecord, atomic_write, canonical_json, read_records, task_counts
from rollout.report_numbers import pct, points

log = logging.getLogger("rollout.compare")


def delta(a: Any, b: Any) -> Any:
    """b - a on every numeric leaf present in both (dicts by key); null where either is null or missing."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {key: delta(a.get(key), b.get(key)) for key in sorted(set(a) | set(b))}
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return b - a
    return None


def _paired(a: Sequence[TaskCounts], b: Sequence[TaskCounts]) -> tuple[list[TaskCounts], list[TaskCounts]]:
    """The tasks both campaigns scored, in the same order."""
    by_id = {t.task_id: t for t in b if t.n > 0}
    common = [t for t in a if t.n > 0 and t.task_id in by_id]
    return common, [by_id[t.task_id] for t in common]


def score_intervals(a: Sequence[TaskCounts], b: Sequence[TaskCounts], ks: Sequence[int], trials: tuple[int, int], *,
                    resamples: int, seed: int) -> dict[str, Any]:
    """Bootstrap intervals of the score deltas, keyed like the summary's scores; `trials` are each campaign's
    trials per task (its k of observed k/k)."""
    pa, pb = _paired(a, b)
    ta, tb = per_task_scores(pa, ks, trials[0]), per_task_scores(pb, ks, trials[1])

    def ci(name: str) -> list[float] | None:
        interval = paired_bootstrap_ci(ta, tb, name, resamples=resamples, seed=seed)
        return None if interval is None else list(interval)

    return {"tasks": len(pa), "pass@1": ci("pass@1"), "pass@k": {str(k): ci(f"pass@k/{k}") for k in ks},
            "pass^k": {conv: {str(k): ci(f"pass^k/{conv}/{k}") for k in ks} for conv in ("combinatorial", "plugin")},
            "observed_k_of_k": {"count": ci("observed_k_of_k/count"), "share": ci("observed_k_of_k/share")}}


def _changes(a: Sequence[TaskCounts], b: Sequence[TaskCounts],
             trials: tuple[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tasks gained and lost at observed k/k (strict, each campaign with its own `trials` per task) and at
    pass@k."""
    pa, pb = _paired(a, b)
    gained: dict[str, Any] = {"k_of_k": [], "pass_at_k": []}
    lost: dict[str, Any] = {"k_of_k": [], "pass_at_k": []}
    for x, y in zip(pa, pb, strict=True):
        k_of_k = x.observed_all_of(trials[0]), y.observed_all_of(trials[1])
        for key, before, after in (("k_of_k", *k_of_k), ("pass_at_k", x.c > 0, y.c > 0)):
            if after and not before:
                gained[key].append(x.task_id)
            elif before and not after:
                lost[key].append(x.task_id)
    return gained, lost


def compare(a: Sequence[TrialRecord], b: Sequence[TrialRecord], *, prices: PriceTable | None = None,
            resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """compare.json's content for campaigns `a` and `b` (their trial records)."""
    sa, sb = summarize(a, prices), summarize(b, prices)
    trials = sa["k"], sb["k"]
    ks = reported_ks(min(trials))
    ca, cb = task_counts(a), task_counts(b)
    gained, lost = _changes(ca, cb, trials)
    result = {"a": sa, "b": sb, "delta": delta(sa, sb),
              "ci": score_intervals(ca, cb, ks, trials, resamples=resamples, seed=seed), "gained": gained,
              "lost": lost}
    result["ci"]["domains"], gained["domains"], lost["domains"] = {}, {}, {}
    for domain in sorted(set(sa["domains"]) & set(sb["domains"])):
        da, db = [t for t in ca if t.domain == domain], [t for t in cb if t.domain == domain]
        result["ci"]["domains"][domain] = score_intervals(da, db, ks, trials, resamples=resamples, seed=seed)
        gained["domains"][domain], lost["domains"][domain] = _changes(da, db, trials)
    return result


def write_comparison(a: Path, b: Path, out: Path, *, names: tuple[str, str], prices: PriceTable | None = None,
                     resamples: int = 1000, seed: int = 0, allow_inexact: bool = False) -> dict[str, Any]:
    """Compares the trial records in files `a` and `b` and writes DIR/compare.json, compare.md and domains.png
    (campaigns labelled by `names`); returns compare.json's content. A campaign whose coverage is not exact
    (rollout.evaluation.coverage) is refused with InexactCampaignError, unless `allow_inexact`; compare.json
    keeps both campaigns' coverage."""
    records = read_records(a), read_records(b)
    covered = {name: campaign_coverage(path, rs) for name, path, rs in zip(names, (a, b), records, strict=True)}
    if not allow_inexact:
        for name, path in zip(names, (a, b), strict=True):
            refuse_inexact(name, path, covered[name])
    result = compare(*records, prices=prices, resamples=resamples, seed=seed)
    result["coverage"] = {"a": covered[names[0]], "b": covered[names[1]]}
    atomic_write(out / "compare.json", canonical_json(result))
    atomic_write(out / "compare.md", comparison_markdown(result, names))
    compare_domains_png(out / "compare.json", out / "domains.png", (f"a: {names[0]}", f"b: {names[1]}"))
    return result


def campaign_names(a: Path, b: Path) -> tuple[str, str]:
    """The campaigns' names for the report when none are given: the directories holding their trial files (a
    campaign writes trials.jsonl into its own directory: eval/base/trials.jsonl is "base"; the file name,
    the same for every campaign, names none), or the files' names less the suffix where both lie in one
    directory (base.jsonl and trained.jsonl)."""
    directories = a.resolve().parent.name, b.resolve().parent.name
    return directories if directories[0] != directories[1] else (a.stem, b.stem)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rollout.compare", description=(__doc__ or "").split("\n")[0])
    p.add_argument("a", type=Path, help="trial records of campaign A (e.g. the base policy)")
    p.add_argument("b", type=Path, help="trial records of campaign B (e.g. the trained policy)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--names", nargs=2, metavar=("A", "B"),
                   help="the campaigns' names in compare.md and domains.png (default: their directories' names)")
    p.add_argument("--prices", type=Path, help="price table YAML (default configs/prices.yaml)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (same seed, same intervals)")
    p.add_argument("--allow-inexact", action="store_true",
                   help="compare campaigns with missing or system-error trials too (flagged in compare.md)")
    add_verbose_flag(p)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    route_logs(args.out / LOG_FILE, verbose=args.verbose, own=OWN_PACKAGES)
    try:
        names = (args.names[0], args.names[1]) if args.names else campaign_names(args.a, args.b)
        result = write_comparison(args.a, args.b, args.out, names=names, prices=load_prices(args.prices),
                                  resamples=args.resamples, seed=args.seed, allow_inexact=args.allow_inexact)
    except ValueError as error:
        log.error("%s", error)
        return 2
    log.info("pass@1 %s -> %s (%s); written to %s", pct(result["a"]["pass@1"]), pct(result["b"]["pass@1"]),
             points(result["delta"]["pass@1"]), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
