"""The figures of the evaluation and selection reports, built from their summaries (no I/O here).

- domains: pass@1, pass@k and the observed k/k share per domain, side by side, because a domain can look
  fine on pass@1 and still be unreliable (few tasks solved in every trial).
- successes: tasks by number of successful trials, with the never / sometimes / always solved tasks coloured
  apart: the "always" bar is observed k/k, the "never" bar is where pass@k cannot reach.
- bands: selection candidates per difficulty band, kept bands coloured apart from dropped ones, with each
  band's range on its tick, and the candidates not judged (too few clean runs) beside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from rollout.evaluation.charts import count_bars, default_style, grouped_bars, label_axes, new_figure

NOT_JUDGED = "too few clean runs"
NEUTRAL = "0.6"  # grey: candidates not judged are neither kept (good) nor dropped


@default_style()
def domains_figure(summary: Mapping[str, Any]) -> Figure:
    """Grouped bars per domain of summary.json's `domains`: pass@1, pass@k (k = the campaign's k) and the
    observed k/k share, each a fraction in [0, 1]."""
    k, domains = summary["k"], summary["domains"]
    figure = new_figure(max(6.0, 1.6 * len(domains) + 2), 4.5)
    axes = figure.add_subplot()
    series = {"pass@1": [block["pass@1"] for block in domains.values()],
              f"pass@{k}": [block["pass@k"].get(str(k)) for block in domains.values()],
              f"observed {k}/{k}": [block["observed_k_of_k"]["share"] for block in domains.values()]}
    grouped_bars(axes, list(domains), series, value_format=".0%", top=1.0)
    label_axes(axes, f"Scores per domain ({summary['tasks']} tasks, k = {k} trials per task)", "domain",
               "share of trials (pass@1) or tasks")
    return figure


def success_histogram(rows: Sequence[Mapping[str, Any]], k: int) -> list[int]:
    """Tasks with 0, 1, ..., k successes (tasks with a scored trial); longer if a task had more trials."""
    counts: dict[int, int] = {}
    for row in rows:
        if row["n"] > 0:
            counts[row["c"]] = counts.get(row["c"], 0) + 1
    return [counts.get(c, 0) for c in range(max(k, max(counts, default=0)) + 1)]


@default_style()
def successes_figure(rows: Sequence[Mapping[str, Any]], k: int) -> Figure:
    """Tasks per success count 0..k from tasks.jsonl's rows (`n` scored trials, `c` successes)."""
    histogram = success_histogram(rows, k)
    kinds = ["never passed" if c == 0 else f"all {k} passed (observed {k}/{k})" if c == k else "sometimes passed"
             for c in range(len(histogram))]
    figure = new_figure(max(6.0, 0.35 * len(histogram) + 3), 4.5)
    axes = figure.add_subplot()
    count_bars(axes, [str(c) for c in range(len(histogram))], histogram, kinds)
    label_axes(axes, f"Tasks by number of successful trials (k = {k})", f"successful trials out of {k}", "tasks")
    return figure


@default_style()
def bands_figure(per_band: Mapping[str, int], band_names: Sequence[str], band_edges: Sequence[float],
                 keep: Sequence[str]) -> Figure:
    """Candidates per band (hardest first) and, last, those not judged: `per_band` is
    rollout.evaluation.selection.band_counts' result (band names plus `too_few_clean_runs`)."""
    ticks = [f"{name}\n[{low:g}, {high:g}{']' if high >= 1 else ')'}"
             for name, low, high in zip(band_names, band_edges, band_edges[1:], strict=False)]
    kinds = ["kept" if name in keep else "dropped" for name in band_names]
    values = [per_band[name] for name in band_names]
    if per_band.get("too_few_clean_runs"):
        ticks, kinds, values = [*ticks, "not judged"], [*kinds, NOT_JUDGED], \
            [*values, per_band["too_few_clean_runs"]]
    figure = new_figure(max(6.0, 1.3 * len(ticks) + 1), 4.5)
    axes = figure.add_subplot()
    count_bars(axes, ticks, values, kinds, colours={NOT_JUDGED: NEUTRAL})
    label_axes(axes, f"Selection candidates per difficulty band ({sum(per_band.values())} tasks)",
               "band of the base policy's success rate (most Jeffreys posterior mass)", "tasks")
    return figure
